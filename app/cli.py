"""The ``facet`` command line: the CLI edge of the application core.

Commands live in ``app.commands`` (one module per command group, each with a
``register(cli)``); they parse arguments, call one ``Facet`` method and print. This module
owns what only the CLI needs: logging set-up and quieting the libraries; the mapping of domain
errors to a one-line message and an exit code is in ``app.commands.common``.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType
from typing import Annotated, Any


def _interrupted_starting(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C while the CLI's modules import (its first half second or more): exit 130 without
    a word, as Ctrl-C later does (typer's ``Exit(130)``). It printed a 48-line
    KeyboardInterrupt traceback through the imports."""
    raise SystemExit(130)


def _hold_sigint() -> tuple[bool, Any]:
    """Install ``_interrupted_starting`` for the imports below: whether it was, and the handler
    it replaced (None: one set outside Python), put back once they are done."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started in a shell's background
            return False, None  # (or under nohup): it stays ignored, as Python keeps it
        return True, signal.signal(signal.SIGINT, _interrupted_starting)
    except (ValueError, OSError):  # imported from another thread: signals are the main one's
        return False, None


_sigint_held, _sigint_before = _hold_sigint()

import contextlib  # noqa: E402 (the handler above first: these imports take most of a second)
import errno  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import typer  # noqa: E402
from typer.core import TyperGroup  # noqa: E402

from app.commands.common import (  # noqa: E402, F401 (re-exported: the commands' historical import path)
    EXIT_CODES,
    DropsWhenGone,
    exit_code,
    handle_errors,
    open_facet,
    output_error_exit,
    shorten,
)
from app.errors import DataError, FacetError  # noqa: E402
from app.settings import apply_settings, get_settings  # noqa: E402
from app.text import plural  # noqa: E402, F401 (re-exported, as above)


def _no_placeholder_for_flags() -> None:
    """A flag takes no value, so its help shows no value placeholder. typer 0.29's rich help
    panel (``rich_utils._print_options_panel``) asks every option for ``display_type_rich``,
    flags included, and printed ``--json  <bool>`` (even ``--help <bool>``); its plain
    formatter (``TyperOption.get_help_record``) already leaves flags and counters out. Patched
    once here, for every command; options that take a value keep their ``<int>``, ``<str>``."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_facet_flags_bare", False):
        return  # a typer without the method (nothing to mend), or already patched (reloaded)

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag or self.count else shown(self, ctx)

    display_type_rich._facet_flags_bare = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_no_placeholder_for_flags()

def _usage_error_line(error: Any) -> str:
    """A usage error (an unknown option, a missing argument, a bad value) as the one ``error:``
    line every other refusal is: ``error: No such option: --bogus Did you mean --json? (facet
    search --help)``."""
    from app.text import printable

    message = " ".join(printable(error.format_message()).split())
    ctx = getattr(error, "ctx", None)
    tb = error.__traceback__ if ctx is None else None
    # An option missing its value (`facet search q --rerank`) is raised by click's parser with
    # no context: the innermost frame's (the parser's own, or ``parse_args``') names the
    # command. Until 2026-11-30 (seventh session) that line alone went without its hint.
    while tb is not None:
        local = tb.tb_frame.f_locals
        found = local.get("ctx", getattr(local.get("self"), "ctx", None))
        if found is not None and hasattr(found, "command") and hasattr(found, "parent"):
            ctx = found
        tb = tb.tb_next
    if ctx is None or ctx.command.get_help_option(ctx) is None:
        return f"error: {message}"
    if getattr(error, "option_name", None) in ("-c", "--collection") and any(
            param.param_type_name == "argument" and (param.name == "collection" or (
                param.name == "name" and ctx.command.name == "collections"))
            for param in ctx.command.params):
        # `facet documents -c NAME`, as `index`, `search` and `jobs` take it: "No such option".
        message += (" (this command takes the collection as an argument, not an option: drop "
                    f"{error.option_name})")
    names = []  # the command as it is installed ("facet search", under `python -m app` too)
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return f"error: {message} ({' '.join(['facet', *reversed(names)])} --help)"


