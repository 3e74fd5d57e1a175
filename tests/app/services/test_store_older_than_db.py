"""A data folder restored from copies of different times: its store (qdrant-edge/) older than its
database (facet.db), or a collection's store folder this process cannot open.

An operator's backup copied qdrant-edge/ before facet.db while a job wrote: `facet collections`
said "47 chunks, 40 points" without a word (``vectors_missing`` empty: only a collection of two
embedders was checked), and searches answered from the 40 as if they were all. And one
collection's folder left owned by root by a restore failed the whole listing (exit 7, naming
only it), or, where its folder could not be read at all, ended in a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.services.collections import CollectionService
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService

ROOT = Path(__file__).resolve().parents[3]
TEXTS = ["My card was declined at the shop", "How do I top up by bank transfer?",
         "The exchange rate was wrong", "I lost my card, please block it",
         "My refund has not arrived yet"]


def _source(folder: Path, texts: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(texts):
        (folder / f"d{i}.txt").write_text(text)
    return folder


def test_a_store_older_than_the_database_is_said_by_the_listing_and_searches(make_ctx, tmp_path,
                                                                             monkeypatch) -> None:
    data = tmp_path / "data"
    src = _source(tmp_path / "src", TEXTS[:3])
    ctx = make_ctx(data_dir=data)
    IndexService(ctx).index(src, "n")
    ctx.store.release("n")
    old = tmp_path / "old-store"
    shutil.copytree(data / "qdrant-edge" / "n", old)  # the backup's store: 3 points
    _source(src, TEXTS)
    assert IndexService(ctx).index(src, "n").docs_indexed == 2  # then 2 more: 5 chunks
    ctx.close()
    shutil.rmtree(data / "qdrant-edge" / "n")
    shutil.copytree(old, data / "qdrant-edge" / "n")  # restored: the older store, newer database

    ctx = make_ctx(data_dir=data)
    catalog = CollectionService(ctx)
    scrolled: list[str] = []
    monkeypatch.setattr(type(ctx.store), "_scroll",
                        lambda self, name, *a, **k: scrolled.append(name) or [])
    [info] = catalog.list_all()
    assert (info.chunks, info.points, info.points_missing, info.vectors_missing) == (5, 3, 2, {})
    assert info.store_note == (
        "3 points for 5 chunks: the vectors of 2 chunks are missing from the store, and searches "
        "cannot find them: restored from another time than the database? index its sources "
        "again (`facet index`) to write them; or a `facet delete` of it interrupted part-way? run "
        "it again to finish it")
    assert scrolled == []  # a listing counts; it reads no point
    monkeypatch.undo()

    searching = SearchService(ctx)
    counts: list[str] = []
    real_count = type(ctx.store).count
    monkeypatch.setattr(type(ctx.store), "count",
                        lambda self, name, *a, **k: counts.append(name) or real_count(self, name, *a, **k))
    for _ in range(2):
        response = searching.search(SearchRequest("card", "n", top_k=3))
        assert response.results
        assert response.note == f"collection 'n': {info.store_note}"
    assert counts == ["n"]  # counted once, not at every search

    IndexService(ctx).index(src, "n")  # the next index run writes them again
    searching.forget("n")
    [info] = catalog.list_all()
    assert (info.points, info.points_missing, info.store_note) == (5, 0, None)
    assert searching.search(SearchRequest("card", "n", top_k=3)).note is None


def _drop_dac() -> list[str] | None:
    """The command prefix that runs a command without root's permission overrides (capsh), so
    that another user's files refuse it as they refuse that user; [] where not root (they refuse
    it already); None where neither can be had."""
    if os.geteuid() != 0:
        return []
    if shutil.which("capsh") is None:
        return None
    return ["capsh", "--drop=cap_dac_override,cap_dac_read_search,cap_fowner", "--", "-c"]


@pytest.mark.parametrize("how", ["another user's", "unreadable"])
def test_a_collection_whose_store_cannot_be_opened_is_one_line_of_the_listing(make_ctx, tmp_path,
                                                                              how) -> None:
    prefix = _drop_dac()
    if prefix is None:
        pytest.skip("needs capsh to act, as root, as a user another user's files refuse")
    if how == "another user's" and prefix == []:
        pytest.skip("needs root to give a folder to another user")
    data = tmp_path / "data"
    ctx = make_ctx(data_dir=data)
    for name in ("late", "n3"):
        IndexService(ctx).index(_source(tmp_path / name, TEXTS[:2]), name)
    ctx.close()
    late = data / "qdrant-edge" / "late"
    for path in [late, *late.rglob("*")]:
        if how == "another user's":  # a restore run as root, as the user nobody here
            shutil.chown(path, "nobody", "nogroup")
    if how == "unreadable":
        late.chmod(0)
    try:
        command = shlex.join([sys.executable, "-c", "from app.cli import main; main()"])
        env = dict(os.environ, FACET_DATA_DIR=str(data), OMP_NUM_THREADS="1")
        outputs = {}
        for args in ("collections", "collections --json"):
            argv = [*prefix, f"{command} {args}"] if prefix else ["sh", "-c", f"{command} {args}"]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT,
                                  env=env)
            assert (done.returncode, "Traceback" in done.stderr) == (0, False), done.stderr
            outputs[args] = done.stdout
        # Its removal refused before anything goes (a traceback from the folder's removal
        # part-way, once the listing no longer failed on it).
        argv = [*prefix, f"{command} delete late -y"] if prefix else ["sh", "-c", f"{command} delete late -y"]
        deleted = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
        assert (deleted.returncode, "Traceback" in deleted.stderr) == (7, False), deleted.stderr
    finally:
        late.chmod(0o755)
    first, second = outputs["collections"].splitlines()
    said = ("cannot be written; opening it failed" if how == "another user's" else
            f"Permission denied: {late}/facet_vectors.json; give its files back to this user")
    assert first.startswith("late: 2 documents indexed, 0 failed, 2 chunks, ? points"), first
    assert "· store files unreadable: " in first and said in first, first
    assert second.startswith("n3: 2 documents indexed, 0 failed, 2 chunks, 2 points"), second
    listed = {c["name"]: c for c in json.loads(outputs["collections --json"])}
    assert said in listed["late"]["store_unreadable"] and listed["late"]["points"] is None
    assert listed["n3"]["store_unreadable"] is None and listed["n3"]["points"] == 2
    assert said in deleted.stderr and (late / "facet_vectors.json").is_file()
