"""What a progress bar needs to know of the terminal it draws on, for the embedders' own bars
(encode, train) and the application's (``app.text`` re-exports it)."""

from __future__ import annotations

import os
import sys
from typing import Any


def bar_size(stream: Any = None) -> dict[str, Any]:
    """tqdm's size arguments for a progress bar on ``stream`` (stderr by default): the
    terminal's, read again as its window changes; a fixed 80 by 24 where the terminal says it
    is 0 wide or 0 high (a serial console, some `docker exec -t` sessions), on which tqdm drew
    nothing at all: `facet index` of 50 documents printed only its summary."""
    stream = sys.stderr if stream is None else stream
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):  # not a terminal (tqdm decides), closed
        return {"dynamic_ncols": True}
    if size.columns and size.lines:
        return {"dynamic_ncols": True}
    return {"ncols": size.columns or 80, "nrows": size.lines or 24}
