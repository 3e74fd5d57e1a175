"""`facet index FOLDER` whose sync removed documents said "2 removed" and named none; a wrong
removal (a hidden file indexed by itself, which the walk skips) could not be traced."""

from __future__ import annotations

from tests.app.cli_runner import invoke_cli


def test_the_index_line_names_what_its_sync_removed(tmp_path, monkeypatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (src / name).write_text(f"a note called {name} about rivers")
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    first = invoke_cli("index", str(src), "--collection", "n", env=env)
    assert first.returncode == 0, first.stderr
    (src / "a.txt").unlink()
    (src / "b.txt").unlink()
    again = invoke_cli("index", str(src), "--collection", "n", env=env)
    assert again.returncode == 0, again.stderr
    assert "2 removed" in again.stdout
    assert f"  removed, no longer in the source: {src / 'a.txt'}, {src / 'b.txt'}\n" in again.stderr
    unchanged = invoke_cli("index", str(src), "--collection", "n", env=env)
    assert "removed, no longer" not in unchanged.stderr
