"""The console's two themes: semantic colours (success/warning/error/accent) defined once.

Widgets and TCSS use only theme variables (`$warning`, `$error`, `$production`), never fixed
colours, so the light theme keeps every cue readable on a light terminal (k9s #169, #3388): its
warning, error and success colours are darker than the dark theme's, which would vanish on white.
`$production` is the header band of a production context (config `production:` patterns).
A gauge's allocated layer and figure are `$primary-lighten-3`, not `$primary`, and the cursor row is
a 25 % tint of `$primary` (`ResourceTable`): on solid `$primary` the allocated figure vanished and
red figures were unreadable on the selected row in both themes.
"""

from __future__ import annotations

from textual.theme import Theme

DARK = Theme(
    name="tftui-dark",
    primary="#0178D4",
    secondary="#004578",
    warning="#ffa62b",
    error="#ba3c5b",
    success="#4EBF71",
    accent="#ffa62b",
    foreground="#e0e0e0",
    dark=True,
    variables={"production": "#b3001b", "production-text": "#ffffff"},
)
LIGHT = Theme(
    name="tftui-light",
    primary="#004578",
    secondary="#0178D4",
    warning="#9a4d00",
    error="#b00020",
    success="#1e6b34",
    accent="#8a4b00",
    foreground="#1a1a1a",
    background="#f4f4f4",
    surface="#e8e8e8",
    panel="#dcdcdc",
    dark=False,
    variables={"production": "#c8102e", "production-text": "#ffffff", "footer-key-foreground": "#004578"},
)
THEMES: dict[str, Theme] = {"dark": DARK, "light": LIGHT}
"""Config `theme:` value → Textual theme."""
