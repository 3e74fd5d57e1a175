"""A collection whose segment files were cut short (a copy or restore that ran out of room: a
vectors' chunk file or a payload page truncated to 0 bytes) is a damaged collection
(``StoreDamagedError``, naming it and the way back), as a garbled edge_config.json already was.
The engine's words for these ("vector 0 is not readable from ...", "Gridstore IO error: elements
range 0..366 is out of bounds, file contains 0 elements") fell through to the plain StoreError,
"edge shard ...: searching it failed", which the CLI said as a bad request (exit 2) and the
listing and `facet index` never noticed. Real edge store in a temp folder, files really
truncated; then the same through the real CLI with minilm."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.errors import StoreDamagedError, StoreError
from indexer.store import EdgeStore, PointRecord
from tests.app.cli_runner import invoke_cli

HINT = "from a backup, or delete the collection (facet delete c -y: its folder goes with it)"


def _stored(root: Path) -> Path:
    """A closed edge store under ``root`` whose collection ``c`` holds 3 points with payloads;
    its one segment's folder."""
    store = EdgeStore(root)
    try:
        store.ensure_collection("c", {"v": 4})
        store.upsert("c", [PointRecord(id=f"00000000-0000-0000-0000-00000000000{i}",
                                       vectors={"v": [1.0, float(i), 0.5, 0.25]},
                                       payload={"text": f"text number {i}" * 20, "doc_id": f"d{i}"})
                           for i in range(3)])
    finally:
        store.close()
    [segment] = (root / "c" / "segments").iterdir()
    return segment


def _cut(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 0, path
    with open(path, "r+b") as f:
        f.truncate(0)


def test_a_truncated_vectors_chunk_file_is_a_damaged_collection(tmp_path: Path) -> None:
    segment = _stored(tmp_path / "edge")
    _cut(segment / "vector_storage-v" / "vectors" / "chunk_0.mmap")
    store = EdgeStore(tmp_path / "edge")
    try:
        assert store.count("c") == 3  # (a count reads no vector: it opens fine)
        with pytest.raises(StoreDamagedError) as damaged:
            store.search("c", "v", [1.0, 0.0, 0.5, 0.25], limit=2)
        said = str(damaged.value)
        assert said.startswith(f"collection 'c': the vector store's files cannot be read: "
                               f"{segment / 'vector_storage-v' / 'vectors'} is damaged ("), said
        assert "is not readable from" in said and "searching it failed" in said, said
        assert HINT in said, said
        assert damaged.value.collection == "c"
    finally:
        store.close()


def test_a_truncated_payload_page_is_a_damaged_collection(tmp_path: Path) -> None:
    segment = _stored(tmp_path / "edge")
    _cut(segment / "payload_storage" / "page_0.dat")
    store = EdgeStore(tmp_path / "edge")
    try:
        with pytest.raises(StoreDamagedError) as damaged:
            store.search("c", "v", [1.0, 0.0, 0.5, 0.25], limit=2)  # with payloads
        said = str(damaged.value)
        assert said.startswith(f"collection 'c': the vector store's files cannot be read: "
                               f"{tmp_path / 'edge' / 'c'} is damaged ("), said
        assert "Gridstore IO error: elements range" in said and "is out of bounds" in said, said
        assert HINT in said, said
    finally:
        store.close()


def test_a_bad_request_to_a_sound_collection_is_not_called_damage(tmp_path: Path) -> None:
    """The signs are the engine's words for unreadable files, not for a request it refuses."""
    _stored(tmp_path / "edge")
    store = EdgeStore(tmp_path / "edge")
    try:
        with pytest.raises(StoreError) as refused:
            store.search("c", "v", [1.0, 0.0, 0.5], limit=2)  # 3 numbers for a 4-d vector
        assert not isinstance(refused.value, StoreDamagedError), refused.value
        assert len(store.search("c", "v", [1.0, 0.0, 0.5, 0.25], limit=2)) == 2
    finally:
        store.close()


@pytest.mark.parametrize("part", ["vector_storage-minilm/vectors/chunk_0.mmap",
                                  "payload_storage/page_0.dat"])
def test_facet_search_on_a_truncated_segment_file_is_a_data_error(tmp_path: Path, part: str) -> None:
    """`facet search` exit 2 ("edge shard ...: searching it failed"): now exit 4, the damaged
    collection's message and its way back, as for a garbled edge_config.json."""
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    src = tmp_path / "src"
    src.mkdir()
    for i, text in enumerate(["my card is lost", "a refund please", "the rate is wrong"]):
        (src / f"d{i}.txt").write_text(text)
    assert invoke_cli("index", str(src), "-c", "big", "--embedder", "minilm", env=env).returncode == 0
    [segment] = (tmp_path / "data" / "qdrant-edge" / "big" / "segments").iterdir()
    _cut(segment / part)
    done = invoke_cli("search", "card", "-c", "big", env=env)
    assert (done.returncode, "Traceback" in done.stderr) == (4, False), done.stderr
    assert done.stderr.startswith("error: collection 'big': the vector store's files cannot be "
                                  "read: "), done.stderr
    assert "is damaged (" in done.stderr and "edge shard" not in done.stderr, done.stderr
    assert (f"Restore the folder {tmp_path / 'data' / 'qdrant-edge' / 'big'} from a backup, or "
            "delete the collection (facet delete big -y") in done.stderr, done.stderr
    deleted = invoke_cli("delete", "big", "-y", env=env)  # the way back it names works
    assert deleted.returncode == 0, deleted.stderr
    assert invoke_cli("index", str(src), "-c", "big", env=env).returncode == 0
    assert invoke_cli("search", "card", "-c", "big", env=env).returncode == 0
