"""tftui: GPU-pool efficiency console and controller for TensorFusion."""
