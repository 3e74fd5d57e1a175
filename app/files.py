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
