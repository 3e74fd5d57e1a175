"""A path starting ``~nosuchuser`` (a user this machine does not have) is kept as written, as a
shell keeps it: a source that does not exist, said in one line (404 over HTTP, exit 3 on the
command line). ``Path.expanduser`` raised RuntimeError "Could not determine home directory": a
500 "internal error (RuntimeError)" from POST /jobs, a 43-line traceback from `facet index`
and from every path option of `facet cluster` / `eval` / `bench` / `soup`."""

from __future__ import annotations

from pathlib import Path

from app.files import expand_user
from tests.app.cli_runner import invoke_cli

NO_USER = "~nosuchuser-facet"


def test_a_home_of_no_user_stays_as_written() -> None:
    assert expand_user(f"{NO_USER}/x") == Path(f"{NO_USER}/x")
    assert expand_user("~/x") == Path.home() / "x"


def test_index_and_cluster_say_the_path_does_not_exist(tmp_path) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    indexed = invoke_cli("index", f"{NO_USER}/docs", "-c", "zz", "-e", "minilm", env=env)
    texts = tmp_path / "t.txt"
    texts.write_text("one\ntwo\nthree\n")
    clustered = invoke_cli("cluster", str(texts), "-i", "topic?", "-e", "minilm", "--labels",
                           f"{NO_USER}/l.txt", env=env)
    for done in (indexed, clustered):
        assert "Traceback" not in done.stderr and "RuntimeError" not in done.stderr, done.stderr
        assert done.returncode in (2, 3) and NO_USER in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr

