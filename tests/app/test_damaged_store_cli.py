"""A collection whose embedded store files cannot be read is a data error at every command
(exit 4, its file named), not a usage error (exit 2) that blamed "another process"."""

from __future__ import annotations

from tests.app.cli_runner import invoke_cli


def test_search_index_and_cluster_on_a_damaged_collection_exit_4(tmp_path) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    src = tmp_path / "src"
    src.mkdir()
    for i, text in enumerate(["my card is lost", "a refund please", "the rate is wrong"]):
        (src / f"d{i}.txt").write_text(text)
    assert invoke_cli("index", str(src), "-c", "c3", "--embedder", "minilm", env=env).returncode == 0
    config = tmp_path / "data" / "qdrant-edge" / "c3" / "edge_config.json"
    config.write_text("{garbage\n")
    (src / "d3.txt").write_text("one more")
    for args in (("search", "card", "-c", "c3"), ("index", str(src), "-c", "c3"),
                 ("cluster", "--collection", "c3", "-i", "topic", "--k", "2", "--explain", "")):
        done = invoke_cli(*args, env=env)
        assert (done.returncode, "Traceback" in done.stderr) == (4, False), (args, done.stderr)
        assert f"{config} is damaged" in done.stderr, (args, done.stderr)
        assert "another process" not in done.stderr, (args, done.stderr)


def test_a_damaged_collection_is_listed_with_why_and_can_be_deleted(tmp_path) -> None:
    """One damaged collection failed the whole listing (exit 4, none listed), and `facet
    delete` failed on it too, though the message advised it."""
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("my card is lost")
    for name in ("good", "bad"):
        assert invoke_cli("index", str(src), "-c", name, "--embedder", "minilm", env=env).returncode == 0
    config = tmp_path / "data" / "qdrant-edge" / "bad" / "edge_config.json"
    config.write_text("{garbage\n")
    listed = invoke_cli("collections", env=env)
    assert listed.returncode == 0, listed.stderr
    bad, good = listed.stdout.splitlines()
    assert bad.startswith("bad: ") and f"· store files damaged: {config} is damaged" in bad, bad
    assert good.startswith("good: ") and "1 point" in good, good
    import json

    as_json = {c["name"]: c for c in json.loads(invoke_cli("collections", "--json", env=env).stdout)}
    assert as_json["bad"]["store_damaged"].startswith(f"{config} is damaged")
    assert as_json["good"]["store_damaged"] is None
    deleted = invoke_cli("delete", "bad", "-y", env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert not config.parent.exists()
    assert invoke_cli("index", str(src), "-c", "bad", env=env).returncode == 0  # anew
