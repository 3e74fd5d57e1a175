"""File checks shared by the commands and the evaluation report (no heavy imports: every
command imports it)."""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger(__name__)

# The open-files limit a server or worker raises its soft limit to, where the hard limit
# allows (``raise_open_files_limit``).
OPEN_FILES_TARGET = 65536


def probe_writable(path: Path) -> None:
    """Open ``path`` for appending and close it again, leaving nothing behind where it did not
    exist: the check is the open itself (``os.access`` says yes to root, and /proc passed it).
    A link is written through (a dangling one's target made and removed again: the link itself
    was deleted, and the output then written in its place); a fifo or a device is not opened
    (a fifo's reader took the probe's close for the end of its input, and the real write then
    waited for a reader for ever), only asked whether it may be written.

    Raises:
        OSError: it cannot be written.
    """
    try:
        mode: int | None = os.stat(path).st_mode  # (through a link)
    except FileNotFoundError:  # (also a dangling link)
        mode = None
    except OSError:
        mode = None  # (the open below says why)
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        if not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return
    target = Path(os.path.realpath(path))
    with path.open("a"):
        pass
    if mode is None:
        target.unlink(missing_ok=True)


# The file name an output option (``--out``) reads as standard output, as Unix tools read it
# (``-o -``): a file literally named so is ``./-`` spelt with its folder (``$PWD/-``).
STDOUT_NAME = "-"


def is_stdout(path: Path | str) -> bool:
    """Whether the output file ``path`` is ``-``, standard output (``is_stdout``)."""
    return str(path) == STDOUT_NAME


def refuse_stdout_folder(path: Path | str, flag: str, what: str) -> None:
    """Refuse ``-`` for an output that is a folder (``facet eval``'s report, a checkpoint): it
    made a folder named "-" where a script meant standard output.

    Raises:
        InvalidRequestError: ``path`` is ``-``.
    """
    if is_stdout(path):
        from app.errors import InvalidRequestError

        raise InvalidRequestError(f"{flag} - is standard output, but {what} is a folder of files; "
                                  f"give a folder (one named '-' is given by its full path, \"$PWD/-\")")


def is_stream(path: Path) -> bool:
    """Whether ``path`` is there but neither a file nor a folder: a pipe (``<(...)``'s
    ``/dev/fd/63``, a FIFO) or a device. `facet cluster` reads one as it reads standard input;
    `facet index` refuses one (it reads its sources again to find changes)."""
    try:
        return path.exists() and not path.is_file() and not path.is_dir()
    except OSError:
        return False


def expand_user(path: Path | str) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded, as a shell does; one that cannot
    be (no such user, no home folder) is kept as written, as a shell keeps it, so it is then
    a path that does not exist (a 404 / "no such file"), not a RuntimeError ("Could not
    determine home directory": a 500 over HTTP, a traceback on the command line)."""
    path = Path(path)
    try:
        return path.expanduser()
    except RuntimeError:
        return path


def raise_open_files_limit(target: int = OPEN_FILES_TARGET) -> tuple[int, int] | None:
    """Raise this process's soft limit of open files (``ulimit -n``) towards ``target``, as far
    as its hard limit allows; the processes it starts inherit it. A server holds a file per
    connection and per open shard file: at the usual soft default of 1024 (the hard limit is
    often far higher) uvicorn dropped connections past it without a word, and collections
    failed to open. Only a soft limit below ``target`` is raised; none is lowered.

    Returns:
        ``(before, after)`` where it was raised, else None (already high enough, no room under
        the hard limit, or no such limit on this system).
    """
    try:
        import resource
    except ImportError:  # (no such module on Windows)
        return None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        ceiling = target if hard == resource.RLIM_INFINITY else min(hard, target)
        if soft != resource.RLIM_INFINITY and soft < ceiling:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            logger.debug("open-files limit raised from %d to %d (hard limit %s)", soft, ceiling,
                         "unlimited" if hard == resource.RLIM_INFINITY else hard)
            return soft, ceiling
    except (ValueError, OSError) as e:  # (a container that forbids it: the limit stays)
        logger.debug("open-files limit left as it is: %s", e)
    return None


def absent(path: Path | str) -> str:
    """Why ``path``, which is not there, is not: "does not exist", or that it leads through a
    loop of links (a path ``exists()`` calls absent; saying "does not exist" of a link the user
    sees in ``ls`` sent them looking for a typo)."""
    from indexer.parsing import LINK_LOOP, through_link_loop

    return LINK_LOOP if through_link_loop(path) else "does not exist"
