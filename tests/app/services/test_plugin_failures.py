"""A plugin embedder's failures, told apart from the caller's (docs/plugins.md):

* an ``InvalidInputError`` (a text it refuses) stays the request's fault (400, exit 2), and an
  index job records each refused document as a failed document, indexing the rest (one
  refused document failed the whole job, "seen 0, failed 0", so ``--allow-failures`` could not
  help), inline, streamed and in a worker's chunk;
* any other ``EmbedderError`` (its backend crashed) or a ``PluginError`` (a plugin breaking the
  contract) is the server's: ``ModelError``, HTTP 500 ``model_error`` with its message, CLI
  exit 1 (it was a 400 ``invalid_request_error`` blaming the client);
* ``Facet.embed`` / ``facet embed`` with an embedder registered as reading no instruction say
  it was not read, as a search does (``instruction_read``);
* a worker that lacks the plugin says so when it fails the job.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.errors import InvalidRequestError, UnknownModelError, as_domain_error
from app.services.collections import CollectionService
from app.services.distributed import ChunkedIndexService
from app.services.indexing import IndexOptions, IndexService
from embedders.errors import EmbedderError, InvalidInputError
from embedders.registry import PluginError, register_embedder, unregister_embedder
from indexer import metadata as md


class Picky:
    """Hashed words; refuses a text holding "forbidden", crashes on one holding "crash"."""

    dim = 32

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def identity(self) -> str:
        return json.dumps({"method": "picky", "name": self.name})

    def encode(self, texts, *, role="document", instruction=None, batch_size=32):
        for text in texts:
            if "forbidden" in text:
                raise InvalidInputError(f"picky cannot take {text[:20]!r}")
            if "crash" in text:
                raise EmbedderError("picky backend crashed")
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
            if "overflow" in text:  # (a model whose activations overflow on some text)
                out[i, 0] = np.nan
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture
def picky() -> Iterator[str]:
    register_embedder("picky-t", lambda device=None, **kw: Picky("picky-t"), "picky test plugin")
    register_embedder("picky-deaf", lambda device=None, **kw: Picky("picky-deaf"), "reads none",
                      reads_instructions=False)
    register_embedder("picky-misnamed", lambda device=None, **kw: Picky("other"), "breaks contract")
    yield "picky-t"
    for name in ("picky-t", "picky-deaf", "picky-misnamed"):
        unregister_embedder(name)


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("a normal text about cats")
    (root / "b.txt").write_text("a forbidden text")
    (root / "c.txt").write_text("another one about dogs")
    return root


# ---------------------------------------------------------------- finding 1: the mapping


def test_an_embedders_own_failure_is_a_server_error_not_the_requests() -> None:
    from app.api.errors import domain_status
    from app.commands.common import exit_code
    from app.errors import ModelError

    refused = as_domain_error(InvalidInputError("cannot take it"))
    assert type(refused) is InvalidRequestError
    assert domain_status(refused) == (400, "invalid_request_error", None)
    for own in (EmbedderError("picky backend crashed"), PluginError("built a model named 'x'")):
        domain = as_domain_error(own)
        assert isinstance(domain, ModelError) and not isinstance(domain, InvalidRequestError)
        assert str(domain) == str(own)
        assert domain_status(domain) == (500, "server_error", "model_error")
        assert exit_code(domain) == 1


def test_the_api_answers_a_plugin_crash_500_model_error_and_a_refusal_400(
        picky, minilm, tmp_path) -> None:
    from fastapi.testclient import TestClient

    from app.api import create_app
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.errors import ModelError
    from app.integrations.langchain import _http_error
    from app.settings import FacetSettings

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    try:
        with TestClient(create_app(facet)) as client:
            crash = client.post("/v1/embeddings", json={"model": picky, "input": ["crash now"]})
            refused = client.post("/v1/embeddings", json={"model": picky, "input": ["forbidden"]})
            misnamed = client.post("/v1/embeddings", json={"model": "picky-misnamed",
                                                           "input": ["fine"]})
    finally:
        facet.close()
    assert crash.status_code == 500, crash.text
    assert crash.json()["error"] | {"param": None} == {
        "message": "picky backend crashed", "type": "server_error", "param": None,
        "code": "model_error"}
    assert refused.status_code == 400 and refused.json()["error"]["type"] == "invalid_request_error"
    assert misnamed.status_code == 500 and misnamed.json()["error"]["code"] == "model_error"
    assert "must carry the name" in misnamed.json()["error"]["message"]
    # The LangChain adapter's status map reads it back as the same class.
    assert isinstance(_http_error(crash, "http://x"), ModelError)


def test_the_cli_exits_1_for_a_plugin_crash_and_2_for_a_refusal(picky, tmp_path) -> None:
    from tests.app.cli_runner import invoke_cli

    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    crash = invoke_cli("embed", "-e", picky, "crash now", env=env)
    assert (crash.returncode, crash.stderr.strip()) == (1, "error: picky backend crashed")
    refused = invoke_cli("embed", "-e", picky, "forbidden", env=env)
    assert refused.returncode == 2 and "picky cannot take" in refused.stderr


# ------------------------------------------------- finding 2: a refused document, not the job


def test_a_document_the_embedder_refuses_fails_alone_and_the_rest_is_indexed(
        make_ctx, tmp_path, picky) -> None:
    ctx = make_ctx()
    src = _corpus(tmp_path / "src")
    report = IndexService(ctx).index(src, "c", IndexOptions(embedder=picky))
    assert (report.docs_seen, report.docs_indexed, report.docs_failed) == (3, 2, 1)
    key = str(src / "b.txt")
    assert report.errors == [(key, f"{key}: picky cannot take 'a forbidden text'")]
    job = CollectionService(ctx).job(report.job_id)
    assert job.state == "completed" and job.docs_failed == 1
    assert [(e["document"], e["kind"]) for e in job.errors] == [(key, "error")]
    with ctx.sessions() as s:
        coll = md.get_collection(s, "c")
        rows = md.documents_by_key(s, coll.id, [str(src / n) for n in ("a.txt", "b.txt", "c.txt")])
        assert {Path(k).name: r.status for k, r in rows.items()} == {
            "a.txt": "indexed", "b.txt": "error", "c.txt": "indexed"}

    # Indexed before, refused now: the old version stays indexed, the error noted beside it.
    (src / "a.txt").write_text("cats, now forbidden")
    again = IndexService(ctx).index(src, "c", IndexOptions(embedder=picky))
    assert again.docs_failed == 2 and again.docs_indexed == 0
    with ctx.sessions() as s:
        row = md.documents_by_key(s, md.get_collection(s, "c").id, [str(src / "a.txt")])
        assert row[str(src / "a.txt")].status == "indexed"


def test_a_crash_still_fails_the_job(make_ctx, tmp_path, picky) -> None:
    ctx = make_ctx()
    src = _corpus(tmp_path / "src")
    (src / "b.txt").write_text("crash here")
    from app.errors import ModelError

    with pytest.raises(ModelError, match="picky backend crashed"):
        IndexService(ctx).index(src, "c", IndexOptions(embedder=picky))


def test_a_document_the_model_gives_nan_for_fails_alone_named(make_ctx, tmp_path, picky) -> None:
    """A NaN vector for one text failed the whole job, nothing written, its message naming the
    text's place in the batch ("the first: text 3"), not the document: the documents are
    encoded apart, that one recorded as failed under its name, the rest indexed."""
    ctx = make_ctx()
    src = _corpus(tmp_path / "src")
    (src / "b.txt").write_text("a text on which the model's activations overflow")
    report = IndexService(ctx).index(src, "c", IndexOptions(embedder=picky))
    assert (report.docs_seen, report.docs_indexed, report.docs_failed) == (3, 2, 1)
    key = str(src / "b.txt")
    assert [k for k, _ in report.errors] == [key]
    assert report.errors[0][1] == (f"{key}: embedder 'picky-t' (registered by {__name__}) returned non-finite "
                                   "values (NaN or infinity, or past float32's range) from encode for 1 of 1 text")
    assert CollectionService(ctx).job(report.job_id).state == "completed"
    # Streamed, the same.
    ctx2 = make_ctx(stream_document_mb=0.0001)
    (src / "b.txt").write_text("plain words here " * 20 + "and then an overflow")
    streamed = IndexService(ctx2).index(src, "c2", IndexOptions(embedder=picky))
    assert (streamed.docs_indexed, streamed.docs_failed) == (2, 1)
    assert streamed.errors[0][0] == key and "non-finite values" in streamed.errors[0][1]


class Spilling(Picky):
    """Picky's hashed words, and a NaN for a text holding "spill"."""

    def encode(self, texts, *, role="document", instruction=None, batch_size=32):
        out = super().encode([t.replace("spill", "") for t in texts], role=role)
        out[[i for i, t in enumerate(texts) if "spill" in t], 0] = np.nan
        return out


