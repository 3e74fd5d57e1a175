"""The QueryEncoder implementations with the real minilm: same vectors as the model, dynamic
batching of concurrent requests, queries before bulk work, errors reach the caller."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from app.encoding import BatchingQueryEncoder, EmbedderCache, InlineQueryEncoder, QueryEncoder
from app.errors import BusyError, InvalidRequestError, UnknownModelError
from embedders.baselines import INSTRUCTION_WEIGHT

TEXTS = ["my card was declined", "how do I top up", "exchange rate is wrong", "I lost my PIN",
         "where is my new card", "cash withdrawal fee", "transfer is pending", "freeze my card"]


LONG = [" ".join(["word"] * 200)] * 32  # keeps the model thread busy for a while


def wait_for(condition, timeout: float = 30.0) -> None:
    """Poll instead of sleeping a fixed time, so a loaded machine does not break the order."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture
def batching(cache):
    encoder = BatchingQueryEncoder(cache, threads=1, max_batch_texts=64)
    yield encoder
    encoder.close()


def test_both_encoders_give_the_models_vectors(cache, batching, minilm) -> None:
    want = minilm.encode(TEXTS, role="query", instruction="Find the intent")
    inline = InlineQueryEncoder(cache)
    for encoder in (inline, batching):
        assert isinstance(encoder, QueryEncoder)
        got = encoder.encode(TEXTS, embedder="minilm", role="query", instruction="Find the intent")
        np.testing.assert_allclose(got, want, atol=1e-5)
        bulk = encoder.encode(TEXTS * 9, embedder="minilm", role="query",
                              instruction="Find the intent", bulk=True)  # split into pieces
        np.testing.assert_allclose(bulk, np.concatenate([want] * 9), atol=1e-5)
        assert encoder.encode([], embedder="minilm").shape == (0, minilm.dim)


def test_concurrent_requests_share_batches(batching, minilm) -> None:
    # Hold the model thread with a long request, then send 16 one-text requests at once:
    # they wait together and are encoded in far fewer batches than requests.
    want = minilm.encode(TEXTS, role="query")
    with ThreadPoolExecutor(17) as pool:
        hold = pool.submit(batching.encode, LONG, embedder="minilm")
        wait_for(lambda: batching.in_flight == len(LONG))
        assert not hold.done()
        before = batching.stats.batches
        futures = [pool.submit(batching.encode, [TEXTS[i % 8]], embedder="minilm", role="query")
                   for i in range(16)]
        results = [f.result() for f in futures]
    for i, vec in enumerate(results):
        np.testing.assert_allclose(vec[0], want[i % 8], atol=1e-5)
    batches = batching.stats.batches - before
    assert batches < 16, f"{batches} batches for 16 requests"
    assert batching.stats.largest_batch >= 2


def test_different_instructions_are_not_mixed(batching, minilm) -> None:
    with ThreadPoolExecutor(4) as pool:
        a = pool.submit(batching.encode, TEXTS[:2], embedder="minilm", instruction="Topic")
        b = pool.submit(batching.encode, TEXTS[:2], embedder="minilm", instruction="Intent")
        np.testing.assert_allclose(a.result(), minilm.encode(TEXTS[:2], instruction="Topic"),
                                   atol=1e-5)
        np.testing.assert_allclose(b.result(), minilm.encode(TEXTS[:2], instruction="Intent"),
                                   atol=1e-5)


def test_queries_go_before_waiting_bulk_work(batching) -> None:
    order: list[str] = []
    lock = threading.Lock()

    def run(label: str, **kwargs) -> None:
        batching.encode(**kwargs)
        with lock:
            order.append(label)

    threads = [threading.Thread(target=run, args=("hold",), kwargs={
        "texts": LONG, "embedder": "minilm"})]
    threads[0].start()
    wait_for(lambda: batching.in_flight == len(LONG))  # the model thread works on "hold"
    # Two bulk pieces queue first, then a query: the query is served before both. (Only "hold"
    # needs to be long; the bulk pieces are short, as they wait in their own queue.)
    threads += [threading.Thread(target=run, args=(f"bulk{i}",), kwargs={
        "texts": TEXTS, "embedder": "minilm", "bulk": True}) for i in range(2)]
    for t in threads[1:]:
        t.start()
    wait_for(lambda: batching.pending_texts == 2 * len(TEXTS))
    threads.append(threading.Thread(target=run, args=("query",), kwargs={
        "texts": ["card declined"], "embedder": "minilm", "role": "query"}))
    threads[-1].start()
    for t in threads:
        t.join()
    assert order.index("query") < order.index("bulk0") and order.index("query") < order.index("bulk1")


def test_a_large_request_goes_in_pieces_that_queries_pass(batching, minilm) -> None:
    """One /v1/embeddings request of 512 long texts held the model thread for 90 s and every
    search waited behind it: a request of more than one forward pass is now bulk work."""
    # Three pieces of 32: the query, sent while the first is encoded, is served before the two
    # queued behind it (six pieces asserted no more than three: the order is decided at the
    # first piece's end; the other three only took ~5 s more).
    big = [f"{i} " + " ".join(["word"] * 150) for i in range(3 * 32)]
    finished: dict[str, float] = {}
    whole = batching.submit(big, embedder="minilm", role="document")
    whole.add_done_callback(lambda _f: finished.setdefault("big", time.monotonic()))
    wait_for(lambda: batching.in_flight > 0)  # its first piece is being encoded
    query = batching.submit(["card declined"], embedder="minilm", role="query")
    query.add_done_callback(lambda _f: finished.setdefault("query", time.monotonic()))
    vectors = whole.result(timeout=300)
    assert finished["query"] < finished["big"]
    np.testing.assert_allclose(vectors[[0, 33, 95]],  # one of each piece
                               minilm.encode([big[0], big[33], big[95]], role="document"),
                               atol=1e-5)
    np.testing.assert_allclose(query.result()[0], minilm.encode(["card declined"], role="query")[0],
                               atol=1e-5)


def test_a_cancelled_request_drops_its_queued_pieces(batching) -> None:
    """A client that gave up on a large request kept the model thread busy with all of it."""
    big = [f"{i} " + " ".join(["word"] * 150) for i in range(6 * 32)]
    whole = batching.submit(big, embedder="minilm", role="document")
    wait_for(lambda: batching.in_flight > 0)  # the first piece is being encoded
    assert whole.cancel()
    wait_for(lambda: batching.pending_texts == 0 and batching.in_flight == 0)
    assert batching.stats.cancelled_texts >= 4 * 32  # at most one more piece was taken
    assert batching.encode(["still works"], embedder="minilm").shape == (1, 384)


def test_errors_reach_the_caller_and_the_thread_survives(batching) -> None:
    with pytest.raises(UnknownModelError, match="unknown embedder 'nope'"):
        batching.encode(["x"], embedder="nope")
    with pytest.raises(InvalidRequestError, match="texts\\[1\\] is int"):
        batching.encode(["x", 1], embedder="minilm")  # type: ignore[list-item]
    with pytest.raises(InvalidRequestError, match="unknown role"):
        batching.encode(["x"], embedder="minilm", role="passage")
    assert batching.encode(["still works"], embedder="minilm").shape == (1, 384)


def test_one_callers_failing_text_fails_only_that_caller(cache, minilm) -> None:
    """Requests merged into one batch all got the error one of them caused (a text the model
    refused made other clients' valid requests fail)."""

    class Picky:  # minilm that refuses one text, as a tokenizer refuses what it cannot read
        def __init__(self) -> None:
            self.dim, self.name = minilm.dim, "picky"

        def encode(self, texts, **kwargs):
            if "poison" in texts:
                raise ValueError("cannot read 'poison'")
            return minilm.encode(texts, **kwargs)

        def __getattr__(self, name):
            return getattr(minilm, name)

    cache.put("picky", Picky())  # type: ignore[arg-type]
    encoder = BatchingQueryEncoder(cache, threads=1, max_batch_texts=64)
    try:
        with ThreadPoolExecutor(4) as pool:
            hold = pool.submit(encoder.encode, LONG, embedder="picky")
            wait_for(lambda: encoder.in_flight == len(LONG))
            futures = {text: pool.submit(encoder.encode, [text], embedder="picky", role="query")
                       for text in ("my card was declined", "poison", "exchange rate")}
            wait_for(lambda: encoder.pending_texts == 3)  # they wait together: one batch
            hold.result()
            with pytest.raises(ValueError, match="cannot read 'poison'"):
                futures["poison"].result()
            for text in ("my card was declined", "exchange rate"):
                np.testing.assert_allclose(futures[text].result(),
                                           minilm.encode([text], role="query"), atol=1e-5)
        assert encoder.encode(["still works"], embedder="picky").shape == (1, 384)
    finally:
        encoder.close()


def test_an_unpaired_surrogate_is_refused_before_it_reaches_a_batch(batching) -> None:
    for texts, instruction, where in ((["ok", "a\ud800b"], None, r"texts\[1\]"),
                                      (["ok"], "x\udfff", "the instruction")):
        with pytest.raises(InvalidRequestError, match=f"{where} holds an unpaired surrogate"):
            batching.encode(texts, embedder="minilm", instruction=instruction)


