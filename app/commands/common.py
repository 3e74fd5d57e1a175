"""What every command module shares: domain errors to a one-line message and an exit code, the
application core over the environment's settings, and small wording helpers.

Kept apart from ``app.cli`` (which registers the command modules) so that importing a command
module first (``from app.commands.cluster import read_texts``) cannot leave it unregistered.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from app.errors import (
    BusyError,
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    ModelError,
    NotFoundError,
    UnavailableError,
    UnknownModelError,
    as_domain_error,
)
from app.files import expand_user, is_stdout, probe_writable
from app.settings import get_settings
from app.text import printable, shorten

if TYPE_CHECKING:
    from app.core import Facet
    from app.settings import FacetSettings

F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger(__name__)

# Most specific first. An unknown embedder name is a bad option value (2), as it always was.
EXIT_CODES: list[tuple[type[FacetError], int]] = [
    (UnknownModelError, 2),
    (InvalidRequestError, 2),
    (NotFoundError, 3),
    (DataError, 4),
    (ConflictError, 5),
    (BusyError, 6),
    (UnavailableError, 7),
    (ModelError, 1),  # an embedder's own failure: not the command line's (2)
    (FacetError, 1),
]


def exit_code(error: FacetError) -> int:
    """The exit code the CLI uses for a domain error."""
    return next(code for cls, code in EXIT_CODES if isinstance(error, cls))


# Errors of a write that ran out of room: with no file named, a stream's (the output's).
_NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _echo_to_stdout_failed(error: OSError) -> bool:
    """Whether ``error`` came from click's ``echo`` writing to stdout (``typer.echo`` without
    ``err=True``): the innermost frame of its traceback."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    frame = tb.tb_frame
    return (frame.f_code.co_name == "echo" and "click" in frame.f_code.co_filename
            and frame.f_locals.get("err") is False)