@pytest.mark.parametrize("streamed", [False, True])
def test_a_second_embedders_nan_leaves_out_only_its_vectors_of_that_document(
        make_ctx, tmp_path, picky, streamed) -> None:
    """In a collection two embedders wrote, a document written anew gets the other one's
    vectors too (``_companion_vectors``). A NaN from that other embedder for one document failed
    the whole job ("seen 0"), nothing written: the document is indexed with the running
    embedder's vectors, the other's left out of its points with a warning naming it, and its
    vector hash under the other cleared (so `facet index --embedder` with it tries again); the
    rest of the batch keeps both. Streamed in batches, each of which it fails, it is said once,
    and another document lacking that embedder's vectors is still counted at the end."""
    from app.services.search import SearchRequest, SearchService

    register_embedder("spilling", lambda device=None, **kw: Spilling("spilling"), "NaN on spill")
    try:
        ctx = make_ctx(**({"stream_document_mb": 0.0001} if streamed else {}))
        src = _corpus(tmp_path / "src")
        (src / "b.txt").unlink()
        IndexService(ctx).index(src, "c", IndexOptions(embedder=picky))
        IndexService(ctx).index(src, "c", IndexOptions(embedder="spilling"))
        with ctx.sessions() as s:  # (c.txt: as after a 'spilling' job stopped part-way)
            coll = md.get_collection(s, "c")
            c_row = md.documents_by_key(s, coll.id, [str(src / "c.txt")])[str(src / "c.txt")]
            md.clear_vector_hashes(s, [c_row], "spilling")
            s.commit()
        (src / "b.txt").write_text("the milk spill in the kitchen and more words " * 30)
        (src / "a.txt").write_text("a changed text about cats and birds")
        report = IndexService(ctx).index(src, "c", IndexOptions(embedder=picky, batch_chunks=2))
        key = str(src / "b.txt")
        assert (report.docs_indexed, report.docs_failed) == (2, 0)
        assert [k for k, _ in report.warnings] == [key, "embedder spilling"], report.warnings
        assert report.vectors_left_out == {"spilling": [key]}
        message = report.warnings[0][1]
        of = f"a part of {key} (a file read in parts: each part it failed)" if streamed else key
        assert message.startswith(f"the 'spilling' vectors of {of} are missing: ")
        assert "non-finite values" in message and "--embedder spilling" in message
        assert "still has no vectors for 1 of the 3 documents" in report.warnings[1][1]
        job = CollectionService(ctx).job(report.job_id)
        assert job.state == "completed"
        assert [(e["document"], e["kind"]) for e in job.errors] == [(key, "warning"),
                                                                    ("embedder spilling", "warning")]

        def found(query: str, embedder: str) -> list[str]:
            hits = SearchService(ctx).search(SearchRequest(query, "c", mode="dense",
                                                           embedder=embedder, top_k=10))
            return sorted({Path(h.doc_id).name for h in hits.results})

        assert found("milk kitchen", picky) == ["a.txt", "b.txt", "c.txt"]
        assert found("milk kitchen", "spilling") == ["a.txt", "c.txt"]  # b's are left out
        # (c.txt's points keep their vectors: only its hash was cleared above)
        with ctx.sessions() as s:
            coll = md.get_collection(s, "c")
            rows = md.documents_by_key(s, coll.id, [str(src / n) for n in ("a.txt", "b.txt")])
            hashes = md.vector_hashes(s, [r.id for r in rows.values()], "spilling")
            assert set(hashes) == {rows[str(src / "a.txt")].id}  # b's cleared: tried again
        again = IndexService(ctx).index(src, "c", IndexOptions(embedder="spilling"))
        assert again.docs_failed == 1 and again.errors[0][0] == key
    finally:
        unregister_embedder("spilling")


