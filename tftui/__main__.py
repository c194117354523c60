"""`python -m tftui` is the `tftui` command."""

from tftui.cli import run

run()