def _drop_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's flush at exit does not fail
    on it again ("Exception ignored ... BrokenPipeError", exit 120). In-process (tests' runner)
    stdout has no descriptor, and is left alone."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(null, fd)
    except OSError:
        pass
    finally:
        os.close(null)


class DropsWhenGone:
    """A text stream's write and flush that, once one fails for want of a reader or of room
    (an ``OSError`` whose errno is in ``GONE_ERRNOS``), call ``_drop`` and drop this and every
    later write; any other error is raised as before. ``_write`` and ``_flush`` are the stream's
    own (``QuietStderr`` in app/cli.py for stderr, ``_StdoutMayClose`` for stdout)."""

    GONE_ERRNOS: frozenset[int] = frozenset({errno.EPIPE})
    gone = False

    def _write(self, text: str) -> int:
        raise NotImplementedError

    def _flush(self) -> None:
        raise NotImplementedError

    def _drop(self) -> None:
        raise NotImplementedError

    def _gone(self, error: OSError) -> None:
        if error.errno not in self.GONE_ERRNOS:
            raise error
        self.gone = True
        self._drop()

    def write(self, text: str) -> int:
        if self.gone:
            return len(text)
        try:
            return int(self._write(text))
        except OSError as e:
            self._gone(e)
            return len(text)

    def flush(self) -> None:
        if self.gone:
            return
        try:
            self._flush()
        except OSError as e:
            self._gone(e)


class _StdoutMayClose(DropsWhenGone):
    """``sys.stdout`` inside ``stdout_may_close``: a write or flush that finds the reader gone
    (EPIPE) points the descriptor at the null device (``_drop_stdout``) and this and every later
    write is dropped, so the command goes on; any other error is raised as before."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _write(self, text: str) -> int:
        return int(self._stream.write(text))

    def _flush(self) -> None:
        self._stream.flush()

    def _drop(self) -> None:
        _drop_stdout()
        with suppress(OSError, ValueError):  # what the buffer held: to the null device
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def stdout_may_close() -> Iterator[None]:
    """Within it a closed stdout (``facet index DIR 2>&1 | head -1``: the reader is gone) stops
    nothing: what is printed after is dropped, and the command goes on to its files (``--out``,
    eval's report), its error lines on stderr and its exit code. For commands whose work does
    not end with their output. Until 2026-11-30 (seventh session) the EPIPE ended the command
    in ``output_error_exit``'s exit 0: a failed document's exit 4 and a cancel's 1 were lost,
    and `facet cluster -o FILE`, `facet bench --out FILE` and `facet eval` wrote no file.
    A command that only prints (`facet jobs --json`, `facet search`, `jobs --follow`) still
    ends at once with 0 (``output_error_exit``)."""
    stream = sys.stdout
    if stream is None or isinstance(stream, _StdoutMayClose):
        yield
        return
    sys.stdout = tolerant = _StdoutMayClose(stream)
    try:
        yield
    finally:
        if sys.stdout is tolerant:
            sys.stdout = stream


def output_error_exit(error: OSError) -> typer.Exit | None:
    """The exit for an ``OSError`` writing the output, None for any other (raised as it was).

    A broken pipe (``facet jobs | head -1``: the reader is gone) exits 0 without a word, as
    the ``--json`` output that fitted in the pipe always did (a command with more to do than
    print, files to write or an exit code to give, goes on instead: ``stdout_may_close``). Another write error on stdout
    (``> /dev/full``, a full disk) is one ``error:`` line and exit 4, as a ``--out`` file's
    (``write_out_file``): it was a 40-line traceback and exit 1, from every command.
    """
    if error.errno == errno.EPIPE and error.filename is None:
        _drop_stdout()
        return typer.Exit(0)
    to_stdout = _echo_to_stdout_failed(error)
    if not to_stdout and (error.filename is not None or error.errno not in _NO_ROOM):
        return None
    _drop_stdout()
    with suppress(OSError):  # stderr as broken: the exit code says it
        typer.echo(f"error: cannot write the output: {error.strerror or error}", err=True)
    return typer.Exit(4)


def confirm(question: str, nothing_done: str) -> bool:
    """Ask ``question`` on stderr and read y/yes or n/no (default no) from stdin, as `facet
    delete` and `facet metadata move` ask. It was asked on stdout: `echo y | facet delete X >
    out` wrote it into the file, with nothing on the terminal (click's ``confirm(err=True)``
    still echoes the prompt's last character there). ``nothing_done`` ends the line said when
    no answer comes ("nothing was deleted; give -y to delete without asking").

    Until 2026-11-30 (seventh session) a closed stdin (``<&-``: Python's ``sys.stdin`` None
    in-process) ended in an AttributeError traceback, an answer after a UTF-8 BOM (``printf
    '\\xef\\xbb\\xbfy'``, Windows' echo) was "invalid input", said as ``Error:`` unlike every
    other error line.

    A "no" (or an empty answer) says what was not done and returns False: the caller exits 1.

    Raises:
        typer.Abort: Ctrl-C before an answer.
        typer.Exit: stdin ended (or is closed) before an answer (an error line, exit 2).
    """
    while True:
        typer.echo(f"{question} [y/N]: ", nl=False, err=True)
        stdin = sys.stdin
        try:
            line = stdin.readline() if stdin is not None else ""
        except KeyboardInterrupt:
            raise typer.Abort() from None
        except (OSError, ValueError):  # a descriptor closed under it, or not readable
            line = ""
        if not line:  # end of input (no terminal, nothing piped, stdin closed): no answer
            # One error line and exit 2, as any refusal ("Aborted." and 1 said neither why nor
            # what to do).
            typer.echo("", err=True)
            typer.echo(f"error: no answer on standard input (not a terminal?): {nothing_done}",
                       err=True)
            raise typer.Exit(2)
        if not _is_terminal(stdin):  # the answer was not echoed: the prompt's line ends here
            # (`printf 'y\n' | facet delete X 2>&1` said "...? [y/N]: deleted X" on one line)
            typer.echo("", err=True)
        answer = line.lstrip("\ufeff").strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            # What was not done, on its own line (a bare "Aborted." said neither; the caller
            # exits 1).
            typer.echo(f"{nothing_done.split(';', 1)[0]} (the answer was no)", err=True)
            return False
        typer.echo(f"error: invalid input {printable(answer[:40])!r}: answer y (yes) or n (no)",
                   err=True)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _names_given(values: Iterable[Any]) -> list[str]:
    """The names a command was given (its parameters' values: a path, a collection, keys) that
    hold a line break, each as given and as the absolute path it names (a message names a
    path so), longest first."""
    names: set[str] = set()
    for value in values:
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if not isinstance(item, (str, Path)):
                continue
            text = str(item)
            if not _LINE_BREAK.search(text):
                continue
            names.add(text)
            with suppress(OSError, RuntimeError, ValueError):
                names.add(os.path.abspath(os.path.expanduser(text)))
                names.add(str(Path(text).expanduser().resolve()))
    return sorted(names, key=len, reverse=True)


# What str.splitlines() breaks a line at.
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def error_text(message: str, given: Iterable[Any] = ()) -> str:
    """An error's ``message`` made safe to print (``printable(..., body=True)``: its own line
    breaks stay), with a line break inside a name the command was given (``given``: its
    parameters' values) shown escaped as the rest of the name is: "error: /x/dir\\x0ab does not
    exist", where the name was split over two lines."""
    for name in _names_given(given):
        message = message.replace(name, printable(name))
    return printable(message, body=True)


def as_flag(message: str, param: str | None, command: Any) -> str:
    """``message`` of an error about request field ``param`` with the field's name, where the
    message opens with it ("rerank_depth must be from 1 to 1000"), spelt as the running
    command's option for it ("--rerank-depth must be ..."): the services name the HTTP API's
    fields, and a command line user typed no ``rerank_depth``. Left as it is where the
    command (``command``, a click command) has no option of that name (an argument, another
    command's field)."""
    if not param or command is None:
        return message
    for option in getattr(command, "params", ()):
        if option.name == param and option.param_type_name == "option":
            flag = max(option.opts, key=len)
            if flag.startswith("--") and re.match(rf"{re.escape(param)} (must|\()", message):
                return flag + message[len(param):]
    return message


def handle_errors(func: F) -> F:
    """Turn domain and embedder errors into a one-line message and an exit code (no traceback),
    and a failed write of the output into one too (``output_error_exit``)."""
    from embedders.errors import EmbedderError

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # typer's own copy of click runs the commands (click's context is not theirs).
        from typer._click.globals import get_current_context
        ctx = get_current_context(silent=True)
        try:
            return func(*args, **kwargs)
        except FacetError as e:
            # A message may quote a file's name or contents: its control characters are shown,
            # not sent to the terminal (its line breaks stay).
            message = as_flag(str(e), getattr(e, "param", None),
                              ctx.command if ctx is not None else None)
            typer.echo(f"error: {error_text(message, [*args, *kwargs.values()])}", err=True)
            raise typer.Exit(exit_code(e)) from e
        except EmbedderError as e:  # commands that use an embedder directly (eval, train)
            # The code the facade's translation gives (an unreadable checkpoint is 4 there too).
            typer.echo(f"error: {error_text(str(e), [*args, *kwargs.values()])}", err=True)
            domain = as_domain_error(e)
            raise typer.Exit(exit_code(domain) if domain is not None else 2) from e
        except OSError as e:  # after EmbedderError: a CheckpointError is an OSError too
            done = output_error_exit(e)
            if done is None:
                raise
            raise done from None
        except MemoryError as e:  # a model's (a plugin's) allocation: a traceback, exit 1
            said = f": {e}" if str(e) else ""
            typer.echo(f"error: out of memory (MemoryError{said}); give fewer or shorter texts at a "
                       "time (--batch-size where the command has it), or a smaller model", err=True)
            raise typer.Exit(1) from e

    return wrapper  # type: ignore[return-value]


def check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on, before any model loads: `facet ui` ended in
    Gradio's traceback ("set GRADIO_SERVER_PORT"), `facet serve` after loading its embedder.

    Raises:
        ConflictError: the port is taken.
        InvalidRequestError: the host cannot be listened on.
    """
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise InvalidRequestError(f"--host {host!r} cannot be listened on: {e}") from e
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn and gradio bind
        try:
            probe.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise ConflictError(f"port {port} on {host} is in use (another server?); pick "
                                    "another with --port") from e
            raise InvalidRequestError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e


# The most of a request target an access line shows (as ``app.api.errors.MAX_SHOWN_NAME``).
ACCESS_TARGET_SHOWN = 200


class _MaskedAccessLine(logging.Filter):
    """Masks key-like query parameter values (``api_key=``, ``token=``, ``password=``...) and
    URL passwords in a uvicorn access line as ``***``, by ``indexer.errors.mask_secrets`` (what
    ``app.api.errors`` masks its lines with). The record's message and arguments are masked in
    place, so the line reads masked whatever formatter or format writes it (uvicorn's
    ``AccessFormatter`` builds its ``request_line`` from the arguments)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from indexer.errors import mask_query, mask_secrets

        def masked(value: object) -> object:
            if not isinstance(value, str):
                return value
            # The request target (uvicorn's ``full_path`` argument): each key-like value whole,
            # and a huge one cut, as ``app.api.errors.log_answer`` cuts its path (a 5,000-
            # character collection name in the path was logged whole on every request).
            if not value.startswith("/"):
                return mask_secrets(value)
            target = mask_query(value)
            return (shorten(target, ACCESS_TARGET_SHOWN) if len(target) > 2 * ACCESS_TARGET_SHOWN
                    else target)

        if isinstance(record.msg, str):
            record.msg = mask_secrets(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(masked(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: masked(v) for k, v in record.args.items()}
        return True


_ACCESS_MASK = _MaskedAccessLine()


def mask_access_log() -> None:
    """Mask secrets in every line of uvicorn's access log (the ``uvicorn.access`` logger) of a
    server started from this process (`facet serve`; `facet ui`'s Gradio): its
    ``"GET /collections?api_key=<the team's key> HTTP/1.1" 400`` wrote the key in clear.
    A filter on the logger (logging.config keeps a logger's filters, so uvicorn's log set-up
    does not drop it); once per process however often called."""
    logging.getLogger("uvicorn.access").addFilter(_ACCESS_MASK)  # no-op when already there


@contextmanager
def serving_lock(settings: FacetSettings, command: str, address: str) -> Iterator[None]:
    """Hold the embedded data folder for one server (`facet serve`, `facet ui`) while it runs.

    A second server on the same folder started without a word, and then each held the
    collections it had opened: the other's searches of them got 409s and its jobs failed,
    for as long as the first kept them among its open ones. With a Qdrant server
    (``FACET_QDRANT_URL``) nothing is held per process, and several API servers may share it.
    The kernel drops the lock when the process ends, however it ends. (CLI commands still
    work beside a server: each refuses only what the server holds, naming it.)

    Raises:
        ConflictError: another server holds the folder (its pid, command, address and start).
    """
    if settings.qdrant_url:
        yield
        return
    from contextlib import ExitStack

    from app.services.context import MOVER, FolderHeld, holding_server_lock, server_who

    folder = Path(settings.data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        try:
            held.enter_context(holding_server_lock(folder, command, address=address))
        except FolderHeld as e:
            holder = e.holder
            if holder.get("command") == MOVER:  # (it holds the lock too)
                pid = f" (pid {holder['pid']})" if holder.get("pid") else ""
                raise ConflictError(
                    f"the data folder's metadata ({folder}) is being moved by facet "
                    f"move-metadata{pid}: start the server once it ends, with "
                    "FACET_DATABASE_URL set") from None
            # `facet ui` serves no API (nor /ui): "send requests to it" sent users to 404s.
            use = ("use its UI; for the API too, stop it and run `facet serve` (the API, and the "
                   "same UI at /ui)" if holder.get("command") == "facet ui" else
                   "send requests to it (it serves the UI at /ui too), or stop it first")
            raise ConflictError(
                f"another Facet server ({server_who(holder)}) serves the data folder {folder}: "
                "one server per embedded data folder, since it holds the collections it opens; "
                f"{use}; or give this one another FACET_DATA_DIR") from None
        yield


@contextmanager
def open_facet(**kwargs: Any) -> Iterator[Facet]:
    """The application core over the environment's settings, closed on exit."""
    from app.core import Facet

    facet = Facet.open(get_settings(), **kwargs)
    try:
        yield facet
    except BaseException:
        # The error that stopped the command is the one to say: a close failing after it (the
        # data folder's drive or share gone: the store's files cannot be closed either) replaced
        # it with a 150-line traceback (the verification round of the fourth session of
        # 2026-12-02).
        try:
            facet.close()
        except Exception:
            logger.debug("closing Facet after an error failed too", exc_info=True)
        raise
    facet.close()


def expand_home(path: Path | None) -> Path | None:
    """``path`` with a leading ``~`` (``~user``) expanded, as `facet index` did its SOURCE: the
    shell leaves a quoted ``'~/t.txt'`` or ``--out=~/cl.json`` as it is, and `facet cluster`
    said the file did not exist, or wrote into a folder named ``~`` under the current one.
    A typer callback for the commands' path arguments and options."""
    return None if path is None else expand_user(path)


def path_value(value: str) -> Path:
    """A path as typed (a typer ``parser``), refusing an empty or blank one: ``Path("")`` is
    ``.``, so `facet index "$UNSET" -c c` indexed the working folder (830 documents of a
    checkout) and `facet cluster ""` said ". is a folder", a path never typed.

    Raises:
        typer.BadParameter: an empty or blank path (exit 2, the argument or option named).
    """
    if not value.strip():
        raise typer.BadParameter("is empty; give a path (an unset shell variable?)")
    return Path(value)


def json_out_path(value: str) -> Path:
    """A JSON ``--out`` as typed (a typer ``parser``): one ending in ``/`` names a folder, which
    ``Path`` would drop (``-o results/`` made a file named ``results``, where an existing
    folder is refused); an empty one as ``path_value`` refuses it.

    Raises:
        typer.BadParameter: a path ending in a separator, or empty (exit 2, the option named).
    """
    path_value(value)
    if value != "-" and value.endswith(("/", os.sep)):
        raise typer.BadParameter(f"{value} names a folder (it ends in '/'); name the JSON file to write")
    return Path(value)


def prepare_out_file(out: Path, flag: str = "--out") -> None:
    """Check, before any work, that the JSON file ``out`` can be written: not a folder, its
    folder created and writable (a command that found out only at the end lost its figures).

    ``-`` is standard output (``write_out_file``): nothing to check.

    Raises:
        InvalidRequestError: ``out`` is a folder.
        DataError: its folder cannot be created or written to, or the file cannot be.
    """
    if is_stdout(out):
        return
    out = expand_user(out)
    if out.is_dir():
        raise InvalidRequestError(f"{flag} {out} is a folder; name the JSON file to write")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"{flag} {out}: cannot create its folder: {e.strerror or e}") from e
    try:
        probe_writable(out)
    except OSError as e:
        raise DataError(f"{flag} {out}: cannot write it: {e.strerror or e}") from e


def write_out_file(out: Path, text: str, flag: str = "--out") -> None:
    """Write ``text`` to ``out`` (checked by ``prepare_out_file``); a failure that came after the
    check (a full disk) is one line, not a traceback.

    ``out`` ``-`` is standard output, as Unix tools read it (``-o -``): the same text, with a
    final newline; a failed write of it is the output's (``output_error_exit``: a closed pipe
    exits 0, a full disk is one line and exit 4). A file named ``-`` was written in the current
    folder. A caller that prints more on stdout moves it to stderr then (``is_stdout``).

    Raises:
        DataError: the file cannot be written.
    """
    import secrets

    if is_stdout(out):
        typer.echo(text)
        return
    out = expand_user(out)
    # Written beside it, then renamed over it: a full disk cut the file short in place, the
    # earlier output lost and the new one invalid JSON (or a 0-byte file on a first run). Only
    # a new file or a plain one of this user's with no other name: a symlink, a device
    # (/dev/null), a FIFO, /proc/self/fd/1, a hard link or another user's file is written into,
    # as before (a rename replaced the link or the device itself with a regular file).
    tmp = str(out.parent / f".{out.name}.{secrets.token_hex(4)}.tmp")
    try:
        # Mode 0o666 less the umask, as a new file written in place gets (mkstemp's is 0o600).
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666) if _replaceable(out) else -1
    except OSError:
        fd = -1  # (a folder that takes no new file: written in place)
    if fd < 0:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as e:
            raise DataError(f"{flag} {out}: cannot write it: {e.strerror or e}") from e
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if out.exists():
            shutil.copymode(out, tmp)
        os.replace(tmp, out)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise DataError(f"{flag} {out}: cannot write it: {e.strerror or e}; an earlier file there is "
                        "left as it was") from e


def _replaceable(out: Path) -> bool:
    """Whether ``out`` may be written by a rename over it: it does not exist, or it is a regular
    file (not a symlink) of this user's with one name."""
    import stat

    try:
        st = out.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_uid == os.getuid()


def check_embedder_option(option: str, spec: str) -> None:
    """``spec``, given as ``option`` (``--rerank``), checked as an embedder that loads here,
    without loading it (``embedders.registry.check_embedder``): for commands that load it only
    after other work (`facet demo` indexed its sample first, `facet bench` ran its first parts).

    Raises:
        UnknownModelError: no embedder loads as ``spec``, named by its option ("--rerank 'x':
            unknown embedder 'x' ..."); the registry's other refusals (a damaged checkpoint,
            an option it does not offer) as they are.
    """
    from app.errors import UnknownModelError
    from embedders.errors import UnknownEmbedderError
    from embedders.registry import check_embedder

    try:
        check_embedder(spec)
    except UnknownEmbedderError as e:  # (which option named it was not said)
        raise UnknownModelError(f"{option} {spec!r}: {e}") from None


def argument_text(value: str | None, what: str, param: str | None = None) -> str | None:
    """``value``, a text typed on the command line (``what``: "the query", "--instruction"),
    refused where it is not UTF-8: Python hands such bytes over as lone surrogates
    (surrogateescape), and the query was refused as holding "an unpaired surrogate ... send
    the text as valid UTF-8 / paired \\u escapes" (2026-12-01), advice for JSON, not for a
    shell. A file path is left alone: a file's name may be any bytes.

    Raises:
        DataError: ``value`` holds bytes that are not UTF-8 (exit 4, as standard input that
            is not UTF-8 text).
    """
    if value is None:
        return None
    bad = next((i for i, ch in enumerate(value) if "\udc80" <= ch <= "\udcff"), None)
    if bad is None:
        return value
    # The bytes as typed: under an ASCII locale (LC_ALL=C with PYTHONUTF8=0) every non-ASCII
    # byte of valid UTF-8 is escaped so, and "café" was refused as "not UTF-8".
    typed = os.fsencode(value)
    try:
        return typed.decode("utf-8")
    except UnicodeDecodeError as e:
        byte = typed[e.start]
        bad = len(typed[:e.start].decode("utf-8", "replace"))
    shown = typed.decode("utf-8", "replace")
    raise DataError(f"{what} is not UTF-8 text (byte 0x{byte:02X} at character {bad + 1}: "
                    f"{printable(shorten(shown, 60))}): the terminal or script passed another "
                    "encoding (Latin-1?); pass it as UTF-8, or set the terminal to UTF-8",
                    param=param)


# The most of standard input (or of a stream given as a file: /dev/zero, a pipe) a command reads
# as its texts or keys: `facet search - </dev/zero` read until the kernel's out-of-memory
# killer ended it (23 GB), and `facet embed -`, `facet cluster -` and `facet delete
# --documents-from -` with it.
STDIN_MAX_BYTES = 256 * 2**20


def read_capped(stream: Any, cap: int, what: str, advice: str, param: str | None = None) -> bytes:
    """All of binary ``stream`` (``sys.stdin.buffer``, an open file), read in pieces up to
    ``cap`` bytes; past that, refused before more is read.

    Raises:
        InvalidRequestError: ``what`` holds more than ``cap`` bytes; ``advice`` says what to do.
    """
    from app.errors import InvalidRequestError
    from app.text import size_text

    pieces: list[bytes] = []
    size = 0
    while size <= cap:
        piece = stream.read(min(2**20, cap + 1 - size))
        if not piece:
            return b"".join(pieces)
        pieces.append(piece)
        size += len(piece)
    raise InvalidRequestError(f"{what} holds more than {size_text(cap)}, the most read from it; {advice}",
                              param=param)