def test_a_streamed_document_failing_after_a_second_embedders_nan_is_not_said_written(
        make_ctx, tmp_path, picky) -> None:
    """A streamed document whose first batch the other embedder failed (its vectors left out,
    with a warning) and whose later batch the running one refuses is a failed document, not one
    written without the other's vectors: that warning was kept, and it hid the end-of-run count
    of documents lacking them (1 lacking, less 1 left out)."""
    register_embedder("spilling", lambda device=None, **kw: Spilling("spilling"), "NaN on spill")
    try:
        ctx = make_ctx(stream_document_mb=0.0001)
        src = _corpus(tmp_path / "src")
        (src / "b.txt").unlink()
        IndexService(ctx).index(src, "c", IndexOptions(embedder=picky))
        IndexService(ctx).index(src, "c", IndexOptions(embedder="spilling"))
        with ctx.sessions() as s:
            coll = md.get_collection(s, "c")
            c_row = md.documents_by_key(s, coll.id, [str(src / "c.txt")])[str(src / "c.txt")]
            md.clear_vector_hashes(s, [c_row], "spilling")
            s.commit()
        (src / "b.txt").write_text("a milk spill " + "and more plain words " * 40 + "forbidden")
        report = IndexService(ctx).index(src, "c", IndexOptions(embedder=picky, batch_chunks=2))
        key = str(src / "b.txt")
        assert (report.docs_indexed, report.docs_failed) == (0, 1) and report.errors[0][0] == key
        assert report.vectors_left_out == {}
        assert [k for k, _ in report.warnings] == ["embedder spilling"], report.warnings
        assert "still has no vectors for 1 of the 2 documents" in report.warnings[0][1]
        job = CollectionService(ctx).job(report.job_id)
        assert [(e["document"], e["kind"]) for e in job.errors] == [
            (key, "error"), ("embedder spilling", "warning")]
    finally:
        unregister_embedder("spilling")


