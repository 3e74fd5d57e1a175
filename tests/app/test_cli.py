"""The `facet` CLI foundation commands, run as a user would (a subprocess)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.app.cli_runner import invoke_cli


def facet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=300)


# In this process: `embed` starts as every command does, so a new process per case only paid
# torch's import and the model's load again (~6 s each; `python -m app` runs in the first test).
embed = functools.partial(invoke_cli, "embed")


def test_embedders_lists_builtins_as_json():
    result = facet("embedders", "--json")
    assert result.returncode == 0, result.stderr
    names = {row["name"] for row in json.loads(result.stdout)}
    assert {"minilm", "backbone-mean", "backbone-prompteol"} <= names


def test_embed_prints_normalised_vectors():
    result = embed("--embedder", "minilm", "--instruction", "Represent the topic", "a cat", "a dog")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    vectors = np.array(payload["vectors"])
    assert payload["dim"] == 384 and vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_embed_prints_the_instruction_it_used():
    """`-i "   "` printed "   " as the instruction, though none was used (the library said None)."""
    blank = embed("--instruction", "   ", "a cat")
    assert blank.returncode == 0, blank.stderr
    assert json.loads(blank.stdout)["instruction"] is None


def test_an_empty_text_is_refused_with_a_message():
    result = embed("a cat", "")
    assert result.returncode == 2 and result.stdout == ""
    assert "error: text 2 is empty; every text must contain something to embed" in result.stderr
    assert "Traceback" not in result.stderr
    # Invisible characters alone: counted as typed too (it said "texts[1]", from 0).
    result = embed("a cat", "\u200b")
    assert result.returncode == 2 and result.stderr.endswith(
        "error: text 2 is empty (invisible characters alone); every text must contain something "
        "to embed\n"), result.stderr


def test_unknown_embedder_is_a_message_not_a_traceback():
    result = embed("--embedder", "nope", "x")
    assert result.returncode == 2
    assert "unknown embedder 'nope'" in result.stderr and "minilm" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_role_is_a_message_not_a_traceback():
    result = embed("--role", "passage", "x")
    assert result.returncode == 2
    assert "unknown role 'passage'" in result.stderr
    assert "Traceback" not in result.stderr


def test_commands_that_never_embed_start_without_torch(tmp_path):
    """collections / jobs / delete answer in about a second: they do not import torch."""
    probe = ("import sys\nfrom typer.testing import CliRunner\nfrom app.cli import cli\n"
             "for args in (['collections', '--json'], ['jobs', '--json'], ['delete', 'none', '--yes']):\n"
             "    result = CliRunner().invoke(cli, args)\n"
             "    assert result.exit_code in (0, 3), (args, result.output)\n"
             "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    import os

    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, FACET_DATA_DIR=str(tmp_path / "data")))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_command_module_imported_before_the_cli_is_still_registered():
    probe = ("from app.commands.cluster import read_texts\nfrom app.cli import cli\n"
             "from typer.testing import CliRunner\n"
             "print(CliRunner().invoke(cli, ['cluster', '--help']).exit_code)\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_a_data_folder_that_is_a_file_is_a_message(tmp_path):
    """FACET_DATA_DIR at a file (or under one) was a FileExistsError / NotADirectoryError
    traceback from every command, facet embed included."""
    import os

    (tmp_path / "afile").write_text("hi")
    for where, why in ((tmp_path / "afile", "it is a file"),
                       (tmp_path / "afile" / "sub", "Not a directory")):
        result = subprocess.run([sys.executable, "-m", "app", "collections"], capture_output=True,
                                text=True, timeout=300,
                                env={**os.environ, "FACET_DATA_DIR": str(where)})
        assert result.returncode == 4 and "Traceback" not in result.stderr
        assert f"the data folder {where} (FACET_DATA_DIR) cannot be used: {why}" in result.stderr


@pytest.mark.parametrize(("env", "message"), [
    ({"FACET_UI_ALLOWED_ROOTS": "/tmp"}, "FACET_UI_ALLOWED_ROOTS='/tmp' cannot be read (a list is written as JSON"),
    ({"FACET_API_MODELS": "minilm"}, "FACET_API_MODELS='minilm': Input should be a valid list (a list is"),
    ({"FACET_CHUNK_TOKENS": "abc"}, "FACET_CHUNK_TOKENS='abc': Input should be a valid integer"),
])
def test_a_setting_that_does_not_parse_is_one_line_from_every_command(tmp_path, env, message):
    """Every command (even those that never use the variable) printed pydantic's traceback."""
    result = invoke_cli("collections", env={"FACET_DATA_DIR": str(tmp_path), **env})
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["serve", "ui"])
def test_a_bad_or_busy_port_is_one_line_before_any_model_loads(tmp_path, command) -> None:
    """`facet ui --port 99999` ended in a 16-frame traceback (OverflowError), a busy port in
    Gradio's "set GRADIO_SERVER_PORT"; `facet serve --port 99999` listened on 34463 (99999 -
    65536) while its log said 99999, after loading its embedder."""
    import socket

    env = {"FACET_DATA_DIR": str(tmp_path)}
    out_of_range = invoke_cli(command, "--port", "99999", env=env)
    assert out_of_range.returncode == 2 and f"(facet {command} --help)" in out_of_range.stderr
    assert out_of_range.stderr.startswith("error: ") and out_of_range.stderr.count("\n") == 1
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = invoke_cli(command, "--port", str(port), env=env)
    assert busy.returncode == 5, busy.stdout + busy.stderr
    assert busy.stderr.strip() == (f"error: port {port} on 127.0.0.1 is in use (another server?); "
                                   "pick another with --port")
    assert not (tmp_path / "facet.db").exists()  # refused before the data folder was opened


