"""What the stores say must never hold a secret, nor blame the wrong cause.

A ``FACET_QDRANT_URL`` with credentials (``http://admin:PW@host``, ``?api_key=...``) was printed
whole by `facet collections`, in a 503's body and in the server's ERROR line. An embedded
collection whose ``edge_config.json`` no longer parses was "cannot open edge shard ...; another
process may hold it" (a plain StoreError, which the app answered 400 / exit 2), though no other
process was involved. Real parts: a port nothing listens on, real qdrant-edge shards.
"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from indexer.errors import StoreBusyError, StoreError, StoreUnavailableError
from indexer.store import EdgeStore, PointRecord, QdrantClientStore, point_id

SECRETS = ("PWsecret", "KEYsecret")


def _closed_port() -> int:
    """A port of this machine nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _assert_masked(text: str) -> None:
    assert not any(secret in text for secret in SECRETS), text
    assert "admin:***@127.0.0.1" in text, text
    assert "api_key=***" in text, text


def test_an_unreachable_server_is_said_without_its_password_or_key() -> None:
    url = f"http://admin:PWsecret@127.0.0.1:{_closed_port()}/?api_key=KEYsecret"
    store = QdrantClientStore(url=url)
    try:
        with pytest.raises(StoreUnavailableError, match="cannot reach Qdrant at") as reach:
            store.check_reachable()
        _assert_masked(str(reach.value))
        # A request (the store's own wrapper, ``_translated``) says the same, masked too.
        with pytest.raises(StoreUnavailableError) as listing:
            store.count("c")
        _assert_masked(str(listing.value))
    finally:
        store.close()


def test_a_non_qdrant_answer_is_said_without_the_password() -> None:
    from indexer import store as store_module

    class _Answer:  # what qdrant-client's UnexpectedResponse carries
        status_code = 404
        reason_phrase = "Not Found"

    said = str(store_module._not_qdrant("https://u:PWsecret@h:6333?api_key=KEYsecret", _Answer()))
    assert "PWsecret" not in said and "KEYsecret" not in said, said
    assert "u:***@h:6333?api_key=***" in said, said


def _edge_collection(root: Path) -> None:
    store = EdgeStore(root)
    try:
        store.ensure_collection("c3", {"m": 4})
        vec = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
        store.upsert("c3", [PointRecord(point_id("d", 0), {"m": vec}, {"doc_id": "d", "text": "t"})])
        assert store.count("c3") == 1
    finally:
        store.close()


def test_a_damaged_edge_config_is_a_damaged_store_not_another_process(tmp_path: Path) -> None:
    from indexer.errors import StoreDamagedError

    root = tmp_path / "qdrant-edge"
    _edge_collection(root)
    (root / "c3" / "edge_config.json").write_text("{garbage\n")
    store = EdgeStore(root)
    try:
        with pytest.raises(StoreDamagedError) as damaged:
            store.count("c3")
    finally:
        store.close()
    said = str(damaged.value)
    assert not isinstance(damaged.value, StoreBusyError | StoreUnavailableError)
    assert "another process" not in said, said
    assert f"{root / 'c3' / 'edge_config.json'} is damaged (key must be a string" in said, said
    assert "cannot be read" in said and "from a backup" in said, said
    assert damaged.value.collection == "c3"
    assert damaged.value.path == str(root / "c3" / "edge_config.json")
    # Its folder lock was let go: the next try says the same, not "held by another process".
    again = EdgeStore(root, lock_wait_s=0.1)
    try:
        with pytest.raises(StoreDamagedError):
            again.count("c3")
    finally:
        again.close()


def test_a_damaged_side_file_is_a_damaged_store(tmp_path: Path) -> None:
    """``facet_vectors.json`` cut short was a JSONDecodeError traceback (a 500)."""
    from indexer.errors import StoreDamagedError

    root = tmp_path / "qdrant-edge"
    _edge_collection(root)
    (root / "c3" / "facet_vectors.json").write_text('{"m": ')
    store = EdgeStore(root)
    try:
        with pytest.raises(StoreDamagedError, match=r"facet_vectors\.json is damaged \(JSONDecodeError"):
            store.vector_sizes("c3")
        with pytest.raises(StoreError, match="cannot be read") as opening:
            store.count("c3")
        assert "another process" not in str(opening.value)
    finally:
        store.close()