@pytest.mark.parametrize("failure", ["overflow", "forbidden"])
def test_a_streamed_document_failing_part_way_leaves_no_points_behind(
        make_ctx, tmp_path, picky, failure) -> None:
    """A streamed document is written batch by batch; one the model fails in a later batch
    (a NaN, a refusal) left its earlier batches' points in the store, found by searches, while
    the job said it failed (and each re-run wrote them again). They are deleted with its
    failure; an earlier indexed version, written over by those batches, is said to be gone."""
    from app.services.search import SearchRequest, SearchService

    ctx = make_ctx(stream_document_mb=0.0001)
    src = _corpus(tmp_path / "src")
    (src / "b.txt").write_text("zebra stripes on the savanna " * 60)
    first = IndexService(ctx).index(src, "c", IndexOptions(embedder=picky, batch_chunks=2))
    assert first.docs_failed == 0

    def found(query: str, mode: str) -> set[str]:
        hits = SearchService(ctx).search(SearchRequest(query, "c", mode=mode, top_k=50))
        return {Path(h.doc_id).name for h in hits.results}

    assert "b.txt" in found("zebra savanna", "lexical")
    (src / "b.txt").write_text("giraffe necks in the savanna " * 60 + f"and then an {failure}")
    report = IndexService(ctx).index(src, "c", IndexOptions(embedder=picky, batch_chunks=2))
    key = str(src / "b.txt")
    assert (report.docs_indexed, report.docs_failed) == (0, 1) and report.errors[0][0] == key
    assert report.errors[0][1].endswith("its earlier indexed version is gone from searches "
                                        "(written over part-way)")
    for mode in ("lexical", "dense"):
        assert "b.txt" not in found("giraffe necks savanna zebra stripes", mode), mode
    with ctx.sessions() as s:
        row = md.documents_by_key(s, md.get_collection(s, "c").id, [key])[key]
        assert (row.status, row.n_chunks) == ("error", 0)
    # Its first run fails it the same way: nothing of it is left either.
    fresh = IndexService(ctx).index(src, "c2", IndexOptions(embedder=picky, batch_chunks=2))
    assert fresh.docs_failed == 1 and not fresh.errors[0][1].endswith("(written over part-way)")
    assert SearchService(ctx).search(SearchRequest("giraffe", "c2", mode="lexical")).results == []