def _help_to_closed_pipe_exits_0() -> None:
    """`facet --help | head -1` exits 0, as any output to a reader that is gone does
    (``output_error_exit``): rich's ``Console.on_broken_pipe`` exited 1. Its stderr consoles go
    quiet and the command goes on (as ``QuietStderr``). Patched once, where rich is installed."""
    try:
        from rich.console import Console
    except ImportError:
        return
    if getattr(Console.on_broken_pipe, "_facet_exit_0", False):
        return

    def on_broken_pipe(self: Console) -> None:
        self.quiet = True
        if self.stderr:
            return
        from app.commands.common import _drop_stdout

        _drop_stdout()
        raise SystemExit(0)

    on_broken_pipe._facet_exit_0 = True  # type: ignore[attr-defined]
    Console.on_broken_pipe = on_broken_pipe  # type: ignore[method-assign]


class FacetGroup(TyperGroup):
    """The ``facet`` command group: a usage error, its own or a command's, is one ``error:``
    line on stderr (``_usage_error_line``) and exit 2, as docs/cli.md says of every error.
    Until 2026-11-30 (seventh session) it was typer's rich box (usage line, "Try ... --help",
    a bordered panel) wrapped mid-phrase on a narrow terminal (COLUMNS=20). ``--help`` is as
    it was; a help cut short by its reader exits 0 (``_help_to_closed_pipe_exits_0``)."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> Any:
        if not args or {"--help", "-h"} & set(args):
            _help_to_closed_pipe_exits_0()
        with _usage_errors_one_line():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _usage_errors_one_line():
            return super().invoke(ctx)


@contextlib.contextmanager
def _usage_errors_one_line() -> Iterator[None]:
    from typer._click.exceptions import NoArgsIsHelpError, UsageError

    try:
        yield
    except NoArgsIsHelpError:  # `facet` alone: its help, printed already
        raise
    except UsageError as e:
        typer.echo(_usage_error_line(e), err=True)
        raise typer.Exit(e.exit_code) from None


cli = typer.Typer(
    cls=FacetGroup,
    name="facet",
    help="Facet: instruction-aware retrieval with LLM-based embedders.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# Every log line with its local time (the lines of a long-running `facet serve` had none);
# `facet serve` puts the same time in front of uvicorn's own lines.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Local time with its offset from UTC (+05:30): job times are shown in UTC ("...Z"), and a
# bare local time in a log beside them read as another moment under TZ=Asia/Tokyo. `%z` is
# written as RFC 3339's `+05:30` by LogFormatter (time.strftime alone writes `+0530`).
LOG_DATEFMT = "%Y-%m-%dT%H:%M:%S%z"
# Libraries whose DEBUG lines are noise even under --verbose (PIL's ~40 "Importing ...Plugin"
# lines at every start, asyncio's selector): only their warnings are shown.
NOISY_LOGGERS = ("httpx", "httpcore", "urllib3", "filelock", "transformers", "alembic", "PIL",
                 "asyncio", "matplotlib", "multipart", "python_multipart", "h5py", "fsspec")


class LogFormatter(logging.Formatter):
    """A ``logging.Formatter`` writing ``%z`` in its ``datefmt`` as RFC 3339's ``+05:30``
    (ISO 8601 extended), not ``+0530`` (``time.strftime``'s, which Formatter uses): every line
    Facet logs, the CLI's own (``_main``) and uvicorn's under `facet serve`
    (``app.commands.serve._uvicorn_log_config``, whose formatters put this class first)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt and "%z" in datefmt:
            offset = self.converter(record.created).tm_gmtoff or 0  # local time's; 0 under time.gmtime
            sign = "-" if offset < 0 else "+"
            hours, minutes = divmod(abs(offset) // 60, 60)
            datefmt = datefmt.replace("%z", f"{sign}{hours:02d}:{minutes:02d}")
        return super().formatTime(record, datefmt)


def _print_version(value: bool) -> None:
    if value:
        from app import DISTRIBUTION, __version__
        from app.provenance import source_commit
        from indexer.migrate import head_revision

        # The version alone did not tell two builds apart (a rebuilt wheel keeps it, and pip
        # then keeps the old install): the metadata schema the code writes, and its commit.
        build = [f"metadata schema {head_revision()}"]
        source = source_commit()
        if source is not None:
            build.append(f"commit {source['commit'][:12]}{' with local changes' if source.get('dirty') else ''}")
        typer.echo(f"{DISTRIBUTION} {__version__} ({', '.join(build)})")
        raise typer.Exit()


@cli.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="debug logging")] = False,
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="print Facet's version and exit")
    ] = False,
) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter(LOG_FORMAT, LOG_DATEFMT))
    # As before, a no-op where the root logger has handlers already (a caller's, in-process).
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Python warnings as log lines (logger py.warnings), with the time and level of every other
    # line: a UserWarning was two raw lines, its source line the second, with no time.
    logging.captureWarnings(True)
    if not verbose:
        quiet_libraries()
    try:
        settings = get_settings()
    except FacetError as e:  # a FACET_* variable that does not parse
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(exit_code(e)) from e
    apply_settings(settings)