def test_a_full_queue_refuses_with_busy(cache) -> None:
    encoder = BatchingQueryEncoder(cache, max_pending_texts=3)
    try:
        with ThreadPoolExecutor(2) as pool:
            hold = pool.submit(encoder.encode, LONG, embedder="minilm")
            wait_for(lambda: encoder.in_flight == len(LONG))
            assert not hold.done()
            waiting = encoder.submit(["a", "b"], embedder="minilm")
            with pytest.raises(BusyError, match="already waiting"):
                encoder.submit(["c", "d"], embedder="minilm")
            assert waiting.result().shape == (2, 384)
        assert encoder.stats.busy_refusals == 1
    finally:
        encoder.close()


def test_inline_encoder_sets_query_threads_for_the_call_only(cache, minilm) -> None:
    import torch

    original = torch.get_num_threads()
    torch.set_num_threads(2)  # whatever the suite runs with, the call must use 1 and restore 2
    before = torch.get_num_threads()
    seen: list[int] = []

    class Spy:
        """Records the torch thread count the model runs with (wraps the real minilm)."""

        name, dim, identity = minilm.name, minilm.dim, minilm.identity

        def encode(self, texts, **kwargs):
            seen.append(torch.get_num_threads())
            return minilm.encode(texts, **kwargs)

    spy_cache = EmbedderCache("cpu")
    spy_cache.put("spy", Spy())  # type: ignore[arg-type]
    encoder = InlineQueryEncoder(spy_cache, query_threads=1)
    try:
        encoder.encode(["q"], embedder="spy")
        encoder.encode(["d"] * 3, embedder="spy", bulk=True)
        assert seen == [1, 2] and torch.get_num_threads() == before == 2
    finally:
        torch.set_num_threads(original)


def test_a_spec_with_options_never_answers_for_the_plain_name() -> None:
    """``minilm[instruction_weight=1]`` is another configuration of minilm: loaded first, it must
    not become what a later plain ``minilm`` gets (it did: the cache filed every model under its
    canonical name too, so a long-running server served the first request's options to all)."""
    cache = EmbedderCache("cpu")
    spec = cache.get("minilm[instruction_weight=1]")
    plain = cache.get("minilm")
    assert spec is not plain and spec.name == plain.name == "minilm"
    assert (spec.config.instruction_weight, plain.config.instruction_weight) == (1.0, INSTRUCTION_WEIGHT)
    assert cache.get("minilm[instruction_weight=1]") is spec  # each spec is still loaded once
    a = plain.encode(["top up failed"], instruction="Find messages about top-ups")
    b = spec.encode(["top up failed"], instruction="Find messages about top-ups")
    assert float(a[0] @ b[0]) < 0.999  # the two really embed differently under an instruction


def test_another_checkpoint_named_like_a_registered_one_never_answers_for_it(minilm_namesake, minilm) -> None:
    """A checkpoint directory carries its method's name ("minilm" here, as a ``facet train`` output
    carries "causal-eos"): loading it must not make the registered name load it in this process
    (it did: a server that had searched a collection indexed from such a directory then served
    that checkpoint to every request naming the registered model)."""
    cache = EmbedderCache("cpu")
    own = cache.get(str(minilm_namesake[0]))
    registered = cache.get("minilm")
    assert own.name == registered.name == "minilm" and own is not registered
    assert own.identity != registered.identity and registered.identity == minilm.identity


def test_a_registered_checkpoint_asked_for_by_name_then_by_path_is_loaded_once(minilm_namesake, minilm) -> None:
    """The path first, then the name, gave one model (``_remember`` files it under both); the
    name first and the path later loaded a second copy, held for a server's or worker's life
    (a collection recorded as ``checkpoints/causal-eos`` searched beside requests for
    ``causal-eos``). A name in another case is the same model; a namesake directory is not."""
    from embedders.registry import checkpoint_dir

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    by_name = cache.get("causal-eos")
    assert cache.get(str(checkpoint_dir() / "causal-eos")) is by_name
    assert cache.get("Causal-EOS") is by_name and cache.get("MiniLM") is minilm
    assert cache.get(str(minilm_namesake[0])) is not minilm  # another directory named "minilm"
    assert cache.get("causal-eos[max_length=64]") is not by_name  # options: another model


def test_a_word_too_long_to_split_is_unread_and_the_warning_says_so(minilm) -> None:
    """A 500-character word is one unknown token to minilm's WordPiece, as Thai is: the warning
    blamed "a script or symbols it does not read, such as Thai or emoji" for plain ASCII (a
    hash, base64; the CLI exploration of the third session of 2026-12-07)."""
    from app.encoding import unread_message, unread_rows

    assert unread_rows(minilm, ["a" * 500, "a plain sentence about cards"]) == [0]
    said = unread_message("minilm", 1, 2, "chunks written")
    assert "such as Thai or emoji, or unbroken strings too long for it to split, such as hashes " \
           "or base64)" in said, said
