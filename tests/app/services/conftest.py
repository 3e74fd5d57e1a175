"""Fixtures for the app services: a ServiceContext on a temp data dir sharing the session minilm,
and one holding a small indexed collection of support messages."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexService
from app.settings import FacetSettings


@pytest.fixture
def make_ctx(minilm, tmp_path: Path) -> Iterator[Callable[..., ServiceContext]]:
    """Build contexts (closed at teardown); keyword arguments are FacetSettings fields."""
    opened: list[ServiceContext] = []
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)

    def make(**fields: Any) -> ServiceContext:
        fields.setdefault("data_dir", tmp_path / "data")
        fields.setdefault("chunk_tokens", 64)
        fields.setdefault("chunk_overlap", 8)
        ctx = ServiceContext(FacetSettings(**fields), embedders=cache)
        opened.append(ctx)
        return ctx

    yield make
    for ctx in opened:
        ctx.close()


# Short customer messages on a few topics (cards, top-ups, transfers, refunds): rerank and
# clustering tests read their stored vectors.
SUPPORT_ROWS = [
    "My card was declined at the supermarket",
    "How do I top up my account with a bank transfer?",
    "The exchange rate you applied was wrong",
    "I lost my card yesterday, please block it",
    "Top up failed twice this morning",
    "Why was I charged a fee for the transfer?",
    "My refund has not arrived yet",
    "Can I change my PIN at an ATM?",
    "What exchange rate do you use for euros?",
    "My top-up is still pending",
]


@pytest.fixture
def notes_embedder(tmp_path, minilm):
    """A second embedder for one collection, with real weights: minilm reading documents through
    another prompt, saved as a checkpoint named 'minilm-notes' (its own named vector)."""
    from embedders.baselines import EncoderMeanEmbedder
    from embedders.contract import PromptConfig

    model = EncoderMeanEmbedder(name="minilm-notes", backbone=minilm.backbone,
                                prompts=PromptConfig(document="note: {instruction}{text}"))
    return str(model.save(tmp_path / "notes"))


@pytest.fixture
def support_ctx(make_ctx, tmp_path: Path) -> ServiceContext:
    """A context whose collection ``support`` holds ``SUPPORT_ROWS`` (one document each, ids
    r0..r9), indexed with minilm."""
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(SUPPORT_ROWS)))
    ctx: ServiceContext = make_ctx()
    IndexService(ctx).index(path, "support")
    return ctx


ROOT = Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def locked_by_another_process(data_dir: Path, collection: str, *, shown_as: str | None = None,
                              opened: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """A real process holding ``collection``'s edge folder lock, as a `facet serve` or another
    process's index job holds it, until the block ends; ``shown_as``: the command line it shows
    (``"facet serve"``: the busy message names what holds the folder); ``opened``: it loads the
    shard too and keeps it open (as a `facet serve` that searched it), not only its lock."""
    argv = f"sys.argv = {shown_as.split()!r}\n" if shown_as else ""
    take = "s.count(name)" if opened else "s._lock(name)"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\n"
            "from indexer.store import open_store\n"
            "data, name = sys.argv[1:3]\n" + argv +
            f"s = open_store('edge', data_dir=Path(data))\n{take}\n"
            "print('locked', flush=True)\ntime.sleep(60)",
            str(data_dir),
            collection,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def running_job(session: Any, coll: Any, *, runner: str = "inline", ttl_s: float = 60,
                **columns: Any) -> int:
    """A job of ``coll`` (a ``md.Collection`` of ``session``) that runs and holds the
    collection's lease, as a job of this process takes it; its id."""
    from app.services import leases
    from indexer import metadata as md

    job = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm", state="running",
                      runner=runner, **columns)
    session.add(job)
    session.commit()
    assert leases.acquire(session, coll.id, job.id, ttl_s=ttl_s) is None
    return int(job.id)


def stall_lease(coll: Any, silent_s: float = 40, expired_s: float = 10) -> None:
    """``coll``'s writer stopped renewing its lease ``silent_s`` ago, the lease expired
    ``expired_s`` ago: on both clocks (its beat on the boot clock left as it is would read as a
    wall clock stepped forward, and a live lease). Its session commits it."""
    import datetime as dt

    from indexer import metadata as md

    coll.heartbeat_at = md.utcnow() - dt.timedelta(seconds=silent_s)
    coll.lease_expires_at = md.utcnow() - dt.timedelta(seconds=expired_s)
    identity, _, beat = (coll.writer_process or "").rpartition("/")
    coll.writer_process = (f"{identity}/{int(beat) - int(silent_s * 1000)}" if beat.isdigit()
                           else None)


def write_corpus(root: Path, n: int, words: int = 40) -> dict[str, str]:
    """``n`` small distinct text files; returns {path: text}."""
    root.mkdir(parents=True, exist_ok=True)
    topics = ["bank card", "mortgage rate", "weather forecast", "football match", "python code",
              "cooking pasta", "train delay", "hotel booking"]
    out = {}
    for i in range(n):
        topic = topics[i % len(topics)]
        text = " ".join(f"{topic} note {i} sentence {j}." for j in range(words // 5))
        path = root / f"doc{i:03d}.txt"
        path.write_text(text)
        out[str(path)] = text
    return out


def counting(ctx: ServiceContext, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The document texts ``ctx``'s encoder is asked to encode from now on."""
    encoded: list[str] = []
    encode = ctx.encoder.encode

    def spy(texts, **kwargs):
        if str(kwargs.get("role", "")).lower().endswith("document"):
            encoded.extend(texts)
        return encode(texts, **kwargs)

    monkeypatch.setattr(ctx.encoder, "encode", spy)
    return encoded


def first_search_timings(data_dir: Path, request: str) -> dict[str, float]:
    """The ``timings_ms`` of one search (``request``: a ``SearchRequest(...)`` expression) in a
    new process, where torch is not imported yet: what a one-off `facet search` times."""
    code = ("import json; from app.services.context import ServiceContext; "
            "from app.services.search import SearchRequest, SearchService; "
            "from app.settings import FacetSettings; "
            f"ctx = ServiceContext(FacetSettings(data_dir={str(data_dir)!r})); "
            f"t = SearchService(ctx).search({request}).timings_ms; print(json.dumps(t))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))