def quiet_libraries() -> None:
    """No per-command library noise: the "Loading weights" bar transformers draws for every
    model load, and the libraries' FutureWarnings (deprecations the user cannot act on).
    ``--verbose`` keeps both."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when transformers loads
    # Its tokenizer's "sequence length is longer than ..." for a long query: the embedder's own
    # truncation warning says it once, with what to do.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # torch's INFO lines (at exit, "FakeTensor cache stats:" from an atexit hook of a module
    # whose import Ctrl-C cut short, before torch set its own logger to WARNING).
    logging.getLogger("torch").setLevel(logging.WARNING)
    if "transformers" in sys.modules:  # already imported (in-process callers, tests)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)


def command_line(ctx: typer.Context) -> str:
    """The running command as a reproducible shell line: ``sys.argv`` under ``facet``/``python -m app``,
    else (called in-process, as tests do) rebuilt from the parsed parameters that differ from their
    defaults."""
    from app.text import shell_word

    name = ctx.info_name or ""
    if len(sys.argv) > 1 and sys.argv[1] == name:
        return "facet " + " ".join(shell_word(a) for a in sys.argv[1:])
    parts = [name]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if value is None or value == param.default or value in ((), []):
            continue
        if param.param_type_name == "argument":
            parts.append(shell_word(str(value)))
            continue
        flag = param.opts[0]
        if isinstance(value, bool):
            secondary = getattr(param, "secondary_opts", [])
            parts.append(flag if value else (secondary[0] if secondary else flag))
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            parts.append(f"{flag} {shell_word(str(item))}")
    return "facet " + " ".join(parts)


def _register_command_groups() -> None:
    import importlib
    import pkgutil

    import app.commands as commands

    for module in pkgutil.iter_modules(commands.__path__):
        mod = importlib.import_module(f"app.commands.{module.name}")
        register = getattr(mod, "register", None)
        if register is not None:
            register(cli)


_register_command_groups()


def _release_sigint() -> None:
    """Ctrl-C back to Python's KeyboardInterrupt (commands catch it: `facet index` says how to
    resume, typer exits 130), now that the imports are done."""
    if not _sigint_held or signal.getsignal(signal.SIGINT) is not _interrupted_starting:
        return
    signal.signal(signal.SIGINT, signal.default_int_handler if _sigint_before is None
                  else _sigint_before)


_release_sigint()


def _escape_unencodable(error: UnicodeError) -> tuple[str, int]:
    """A codec error handler: each character the output's encoding lacks as a JSON-style
    ``\\uXXXX`` escape (a surrogate pair above U+FFFF), so that ``--json`` output stays valid
    JSON (outside its strings JSON is ASCII) and a text line says which character it was."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    escaped = []
    for char in error.object[error.start:error.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            escaped.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), error.end


UNENCODABLE = "facet.escape"