def test_the_ui_refuses_an_ipv6_host_in_one_line(tmp_path) -> None:
    """`facet ui --host ::1` passed the port check, printed its URL, then died in Gradio's
    traceback (httpx.InvalidURL: Invalid port: ':1:28414'), nothing listening."""
    refused = invoke_cli("ui", "--host", "::1", "--port", "28414", env={"FACET_DATA_DIR": str(tmp_path)})
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("error: the UI cannot listen on the IPv6 address '::1'; give "
                                      "--host an IPv4 address (127.0.0.1, 0.0.0.0) or a host name")
    assert not (tmp_path / "facet.db").exists()


def test_a_data_folder_named_with_a_question_mark_keeps_its_database(tmp_path) -> None:
    """FACET_DATA_DIR=/x/data?1 put the SQLite database at /x/data (what follows "?" read as
    URL options): a backup of the folder missed it and data?2 shared it. An empty value used the
    working directory, a "~" was a folder named "~"."""
    from app.settings import FacetSettings

    first, second = tmp_path / "data?1", tmp_path / "data?2"
    assert invoke_cli("collections", env={"FACET_DATA_DIR": str(first)}).returncode == 0
    assert (first / "facet.db").is_file() and not (tmp_path / "data").exists()
    assert FacetSettings(data_dir=second).resolved_database_url.endswith("data%3F2/facet.db")
    assert FacetSettings(data_dir="~/x").data_dir == Path.home() / "x"
    empty = invoke_cli("collections", env={"FACET_DATA_DIR": ""})
    assert empty.returncode == 2 and "FACET_DATA_DIR='': is empty" in empty.stderr


def test_a_data_folder_whose_files_another_user_owns_is_one_line(tmp_path) -> None:
    """A writable folder holding another user's files (after one `sudo facet ...`): searches
    ended in a PermissionError traceback from the lock file, indexing in "attempt to write a
    readonly database" with the SQL. Run without root's permission overrides (capsh)."""
    import os
    import shutil

    if os.geteuid() != 0 or shutil.which("capsh") is None:
        pytest.skip("needs root and capsh to act as a user who cannot write another's files")
    data = tmp_path / "data"
    assert invoke_cli("collections", env={"FACET_DATA_DIR": str(data)}).returncode == 0
    (data / "qdrant-edge" / "notes").mkdir(parents=True)
    tmp_path.chmod(0o755)
    for path in [data, *data.rglob("*")]:
        shutil.chown(path, "nobody", "nogroup")
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.chown(data, "root", "root")  # the folder itself writable, its files not
    script = f"FACET_DATA_DIR={data} {sys.executable} -c 'from app.cli import main; main()' "
    for args in ("collections", "search card -c notes"):
        done = subprocess.run(
            ["capsh", "--drop=cap_dac_override,cap_dac_read_search,cap_fowner", "--", "-c",
             script + args], capture_output=True, text=True, timeout=120,
            cwd=str(Path(__file__).resolve().parents[2]))
        assert done.returncode == 4, done.stderr
        assert done.stderr.strip().splitlines()[-1] == (
            f"error: the data folder {data} (FACET_DATA_DIR) holds files this user cannot write "
            "(after a `sudo facet ...`?): give them back to this user (chown -R), or run as "
            "their owner"), done.stderr


