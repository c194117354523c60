"""The Textual console.

Textual draws at most `TEXTUAL_FPS` frames a second (60 by default) on a fixed beat, so a key that
arrives just after a frame was drawn (a refresh's, the header's refresh mark) waits for the next
beat or two before its own frame: 20–40 ms at 60, 11 at 240 (measured at 5,000 nodes). A frame is
drawn only when something changed, so a higher cap costs nothing while nothing moves. The console
asks for 240 unless `TEXTUAL_FPS` is set; it must be set before Textual is first imported, which
every console module does through this package.
"""

import os

FPS = "240"
os.environ.setdefault("TEXTUAL_FPS", FPS)
