"""Pure builders: what a refresh loaded (`load.data.ConsoleData`, the analyses) in, table rows and text out.

Everything here formats what the engine and the loaders already decided, so each view is tested on
exact cells without a screen. No module here imports Textual (tests/test_layers.py checks it, also
for what they import in turn): widgets in `ui.widgets` and screens in `ui.screens` draw the result.
Builders may read the loaders' result types; the loaders never import a builder.
"""