READ_ONLY_ADVICE = ("(FACET_DATA_DIR) is not writable (it is on a read-only file system): Facet "
                    "keeps its database, locks and vectors there, for reading too; point "
                    "FACET_DATA_DIR at a writable folder (a copy of this one to read it)")


def test_a_data_folder_on_a_read_only_mount_gets_the_read_only_advice(tmp_path, monkeypatch) -> None:
    """A read-only mount (a `:ro` bind, a snapshot) was told its files were another user's, to
    `chown -R` them: os.access(W_OK) is False for every file there, even for root, and the
    per-file check ran first. The mount is simulated here: os.statvfs reports ST_RDONLY and
    os.access refuses writing, for the data folder's paths only (the next test mounts one for
    real where it can)."""
    import os
    import types

    data = tmp_path / "data"
    assert invoke_cli("collections", env={"FACET_DATA_DIR": str(data)}).returncode == 0
    assert (data / "facet.db").is_file()
    real_statvfs, real_access = os.statvfs, os.access

    def inside(path: object) -> bool:
        return str(path) == str(data) or str(path).startswith(f"{data}/")

    def statvfs(path):
        if inside(path):
            return types.SimpleNamespace(f_flag=real_statvfs(path).f_flag | os.ST_RDONLY)
        return real_statvfs(path)

    def access(path, mode, *args, **kwargs):
        if inside(path) and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "statvfs", statvfs)
    monkeypatch.setattr(os, "access", access)
    for args in (["collections"], ["search", "card", "-c", "notes"]):
        done = invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})
        assert done.returncode == 4, done.stderr
        assert done.stderr.strip() == f"error: the data folder {data} {READ_ONLY_ADVICE}"


def test_a_data_folder_on_a_real_read_only_mount_gets_the_read_only_advice(tmp_path) -> None:
    """The same on a read-only bind mount in a private mount namespace (needs root and
    unshare; skipped where a mount cannot be made)."""
    import os
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to make a read-only bind mount")
    data, mnt = tmp_path / "data", tmp_path / "ro"
    mnt.mkdir()
    assert invoke_cli("collections", env={"FACET_DATA_DIR": str(data)}).returncode == 0
    mount = f"mount --bind {data} {mnt} && mount -o remount,bind,ro {mnt}"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"{mount} && ! touch {mnt}/x"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here: {probe.stderr.strip()}")
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"{mount} && exec {sys.executable} -m app collections"],
        capture_output=True, text=True, timeout=120, cwd=str(Path(__file__).resolve().parents[2]),
        env=dict(os.environ, FACET_DATA_DIR=str(mnt)))
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: the data folder {mnt} {READ_ONLY_ADVICE}"


@pytest.mark.parametrize("command", ["serve", "ui"])
def test_a_second_server_on_one_embedded_data_folder_is_refused_at_start(tmp_path, command) -> None:
    """Two `facet serve` (or `serve` and `ui`) on one data folder started without a word, then
    split its collections: each one's searches of the other's got 409s and its jobs failed."""
    import os
    import socket

    from app.commands.common import serving_lock
    from app.settings import FacetSettings

    settings = FacetSettings(data_dir=tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with serving_lock(settings, "facet serve", "http://127.0.0.1:8000"):
        second = invoke_cli(command, "--port", str(port), env={"FACET_DATA_DIR": str(tmp_path)})
        assert second.returncode == 5, second.stdout + second.stderr
        assert second.stderr.startswith(
            f"error: another Facet server (facet serve, pid {os.getpid()}, on http://127.0.0.1:8000, "
            "since "), second.stderr
        assert f"serves the data folder {tmp_path}: one server per embedded data folder" in second.stderr
        # With a Qdrant server nothing is held per process: a second API server may share it.
        with serving_lock(FacetSettings(data_dir=tmp_path, qdrant_url="http://qdrant:6333"),
                          "facet serve", "http://127.0.0.1:8001"):
            pass
    # Let go when the first ends (as the kernel does when its process dies).
    with serving_lock(settings, "facet ui", "http://127.0.0.1:7860"):
        # A `facet ui` holder serves no API: the refusal does not send requests to it.
        second = invoke_cli(command, "--port", str(port), env={"FACET_DATA_DIR": str(tmp_path)})
        assert second.returncode == 5 and "send requests to it" not in second.stderr, second.stderr
        assert ("use its UI; for the API too, stop it and run `facet serve` (the API, and the same UI "
                "at /ui); or give this one another FACET_DATA_DIR") in second.stderr
