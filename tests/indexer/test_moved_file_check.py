"""``make_engine``'s check at each SQLite commit that its file is still the one at its path
(``MetadataFileMovedError``): refused only where a move is seen, never on a new file number
alone (tests/app/services/test_metadata_move.py has the move itself)."""

from __future__ import annotations

import os
import shutil

import pytest

from indexer import metadata as md
from indexer.errors import MetadataFileMovedError


def _write(engine, name: str) -> None:
    with md.Session(engine) as session:
        md.create_collection(session, name, backend="edge", chunk_size=64, chunk_overlap=8,
                             tokenizer="minilm")
        session.commit()


def test_a_new_file_number_without_a_move_is_no_refusal(tmp_path) -> None:
    """Some FUSE mounts number a file afresh: no `facet.db.moved-*` beside it, no refusal."""
    path = tmp_path / "facet.db"
    engine = md.make_engine(f"sqlite:///{path}")
    try:
        _write(engine, "one")
        shutil.copy(path, tmp_path / "copy.db")
        os.replace(tmp_path / "copy.db", path)  # (another inode at the same path)
        _write(engine, "two")
        (tmp_path / "facet.db.moved-20261205T000000Z").write_bytes(b"")
        with pytest.raises(MetadataFileMovedError) as e:
            _write(engine, "three")
        assert str(e.value) == (f"the metadata database {path} was moved or replaced after this "
                                "process opened it")
    finally:
        engine.dispose()
