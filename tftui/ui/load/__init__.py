"""Loaders: the blocking reads and computations behind one refresh, run off the UI thread.

The app runs these in thread workers (the refresh, the slow metrics analyses, a node's history) and
hands their results to the builders in `ui.render`. Nothing here imports Textual or a widget, nor a
builder (tests/test_layers.py checks both), so a load can never touch the screen it feeds.
"""
