"""`facet delete C --document KEY ...` of many files printed one "is still there" warning per
document on stderr (500 lines for 500 files), and `facet jobs N` of the removal listed each key
as an error ("removing: KEY: one of the keys this removal was given", "... 480 more (of
500)")."""

from __future__ import annotations

import json
from pathlib import Path

from tests.app.cli_runner import invoke_cli


def test_a_bulk_removal_caps_its_warnings_and_its_job_lists_keys_not_errors(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    files = [folder / f"d{i:02d}.txt" for i in range(13)]
    for i, f in enumerate(files):
        f.write_text(f"note {i} about the weather and trains")
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_CHUNK_TOKENS": "64"}
    done = invoke_cli("index", str(folder), "-c", "many", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr

    args = [a for f in files for a in ("--document", str(f))]
    done = invoke_cli("delete", "many", *args, "-y", env=env)

    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "is still there: delete it" in line]
    assert len(warned) == 10, done.stderr
    assert ("warning: and 3 more removed documents whose file is still there (13 in all; "
            "`facet jobs 2` lists the keys)") in done.stderr, done.stderr

    shown = invoke_cli("jobs", "2", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "  13 document keys removed:" in shown.stdout, shown.stdout  # (completed)
    assert f"    {files[0]}" in shown.stdout
    assert "removing:" not in shown.stdout, shown.stdout
    assert f"    {files[12]}" in shown.stdout
    capped = invoke_cli("jobs", "2", "--errors", "5", env=env).stdout
    assert f"    {files[4]}" in capped and f"    {files[5]}" not in capped, capped
    assert ("    ... 8 more (of 13): facet jobs 2 --errors 5 --errors-offset 5 shows the next "
            "ones") in capped, capped
    payload = json.loads(invoke_cli("jobs", "2", "--json", env=env).stdout)
    assert (payload["errors"], payload["errors_total"]) == ([], 0), payload
    assert payload["removed_keys"] == [str(f) for f in files]
    assert payload["removed_keys_total"] == 13
