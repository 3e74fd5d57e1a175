"""A source that leads through a loop of links (`ln -s b a; ln -s a b`, or a folder link loop
on the way to a file) ended `facet index` in a RuntimeError traceback ("Symlink loop from"),
exit 1, from resolving it (Python 3.11); `--background` too."""

from __future__ import annotations

import pytest

from tests.app.cli_runner import invoke_cli


@pytest.mark.parametrize("name", ["loop1.txt", "ll/x.txt", "ll"])
@pytest.mark.parametrize("background", [False, True])
def test_a_loop_of_links_is_one_line_exit_4(tmp_path, monkeypatch, name, background) -> None:
    (tmp_path / "loop1.txt").symlink_to("loop2.txt")
    (tmp_path / "loop2.txt").symlink_to("loop1.txt")
    (tmp_path / "ll").symlink_to("ll2")
    (tmp_path / "ll2").symlink_to("ll")
    monkeypatch.chdir(tmp_path)
    r = invoke_cli("index", name, "--collection", "c", *(["--background"] if background else []),
                   env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 4, r.stderr
    assert "Traceback" not in r.stderr
    assert f"error: {name} leads through a loop of links" in r.stderr, r.stderr
    # Nothing was made for it.
    listed = invoke_cli("collections", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert " c " not in f" {listed.stdout} "


def test_the_other_commands_name_the_loop_not_a_missing_path(tmp_path, monkeypatch) -> None:
    """`facet cluster`, its `--labels`, `facet eval --task` and `facet bench --source` said
    "loop1.txt does not exist" of a link `ls` shows: the user looked for a typo."""
    (tmp_path / "loop1.txt").symlink_to("loop2.txt")
    (tmp_path / "loop2.txt").symlink_to("loop1.txt")
    (tmp_path / "texts.txt").write_text("one text\nanother text\n")
    monkeypatch.chdir(tmp_path)
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    for args, shown in (
            (("cluster", "loop1.txt", "-i", "topic"), "error: loop1.txt leads through a loop of links"),
            (("cluster", "texts.txt", "-i", "topic", "--labels", "loop1.txt"),
             "error: --labels loop1.txt leads through a loop of links"),
            (("eval", "minilm", "--task", "beir:loop1.txt"),
             "error: --task 'beir:loop1.txt': loop1.txt leads through a loop of links"),
            (("bench", "--source", "loop1.txt"), "error: --source loop1.txt leads through a loop of links")):
        r = invoke_cli(*args, env=env)
        assert r.returncode in (2, 3), (args, r.returncode, r.stderr)
        assert shown in r.stderr, (args, r.stderr)
        assert "does not exist" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    # A path that is not there at all still says so.
    r = invoke_cli("cluster", "nothere.txt", "-i", "topic", env=env)
    assert "error: nothere.txt does not exist" in r.stderr, r.stderr
