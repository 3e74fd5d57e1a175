"""More keys than one removal takes (``MAX_REMOVED_KEYS``): the refusal said "remove them in
parts" without saying how; ``removal_parts`` checks every key at once (each unknown one named,
nothing removed) and splits them. Real minilm, real SQLite, Qdrant edge."""

from __future__ import annotations

from pathlib import Path

import pytest

import app.services.indexing as indexing
from app.errors import NotFoundError, TooLargeError
from app.services.indexing import MAX_REMOVED_KEYS, IndexService


def _collection(make_ctx, tmp_path: Path, n: int) -> tuple[IndexService, list[str]]:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(n):
        (src / f"d{i}.txt").write_text(f"note {i} about the weather")
    service = IndexService(make_ctx())
    service.index(src, "c")
    return service, sorted(str(p) for p in src.iterdir())


def test_too_many_keys_say_how_many_parts(make_ctx, tmp_path) -> None:
    service, _ = _collection(make_ctx, tmp_path, 1)
    with pytest.raises(TooLargeError) as refused:
        service.remove_documents("c", [f"k{i}" for i in range(MAX_REMOVED_KEYS * 2 + 1)])
    assert (f"remove them in 3 parts of at most {MAX_REMOVED_KEYS:,} keys each"
            in str(refused.value)), refused.value


def test_removal_parts_checks_every_key_then_splits(make_ctx, tmp_path, monkeypatch) -> None:
    service, keys = _collection(make_ctx, tmp_path, 5)
    monkeypatch.setattr(indexing, "MAX_REMOVED_KEYS", 2)
    with pytest.raises(NotFoundError) as refused:
        service.removal_parts("c", ["nosuch1", *keys, "nosuch2"])
    assert "'nosuch1', 'nosuch2'" in str(refused.value), refused.value
    parts = service.removal_parts("c", keys)
    assert parts == [keys[:2], keys[2:4], keys[4:]]
    for part in parts:
        service.remove_documents("c", part)
    with pytest.raises(NotFoundError):
        service.removal_parts("c", keys[:1])
