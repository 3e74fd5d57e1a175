"""File names that are valid UTF-8 under a locale that is not (``LC_ALL=C PYTHONUTF8=0``):
``café.txt`` and ``東京.txt`` were skipped as "its name is not valid UTF-8; rename it", since
``skip_reason`` compared ``display_path(path)`` with ``str(path)``, which differ whenever the
file system encoding is not UTF-8. They are indexed, keyed by their UTF-8 names; a name whose
bytes are not UTF-8 is still skipped."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

NOT_UTF8 = "its name is not valid UTF-8"
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "OMP_NUM_THREADS": "1"}


def _source(root: Path) -> Path:
    src = root / "src"
    src.mkdir()
    (src / "café.txt").write_text("un café au lait, s'il vous plaît")
    (src / "東京.txt").write_text("Tokyo tower at night")
    (src / "plain.txt").write_text("a plain ascii name")
    with open(os.path.join(os.fsencode(src), b"bad\xe9.txt"), "wb") as fh:  # really not UTF-8
        fh.write(b"a Latin-1 name")
    return src


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=os.environ | C_LOCALE | env, capture_output=True, text=True,
                          encoding="utf-8", errors="backslashreplace", timeout=120,
                          cwd=Path(__file__).resolve().parents[2])


def test_valid_utf8_names_are_found_and_keyed_by_their_utf8_text_under_the_c_locale(tmp_path) -> None:
    src = _source(tmp_path)
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from indexer.parsing import discover_files, parse_file, skip_reason, display_path\n"
        "files, skipped = discover_files(Path(sys.argv[1]))\n"
        "docs = [d for f in files for d in parse_file(f)]\n"
        "print(json.dumps({'encoding': sys.getfilesystemencoding(),\n"
        "  'files': [display_path(f) for f in files],\n"
        "  'skipped': [[display_path(p), skip_reason(p)] for p in skipped],\n"
        "  'keys': [d.key for d in docs], 'sources': [d.source for d in docs],\n"
        "  'texts': [getattr(d, 'text', '') for d in docs]}))\n")
    done = _run([sys.executable, "-c", script, str(src)], {})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["encoding"] != "utf-8"  # the locale this is about
    names = sorted(Path(f).name for f in got["files"])
    assert names == ["café.txt", "plain.txt", "東京.txt"], got
    assert [[Path(p).name, why] for p, why in got["skipped"]] == [
        ["bad\\xe9.txt", f"{NOT_UTF8}; rename it"]], got
    assert sorted(Path(k).name for k in got["keys"]) == names, got
    assert got["keys"] == got["sources"]
    assert str(src / "café.txt") in got["keys"] and str(src / "東京.txt") in got["keys"]
    assert "Tokyo tower at night" in got["texts"]


def test_facet_index_under_the_c_locale_indexes_them_and_records_their_names(tmp_path) -> None:
    src = _source(tmp_path)
    data = tmp_path / "data"
    facet = Path(sys.executable).with_name("facet")
    done = _run([str(facet), "index", str(src), "-c", "loc", "-e", "minilm"],
                {"FACET_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 documents seen, 3 indexed" in done.stdout, done.stdout + done.stderr
    assert done.stderr.count(NOT_UTF8) == 1, done.stderr  # the Latin-1 name only
    with sqlite3.connect(data / "facet.db") as db:
        keys = sorted(k for (k,) in db.execute("SELECT key FROM documents"))
    assert keys == sorted(str(src / n) for n in ("café.txt", "plain.txt", "東京.txt"))
    # Indexing again (a UTF-8 locale now) finds the same documents unchanged: same keys.
    again = _run([str(facet), "index", str(src), "-c", "loc", "-e", "minilm"],
                 {"FACET_DATA_DIR": str(data), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"})
    assert again.returncode == 0, again.stderr
    assert "3 unchanged" in again.stdout and "0 removed" in again.stdout, again.stdout


def test_a_copy_of_a_file_named_in_utf8_does_not_move_it_under_the_c_locale(tmp_path) -> None:
    """A new copy of café.txt looked like café.txt moved: the check whether the old path was still
    there asked ``Path(key).exists()``, which cannot encode the UTF-8 name in the C locale's ASCII
    and answers False; café.txt, counted unchanged in the same run, lost its entry ("1 document
    moved ... its entry at the old path, which no longer exists, was removed")."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "café.txt").write_text("un café au lait, s'il vous plaît")
    (src / "plain.txt").write_text("a plain ascii name")
    data = tmp_path / "data"
    facet = Path(sys.executable).with_name("facet")
    first = _run([str(facet), "index", str(src), "-c", "loc", "-e", "minilm"], {"FACET_DATA_DIR": str(data)})
    assert first.returncode == 0 and "2 indexed" in first.stdout, first.stdout + first.stderr
    (src / "copy.txt").write_bytes((src / "café.txt").read_bytes())
    again = _run([str(facet), "index", str(src), "-c", "loc", "-e", "minilm"], {"FACET_DATA_DIR": str(data)})
    assert again.returncode == 0, again.stdout + again.stderr
    assert "no longer exists" not in again.stdout + again.stderr, again.stdout + again.stderr
    with sqlite3.connect(data / "facet.db") as db:
        keys = sorted(k for (k,) in db.execute("SELECT key FROM documents"))
    assert keys == sorted(str(src / n) for n in ("café.txt", "copy.txt", "plain.txt"))
