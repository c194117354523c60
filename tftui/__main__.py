"""`python -m tftui` is the `tftui` command."""

from tftui.cli import main

raise SystemExit(main())