def test_a_streamed_document_the_embedder_refuses_fails_alone(make_ctx, tmp_path, picky) -> None:
    ctx = make_ctx(stream_document_mb=0.0001)  # ~100 bytes: b.txt is streamed
    src = _corpus(tmp_path / "src")
    (src / "b.txt").write_text("plain words here " * 20 + "and one forbidden word")
    report = IndexService(ctx).index(src, "c", IndexOptions(embedder=picky))
    assert (report.docs_indexed, report.docs_failed) == (2, 1)
    assert report.errors[0][0] == str(src / "b.txt") and "picky cannot take" in report.errors[0][1]


def test_a_workers_chunk_records_the_refused_document_and_indexes_the_rest(
        make_ctx, tmp_path, picky) -> None:
    ctx = make_ctx()
    src = _corpus(tmp_path / "src")
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(src, "c", IndexOptions(embedder=picky), runner="celery")
    numbers = service.plan(prepared, 3)
    outcomes = [service.run_chunk(prepared.job_id, n) for n in numbers]
    assert [o.outcome for o in outcomes] == ["done"] * len(numbers)
    job = CollectionService(ctx).job(prepared.job_id)
    assert (job.state, job.docs_indexed, job.docs_failed) == ("completed", 2, 1)
    assert [e["kind"] for e in job.errors] == ["error"]
    assert "picky cannot take" in job.errors[0]["message"]


# ------------------------------------------- finding 3: an instruction the embedder does not read


def test_embed_says_an_instruction_its_embedder_reads_none_of_was_not_read(
        make_ctx, tmp_path, picky) -> None:
    from app.core import Facet
    from app.settings import FacetSettings
    from tests.app.cli_runner import invoke_cli

    with Facet.open(FacetSettings(data_dir=tmp_path / "data")) as facet:
        deaf = facet.embed(["find pets"], embedder="picky-deaf", role="query",
                           instruction="find pets")
        heard = facet.embed(["find pets"], embedder=picky, role="query", instruction="find pets")
        none = facet.embed(["find pets"], embedder="picky-deaf", role="query")
    assert deaf.instruction_read is False
    assert deaf.note == ("the instruction was not read: picky-deaf reads no instruction (its "
                         "vectors are the same under any)")
    assert (heard.instruction_read, heard.note) == (True, None)
    assert (none.instruction_read, none.note) == (None, None)
    done = invoke_cli("embed", "-e", "picky-deaf", "-i", "find pets", "--role", "query", "x",
                      env={"FACET_DATA_DIR": str(tmp_path / "data")})
    out = json.loads(done.stdout)
    assert out["instruction_read"] is False and "picky-deaf reads no instruction" in out["note"]


# ------------------------------------------------ finding 4: a worker without the plugin


def test_a_worker_without_the_plugin_says_so(make_ctx, tmp_path, picky) -> None:
    ctx = make_ctx()
    src = _corpus(tmp_path / "src")
    (src / "b.txt").write_text("fine now")
    prepared = IndexService(ctx).prepare(src, "c", IndexOptions(embedder=picky), runner="celery")
    from app.encoding import EmbedderCache
    from app.services.context import ServiceContext

    unregister_embedder(picky)  # this worker has no such plugin
    worker = ServiceContext(ctx.settings, embedders=EmbedderCache("cpu"))
    try:
        with pytest.raises(UnknownModelError, match="FACET_PLUGINS"):
            ChunkedIndexService(worker).plan(prepared, 3)
    finally:
        worker.close()
        register_embedder(picky, lambda device=None, **kw: Picky(picky), "picky test plugin")
    job = CollectionService(ctx).job(prepared.job_id)
    assert job.state == "failed"
    assert "unknown embedder 'picky-t'" in (job.message or "") and "on worker" in (job.message or "")
