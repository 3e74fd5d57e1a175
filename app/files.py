"""File checks shared by the commands and the evaluation report (no heavy imports: every
command imports it)."""

from __future__ import annotations

from pathlib import Path


def probe_writable(path: Path) -> None:
    """Open ``path`` for appending and close it again, leaving nothing behind where it did not
    exist: the check is the open itself (``os.access`` says yes to root, and /proc passed it).

    Raises:
        OSError: it cannot be written.
    """
    existed = path.exists()
    with path.open("a"):
        pass
    if not existed:
        path.unlink(missing_ok=True)