def test_the_app_masks_with_the_same_rule(tmp_path: Path) -> None:
    """`facet serve`'s start line ("store Qdrant at ...") and the app's messages masked a URL's
    password but printed a `?api_key=` in it: one rule now, the indexer's."""
    from app.settings import FacetSettings, mask_passwords

    settings = FacetSettings(data_dir=tmp_path, qdrant_url="http://admin:PWsecret@q:6333/?api_key=KEYsecret")
    said = settings.store_description() + " " + mask_passwords(f"failed: {settings.qdrant_url}: refused")
    assert "PWsecret" not in said and "KEYsecret" not in said, said
    assert "Qdrant at http://admin:***@q:6333/?api_key=***" in said, said


def test_masking_reads_a_long_word_once_and_masks_as_before() -> None:
    """The URL-password pattern began at the scheme and was tried from every letter of a long
    word, reading to its end each time: masking a 16,000-letter name took 0.9 s, 300,000 letters
    minutes, and the API masks every error answer in its event loop (a long model name in an
    unauthenticated request held /health and SIGTERM; the API exploration). Found from its "://"
    now: each character is read a bounded number of times. (A bound of seconds where the old
    pattern takes about 45 s for 200,000 letters and this one milliseconds: it tells the growth
    apart, not this machine's speed.)"""
    import time

    from indexer.errors import mask_secrets

    for word in ("m" * 200_000, "a1" * 100_000, "http://a:b@ " * 20_000,
                 "http://a:" + "b" * 200_000, "http://a:b@" * 20_000):
        t0 = time.perf_counter()
        mask_secrets(word)
        assert time.perf_counter() - t0 < 3.0, word[:12]
    for text, masked in [
        ("see http://admin:secret@host/x", "see http://admin:***@host/x"),
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("postgresql+psycopg://u:p@h/db", "postgresql+psycopg://u:***@h/db"),
        ("x http://a:b@c and https://d:e@f", "x http://a:***@c and https://d:***@f"),
        ("1abc://u:p@h", "1abc://u:***@h"),  # (the scheme from its first letter)
        ("123://u:p@h", "123://u:p@h"), ("://u:p@h", "://u:p@h"),  # no scheme: not a URL
        ("qdrant://k@h?api_key=zz&x=1", "qdrant://k@h?api_key=***&x=1"),
        # A password holding "@" runs to the authority's last one, as httpx and urllib read it
        # (it was shown "u:***@ss@h"); an "@" in the path or query is no password's.
        ("http://u:p@ss@h:8000/x", "http://u:***@h:8000/x"),
        ("postgresql://u:p@ss@db/x?a=b@c", "postgresql://u:***@db/x?a=b@c"),
        ("http://h:80/a@b", "http://h:80/a@b"),
        # ... and whatever else it holds: "#" and "?" were masked before the "@" rule stopped
        # at them.
        ("redis://:s3cr#etpw@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0"),
        ("http://k:s3?t@h:1", "http://k:***@h:1"),
        # A user name holding "@" (an e-mail address): its password was shown in clear.
        ("postgresql://user@corp.com:pw@db.example/x", "postgresql://user@corp.com:***@db.example/x"),
        ("redis://user@host:6379/0", "redis://user@host:6379/0"),  # a port, no password
    ]:
        assert mask_secrets(text) == masked, text


def test_a_bearer_token_quoted_in_a_message_is_masked() -> None:
    """httpx quotes a header it refuses ("Illegal header value b'Bearer KEY\\n'"), and that text
    became the retriever's error, the key in clear."""
    from indexer.errors import mask_secrets

    said = "LocalProtocolError: Illegal header value b'Bearer sk-live-0123456789abcdef\\n'"
    assert mask_secrets(said) == "LocalProtocolError: Illegal header value b'Bearer ***'"
    assert mask_secrets("Authorization: bearer abc.def-ghi") == "Authorization: bearer ***"
