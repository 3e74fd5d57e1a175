"""The data folder's ``server.lock``: the file `facet serve`, `facet ui` and `facet move-metadata`
hold locked (a flock) while they run, with their pid, command, address and start written in it
(``app.services.context.holding_server_lock``). Here (below ``app``) because a schema migration
(``indexer.migrate``) probes it too: reading it, probing it and saying who holds it live once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SERVER_LOCK = "server.lock"


def server_holder(path: Path) -> dict[str, Any]:
    """What the server holding ``path`` (a ``SERVER_LOCK``) wrote there: pid, command, address,
    started; empty where it cannot be read."""
    import json

    try:
        holder = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def folder_server(data_dir: Path) -> dict[str, Any] | None:
    """The Facet process (`facet serve`, `facet ui`, `facet move-metadata`) holding the data
    folder now, as its ``server.lock`` says (``server_holder``), or None: no lock file, or nobody
    holds it. Probed with a non-blocking shared lock let go at once (a holder's lock is
    exclusive; two probes at once do not see each other); nothing is created. This process's
    own hold, through another descriptor, is seen too (its pid tells it)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock is held either
        return None

    path = Path(data_dir) / SERVER_LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return server_holder(path)
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def server_who(holder: dict[str, Any], *, since: bool = True) -> str:
    """A ``SERVER_LOCK`` holder in words: "facet serve, pid 12, on 127.0.0.1:8000, since
    ..." (``since``: with its start), "unknown" where nothing could be read."""
    return ", ".join(str(part) for part in (
        holder.get("command"), f"pid {holder['pid']}" if holder.get("pid") else None,
        f"on {holder['address']}" if holder.get("address") else None,
        f"since {holder['started']}" if since and holder.get("started") else None)
        if part) or "unknown"
