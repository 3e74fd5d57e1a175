"""`facet collections` over a data folder an older Facet wrote: the note on term vectors of an
older definition of a term (``Store.older_lexical``, about 400 characters) was printed inside
every affected collection's row, the same paragraph once per collection. Each row now carries a
short marker, and each distinct note is printed once after the rows, naming its collections;
``--json`` keeps the full note per collection."""

from __future__ import annotations

import json

from app.services.context import ServiceContext
from app.services.indexing import IndexService
from app.settings import FacetSettings
from indexer import lexical as lex

from .cli_runner import invoke_cli

OLDER = "qdrant-bm25-en-v1"  # as tests/app/services/test_upgraded_data.py builds it
PAIRS = "qdrant-bm25-en-pairs-v1"


def test_the_older_terms_note_is_printed_once_per_text_naming_its_collections(
    cache, tmp_path, monkeypatch
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "d.txt").write_text("My card was declined at the supermarket")
    data = tmp_path / "data"
    ctx = ServiceContext(FacetSettings(data_dir=data, chunk_tokens=64, chunk_overlap=8),
                         embedders=cache)
    try:
        for version, names in ((OLDER, ("a", "b", "c")), (PAIRS, ("p",))):
            with monkeypatch.context() as m:  # what an older Facet wrote
                m.setattr(lex, "LEXICAL_VERSION", version)
                m.setattr(lex, "LEXICAL_VECTOR", lex.vector_name(version))
                for name in names:
                    IndexService(ctx).index(src, name)
        IndexService(ctx).index(src, "today")  # today's definition: no note
    finally:
        ctx.close()
    env = {"FACET_DATA_DIR": str(data)}

    listed = invoke_cli("collections", "--json", env=env)
    assert listed.returncode == 0, listed
    notes = {c["name"]: c["lexical_note"] for c in json.loads(listed.stdout)}
    assert notes["today"] is None
    for name in ("a", "b", "c", "p"):  # --json as before: each its own full note
        assert notes[name].startswith(f"collection {name!r} keeps the term vectors of "), notes
    older_note = notes["a"].replace("'a'", "'b'")
    assert notes["b"] == older_note and notes["c"] == older_note.replace("'b'", "'c'")

    result = invoke_cli("collections", env=env)
    assert result.returncode == 0, result
    out = result.stdout
    lines = out.splitlines()
    rows = {line.split(": ", 1)[0]: line for line in lines if line.split(": ", 1)[0] in notes}
    assert sorted(rows) == ["a", "b", "c", "p", "today"], out
    for name in ("a", "b", "c", "p"):
        assert "older definition" not in rows[name], rows[name]  # not the paragraph in each row
        assert " · words (lexical/hybrid; older term vectors: see the note below)" in rows[name]
    assert " · words (lexical/hybrid)" in rows["today"] and "older" not in rows["today"]
    # Each distinct note once, after the rows, naming every collection it applies to.
    assert out.count(f"the term vectors of {OLDER}, an older definition") == 1, out
    assert out.count(f"the term vectors of {PAIRS}, an older definition") == 1, out
    shared = next(line for line in lines if f"the term vectors of {OLDER}," in line)
    assert lines.index(shared) > max(lines.index(row) for row in rows.values())
    assert shared == ("each of collections 'a', 'b' and 'c' keeps"
                      + notes["a"].removeprefix("collection 'a' keeps")), shared
    single = next(line for line in lines if f"the term vectors of {PAIRS}," in line)
    assert single == notes["p"], single  # one collection: the note as it is, below the rows
    assert lines.index(single) > max(lines.index(row) for row in rows.values())
