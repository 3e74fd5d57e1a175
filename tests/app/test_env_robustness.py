"""The CLI in unusual surroundings, in real processes: a current folder this user may not enter
or that was deleted, a data folder another user's (mode 700), a stdout whose encoding lacks the
output's characters, a read-only HOME or model cache, a closed stdout. Each was a traceback (or
torch's "oneMKL FATAL ERROR"); each is now the command's work or one ``error:`` line.

Permission bits do not bind root: as root the commands run under ``setpriv`` with no
capabilities (the tests skip where that cannot be done)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli

ROOT = Path(__file__).resolve().parents[2]
SETPRIV = ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, minilm) -> Path:
    """A data folder with a collection ``tiny`` indexed by minilm (job 1) from files with
    Japanese names, one of them a broken PDF (the job's error names it)."""
    root = tmp_path_factory.mktemp("env_robustness")
    src = root / "東京src"
    src.mkdir()
    (src / "d0.txt").write_text("card payment declined twice", encoding="utf-8")
    (src / "東京.txt").write_text("東京 tower view", encoding="utf-8")
    (src / "壊れ.pdf").write_text("garbage")
    done = invoke_cli("index", str(src), "-c", "tiny", "-e", "minilm", "--allow-failures",
                      env={"FACET_DATA_DIR": str(root / "data")})
    assert done.returncode == 0, done.stderr
    return root / "data"


@functools.cache
def _unprivileged() -> tuple[str, ...] | None:
    """The prefix that runs a command bound by permission bits: none for a user other than
    root, ``setpriv`` without capabilities for root; None where that cannot be had."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        return None
    probe = subprocess.run([*SETPRIV, "sh", "-c", "mkdir -m 000 /tmp/.facet-probe.$$ && "
                            "! test -x /tmp/.facet-probe.$$; r=$?; rmdir /tmp/.facet-probe.$$; exit $r"],
                           capture_output=True, timeout=30)
    return tuple(SETPRIV) if probe.returncode == 0 else None


def _as_user() -> tuple[str, ...]:
    prefix = _unprivileged()
    if prefix is None:
        pytest.skip("cannot run a command bound by permission bits here (root without setpriv)")
    return prefix


def _facet(data: Path, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT,
           prefix: tuple[str, ...] = (), drop: tuple[str, ...] = (),
           preexec_fn: Callable[[], None] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """``facet ARGS`` (``python -m app``) over ``data``; its output as bytes."""
    full = dict(os.environ, FACET_DATA_DIR=str(data), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT),
                HF_HUB_OFFLINE="1", **(env or {}))
    for name in drop:
        full.pop(name, None)
    return subprocess.run([*prefix, sys.executable, "-m", "app", *args], cwd=cwd, env=full,
                          capture_output=True, timeout=timeout, preexec_fn=preexec_fn)


def _one_error_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode("utf-8", "replace")
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture()
def closed_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder this user may not enter (mode 000), opened again at the end for its removal."""
    folder = tmp_path / "noread"
    folder.mkdir()
    folder.chmod(0)
    yield folder
    folder.chmod(0o755)


def test_a_registered_name_works_from_a_folder_the_user_cannot_enter(data: Path,
                                                                     closed_folder: Path) -> None:
    """`cd noread; facet search -c tiny q` died in a PermissionError traceback from the check
    that no folder ./minilm shadows the registered name; the name loads as anywhere else."""
    prefix = _as_user()
    # An absolute shared data folder: only the embedder's look-up is under test here.
    env = {"FACET_SHARED_DATA_DIR": str(closed_folder.parent / "shared")}
    done = _facet(data, "search", "-c", "tiny", "card payment", "-k", "1", env=env,
                  cwd=closed_folder, prefix=prefix)
    assert done.returncode == 0, done.stderr.decode()
    assert b"d0.txt" in done.stdout, done.stdout.decode()
    assert b"Traceback" not in done.stderr, done.stderr.decode()


def test_a_checkpoint_path_under_a_folder_the_user_cannot_enter_is_one_line(
        data: Path, closed_folder: Path) -> None:
    prefix = _as_user()
    env = {"FACET_SHARED_DATA_DIR": str(closed_folder.parent / "shared")}
    done = _facet(data, "search", "-c", "tiny", "-e", "./ck", "card", env=env,
                  cwd=closed_folder, prefix=prefix)
    line = _one_error_line(done)
    assert done.returncode == 4, line
    assert line.startswith("error: cannot look for a checkpoint in ./ck: Permission denied"), line
    assert f"may not look into the current folder {closed_folder}" in line, line


@pytest.mark.parametrize("args", [("collections",), ("search", "-c", "tiny", "card"),
                                  ("serve", "--port", "0")])
def test_a_data_folder_the_user_cannot_enter_is_one_line(tmp_path: Path,
                                                         args: tuple[str, ...]) -> None:
    """Another user's data folder, made under umask 077 (mode 700): every command died in a
    PermissionError traceback from the check of its files; as a readable one that is not
    writable, one line naming it and why, exit 4."""
    prefix = _as_user()
    folder = tmp_path / "theirs"
    folder.mkdir()
    if os.geteuid() == 0:
        os.chown(folder, 65534, 65534)
        folder.chmod(0o700)
    else:
        folder.chmod(0)
    if args[0] == "serve":  # a free port (check_port binds it first)
        from tests.app.served import free_port

        args = ("serve", "--port", str(free_port()))
    try:
        done = _facet(folder, *args, prefix=prefix)
    finally:
        folder.chmod(0o755)
    line = _one_error_line(done)
    assert done.returncode == 4, line
    assert line.startswith(f"error: the data folder {folder} (FACET_DATA_DIR) cannot be used: this "
                           "user may not look into it (Permission denied"), line


CP1252 = {"PYTHONIOENCODING": "cp1252"}


def test_a_query_the_output_encoding_lacks_is_escaped_not_a_traceback(data: Path) -> None:
    done = _facet(data, "search", "-c", "tiny", "東京", "-k", "1", env=CP1252)
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode("cp1252")
    assert "query: \\u6771\\u4eac" in out, out
    assert "\\u6771\\u4eac tower view" in out, out


def test_json_output_the_encoding_lacks_stays_valid_json(data: Path) -> None:
    """``--json`` under cp1252: the characters it lacks (one above U+FFFF) as JSON escapes."""
    done = _facet(data, "search", "-c", "tiny", "東京😀 café", "-k", "1", "--json", env=CP1252)
    assert done.returncode == 0, done.stderr.decode()
    # ASCII alone, escapes for the rest: read as UTF-8 too (jq, json.load of the bytes), as
    # JSON is (the cp1252 bytes of "café" read as "caf\ufffd" there until 2026-12-01).
    assert done.stdout.isascii(), done.stdout
    body = json.loads(done.stdout)
    assert body["query"] == "東京😀 café", body
    assert "東京 tower view" in json.dumps(body, ensure_ascii=False)


def test_a_job_whose_error_names_a_japanese_file_under_cp1252(data: Path) -> None:
    done = _facet(data, "jobs", "1", env=CP1252)
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode("cp1252")
    assert "\\u58ca\\u308c.pdf is not a readable PDF" in out, out


@pytest.fixture(scope="module")
def latin1_locale(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compiled en_US.ISO-8859-1 locale (LOCPATH), or the test skipped without localedef."""
    if shutil.which("localedef") is None:
        pytest.skip("no localedef to make a Latin-1 locale")
    folder = tmp_path_factory.mktemp("locale")
    made = subprocess.run(["localedef", "-i", "en_US", "-f", "ISO-8859-1",
                           str(folder / "en_US.ISO-8859-1")], capture_output=True, timeout=60)
    if not (folder / "en_US.ISO-8859-1").is_dir():
        pytest.skip(f"cannot make a Latin-1 locale: {made.stderr.decode(errors='replace')}")
    return folder


def test_a_latin1_locale_writes_what_it_lacks_escaped(data: Path, latin1_locale: Path) -> None:
    env = {"LOCPATH": str(latin1_locale), "LANG": "en_US.ISO-8859-1", "LC_ALL": "",
           "PYTHONIOENCODING": "", "PYTHONUTF8": "0"}
    done = _facet(data, "search", "-c", "tiny", "tower view", "-k", "1", "--json", env=env)
    assert done.returncode == 0, done.stderr.decode("latin-1")
    body = json.loads(done.stdout.decode("latin-1"))
    assert "東京 tower view" in json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize("where", ["HOME", "FACET_MODEL_CACHE_DIR"])
def test_a_read_only_model_cache_is_one_line(data: Path, tmp_path: Path, where: str) -> None:
    """`facet embed -e instemb` converts SmolLM2 into the model cache once: a read-only HOME
    (the default cache under it) or FACET_MODEL_CACHE_DIR was a chained traceback."""
    prefix = _as_user()
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    env = {where: str(folder)}
    drop = ("XDG_CACHE_HOME",) + (("FACET_MODEL_CACHE_DIR",) if where == "HOME" else ())
    done = _facet(data, "embed", "-e", "instemb", "hi", env=env, drop=drop, prefix=prefix)
    line = _one_error_line(done)
    assert done.returncode == 4, line
    cache = folder / ".cache" / "facet" / "models" if where == "HOME" else folder
    assert line.startswith(f"error: cannot convert smollm2-135m-instruct into the model cache "
                           f"{cache}: Permission denied"), line
    assert "point FACET_MODEL_CACHE_DIR" in line and "at a folder this user can write" in line, line


def test_a_deleted_current_folder_is_one_line(data: Path, tmp_path: Path) -> None:
    """`mkdir g; cd g; rmdir ../g; facet search ...` died in torch's import ("Intel oneMKL
    FATAL ERROR: Cannot load libtorch_cpu.so", exit 2)."""
    gone = tmp_path / "g"
    gone.mkdir()

    def enter_and_delete() -> None:
        os.chdir(gone)
        os.rmdir(gone)

    done = _facet(data, "search", "-c", "tiny", "card", preexec_fn=enter_and_delete)
    assert done.returncode == 4, done.stderr.decode()
    assert done.stderr.decode() == ("error: the current folder no longer exists (deleted after "
                                    "this shell entered it): cd to an existing folder and run "
                                    "the command again\n")
    gone.mkdir()
    version = _facet(data, "--version", preexec_fn=enter_and_delete)  # needs no folder
    assert version.returncode == 0 and version.stdout.decode().startswith("facet"), version


def test_serve_with_stdout_closed_serves(data: Path) -> None:
    """`facet serve >&-` ended in uvicorn's "Unable to configure formatter 'default'" traceback."""
    from tests.app.served import free_port, wait_until_healthy

    port = free_port()
    env = dict(os.environ, FACET_DATA_DIR=str(data), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=ROOT,
                            env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: os.close(1))
    try:
        wait_until_healthy(proc, port)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert "Uvicorn running on" in err, err