# Errors of a write to stderr after which nothing more is written there: its reader is gone
# (`2>&1 | head -1`), or it has no room (`2>/dev/full`, a full disk under a log file).
_STDERR_GONE = {errno.EPIPE, errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


class QuietStderr(DropsWhenGone, io.TextIOWrapper):
    """Standard error that never fails the work: the first write to it that fails for want of a
    reader or of room (``_STDERR_GONE``) points descriptor 2 at the null device, and this and
    every later write is dropped; any other error is raised as before.

    Every writer of the CLI's stderr goes through it: ``typer.echo(err=True)``, the logging
    handler ``_main`` sets up, `facet index`'s progress lines and bar (``progress_bar``,
    ``_log_lines``), `facet cluster`'s (``ClusterBar``), tqdm's bars, rich's consoles. Until
    2026-11-30 (seventh session) `facet index big -c x 2>&1 | head -1` raised BrokenPipeError
    from a progress line inside the run: the job was recorded failed part-way (86 of 600
    documents) and the command exited 0 (as a closed stdout does); `facet cluster -o FILE`
    wrote no file.
    """

    GONE_ERRNOS = frozenset(_STDERR_GONE)

    def _write(self, text: str) -> int:
        return io.TextIOWrapper.write(self, text)

    def _flush(self) -> None:
        io.TextIOWrapper.flush(self)

    def _drop(self) -> None:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            return
        try:
            os.dup2(null, self.fileno())
        except OSError:
            pass
        finally:
            os.close(null)
        with contextlib.suppress(OSError, ValueError):  # what the buffer held: to the null device
            io.TextIOWrapper.flush(self)


def _quiet_failing_stderr() -> None:
    """``sys.stderr`` as a ``QuietStderr`` on the same descriptor, encoding and error handler
    (once; a stream without a descriptor, a test's capture, is left as it is)."""
    stderr = sys.stderr
    if stderr is None or isinstance(stderr, QuietStderr):
        return
    try:
        fd = stderr.fileno()
        stderr.flush()
    except (AttributeError, OSError, ValueError):
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stderr = QuietStderr(open(fd, "wb", closefd=False),  # noqa: SIM115 (for the process)
                                 encoding=getattr(stderr, "encoding", None) or "utf-8",
                                 errors=getattr(stderr, "errors", None) or "backslashreplace",
                                 line_buffering=True, write_through=True)


def _standard_streams() -> None:
    """Standard output and error as every command can use them.

    A stream closed by the caller (``facet serve >&-``) is the null device, as ``>/dev/null``
    (Python leaves ``sys.stdout`` None: uvicorn's logging set-up failed in a traceback, and
    the descriptor was free for the next file opened, a database, to take); a closed stdin
    (``facet delete X <&-``) too, as ``</dev/null`` (until 2026-11-30, seventh session, its
    question died in an AttributeError traceback). Stderr stops being written once a write
    to it fails (``QuietStderr``). A stdout whose
    encoding lacks a character of the output (``PYTHONIOENCODING=cp1252``, a Latin-1 locale:
    a Japanese query or file name) writes it escaped (``_escape_unencodable``), where each
    command died in a UnicodeEncodeError traceback; stderr already backslash-escapes them.
    """
    import codecs
    import contextlib

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "r" if fd == 0 else "w",  # noqa: SIM115 (for the process)
                                    closefd=False, errors="backslashreplace" if fd == 2 else None))
        except OSError:
            pass
    _quiet_failing_stderr()
    stdout = sys.stdout
    if getattr(stdout, "errors", None) != "strict" or not hasattr(stdout, "reconfigure"):
        return  # chosen by the user (PYTHONIOENCODING=...:replace), or not a text file
    try:
        codecs.lookup_error(UNENCODABLE)
    except LookupError:
        codecs.register_error(UNENCODABLE, _escape_unencodable)
    with contextlib.suppress(ValueError, OSError):  # (a stream already closed)
        stdout.reconfigure(errors=UNENCODABLE)


def _current_folder_gone() -> bool:
    """Whether the current folder was deleted (``rmdir`` from another shell): every command
    that loads a model then died inside torch's import ("Intel oneMKL FATAL ERROR: Cannot load
    libtorch_cpu.so", exit 2), and relative paths name nothing there."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return True
    except OSError:  # another reason (a folder above it unreadable): as before
        return False
    return False


def main() -> None:
    """Console-script entry point."""
    _standard_streams()
    # (--help and --version need no folder: they still answer there.)
    if _current_folder_gone() and not {"--help", "-h", "--version"} & set(sys.argv[1:]):
        typer.echo("error: the current folder no longer exists (deleted after this shell entered "
                   "it): cd to an existing folder and run the command again", err=True)
        raise SystemExit(exit_code(DataError("")))
    try:
        cli()
    except KeyboardInterrupt:  # between the imports and typer's own handling of it
        raise SystemExit(130) from None
    except OSError as e:  # writing outside a command (--help into a full disk)
        done = output_error_exit(e)
        if done is None:
            raise
        raise SystemExit(done.exit_code) from None
