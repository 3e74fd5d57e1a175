"""Where the application's texts are turned into vectors: the ``QueryEncoder`` seam.

Every service encodes through a ``QueryEncoder`` instead of calling a model itself, so where
the model runs is a deployment choice:

* ``InlineQueryEncoder``: in the calling thread (the CLI, tests, a worker process).
* ``BatchingQueryEncoder``: one model thread per process (``facet serve``). Concurrent
  requests that share (embedder, role, instruction) are encoded as one batch (dynamic
  batching), search queries go before bulk work (an index job's chunks), and the model is
  never used from two threads at once (Hugging Face tokenizers are not safe for that).
* a Celery encoder (the worker issue) sends the same calls to the ``query`` queue, and bulk
  calls to the ``index`` queue, of GPU workers.

Models are loaded once per process by ``EmbedderCache``.
"""

from __future__ import annotations

import logging
import threading
import time
import unicodedata
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from app.errors import BusyError, FacetError, InvalidRequestError, domain_errors
from embedders.contract import Embedder, Role, validate_instruction, validate_texts
from embedders.explain import AnswerGenerator

logger = logging.getLogger(__name__)


class EmbedderCache:
    """Loads each embedder once per process (models are large; every service shares them).

    Args:
        device: ``cpu``, ``cuda``... or None for automatic.
    """

    def __init__(self, device: str | None = None) -> None:
        self.device = device
        self._models: dict[str, Embedder] = {}
        self._identities: dict[int, tuple[weakref.ref[Any], str]] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Embedder:
        """The embedder called ``name`` (a registered name or a checkpoint path), loaded on first use.

        Raises:
            UnknownModelError: neither a registered name nor a checkpoint directory.
            DataError: a checkpoint that cannot be read.
        """
        from embedders import load_embedder

        with self._lock:
            model = self._models.get(name)
            if model is None:
                with domain_errors():
                    model = load_embedder(name, device=self.device)
                self._remember(name, model)
            return model

    def name_of(self, name: str) -> str:
        """The canonical name of the embedder ``name`` loads, without loading it where its name can
        be read (a registered baseline, a checkpoint's config): a process whose queries are encoded
        by workers need not hold a model just to name it.

        Raises:
            UnknownModelError, DataError: as ``get``.
        """
        from embedders.registry import saved_name

        model = self._models.get(name)
        if model is not None:
            return model.name
        with domain_errors():
            saved = saved_name(name)
        return saved if saved is not None else self.get(name).name

    def peek(self, name: str) -> Embedder | None:
        """The model if it is loaded already, else None; never waits for a load."""
        return self._models.get(name)

    def put(self, name: str, model: Embedder) -> None:
        """Register an already loaded model (tests share their session fixture this way)."""
        with self._lock:
            self._remember(name, model)

    def _remember(self, name: str, model: Embedder) -> None:
        """Keep ``model`` under ``name`` and, where ``name`` loads exactly what the registered
        canonical name loads (``checkpoints/inbedder`` for ``inbedder``), under that name too. A
        spec with options (``minilm[instruction_weight=1]``), or another checkpoint directory that
        carries a registered name (a ``facet train`` output is named after its method), is another
        model: it must never answer for the registered name, which would hand every later request
        for it in this process whatever was loaded first."""
        from embedders.registry import loads_registered

        self._models[name] = model
        if loads_registered(name, model.name):
            self._models.setdefault(model.name, model)

    def identity(self, model: Embedder) -> str:
        """``model.identity``, computed once per model object: a trained checkpoint's digests
        its weights (tens of milliseconds), and every index job, chunk and worker answer asks."""
        with self._lock:
            hit = self._identities.get(id(model))
            if hit is not None and hit[0]() is model:
                return hit[1]
        identity = model.identity
        try:
            ref = weakref.ref(model)
        except TypeError:  # not weak-referenceable: computed each time
            return identity
        with self._lock:
            self._identities[id(model)] = (ref, identity)
        return identity

    def loaded(self) -> list[str]:
        """Canonical names of the models loaded so far."""
        with self._lock:
            return sorted({m.name for m in self._models.values()})


@runtime_checkable
class QueryEncoder(Protocol):
    """Encodes texts with a named embedder on behalf of the services.

    ``bulk=True`` marks throughput work (an index job's chunks): an encoder may run it after
    waiting queries, or on other workers. Results are what ``Embedder.encode`` returns:
    float32 ``(len(texts), dim)``, L2-normalised.
    """

    def encode(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None, bulk: bool = False) -> np.ndarray: ...

    def submit(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None) -> Future[np.ndarray]:
        """Like ``encode`` but returns at once; the future gets the vectors (or the error).

        Async callers await it (``asyncio.wrap_future``) instead of holding a thread.
        """
        ...

    def generate_answers(self, texts: Sequence[str], *, explainer: str, instruction: str | None,
                         max_new_tokens: int | None = None) -> list[str]:
        """Short answers of an InBedder-style model (``explainer``) to ``instruction`` about
        each text (what cluster names are made of).

        Raises:
            InvalidRequestError: ``explainer`` does not generate answers (``not_an_explainer``).
        """
        ...

    def close(self) -> None: ...


# Texts an explainer decodes together. On the 2-core CPU, 48 AG News texts with the shipped
# InBedder (16 answer tokens): batch 1 1.90, 16 2.96, 32 3.26, 48 3.22 texts per CPU second,
# the same answers at every size (README, "What facet cluster costs").
ANSWER_BATCH = 32


def longest_first(texts: Sequence[str], size: int) -> list[list[int]]:
    """The positions of ``texts``, longest first, in pieces of ``size``: the order an embedder's
    ``encode`` and an explainer's ``generate_answers`` batch one call's texts in. Called piece by
    piece (so a progress bar moves between the pieces), with ``size`` a multiple of their batch
    size, they see exactly the batches of one call: the same vectors and answers."""
    lengths = [len(unicodedata.normalize("NFC", t)) for t in texts]  # as `encode` measures
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])
    return [order[i:i + size] for i in range(0, len(order), size)]


def unread_count(model: Embedder, texts: Sequence[str]) -> int:
    """How many of ``texts`` are mostly the unknown token (``[UNK]``) to ``model``'s tokenizer
    (all-MiniLM reads Thai and emoji so): they embed nearly alike and rank arbitrarily. The
    embedder logs it; this is for the edges to tell the person who indexed or searched. 0 for
    a model whose tokenizer has no unknown token."""
    if not texts:  # (before the tokenizer: a model not loaded yet is not loaded for nothing)
        return 0
    tokenizer = getattr(model, "tokenizer", None)
    unk = getattr(tokenizer, "unk_token_id", None)
    if tokenizer is None or unk is None:
        return 0
    from embedders.base import mostly_unknown

    special = set(tokenizer.all_special_ids)
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return sum(1 for row in ids if mostly_unknown(row, unk, special))


# What ``unread_message`` says, for an edge to find the warning among a job's.
UNREAD_MARK = "are mostly unknown tokens to the tokenizer of"


def unread_message(name: str, count: int, total: int, what: str = "texts") -> str:
    """The warning for ``count`` of ``total`` texts that ``name`` reads as mostly unknown tokens
    (the words of the embedder's own log line)."""
    return (f"{count:,} of {total:,} {what} {UNREAD_MARK} {name} "
            "(a script or symbols it does not read, such as Thai or emoji), so they embed nearly "
            "alike and rank arbitrarily; use an embedder whose tokenizer reads them (e.g. "
            "causal2vec)")


def unread_counted(message: str) -> int | None:
    """The count an ``unread_message`` says (None for any other message): the warnings of a
    worker job's chunks are summed into the one an inline job gives."""
    if UNREAD_MARK not in message:
        return None
    count = message.split(" of ", 1)[0].replace(",", "")
    return int(count) if count.isdigit() else None


def not_an_explainer(explainer: str) -> InvalidRequestError:
    """The refusal of an explainer that cannot answer: what does answer is an InBedder
    checkpoint or an embedder registered as an explainer (``register_embedder(...,
    explains=True)``), not only the former."""
    return InvalidRequestError(
        f"explainer {explainer!r} does not generate answers (it is not an InBedder checkpoint nor "
        "an embedder registered as an explainer); pass one that is, or no explainer to take "
        "keywords from the texts themselves")


def _check_instruction(model: object, role: Role, instruction: str | None) -> None:
    """The application's limit on an instruction (``BaseEmbedder.check_instruction``: at most
    half of what the prompt leaves), for every text the edges encode or answer; an embedder
    called directly (evaluation, training) only refuses one that leaves no room."""
    check = getattr(model, "check_instruction", None)
    if instruction is not None and callable(check):
        check(role, instruction)


def _answers(embedders: EmbedderCache, texts: Sequence[str], explainer: str,
             instruction: str | None, max_new_tokens: int | None) -> list[str]:
    model = embedders.get(explainer)
    if not isinstance(model, AnswerGenerator):
        raise not_an_explainer(explainer)
    with domain_errors():
        _check_instruction(model, Role.DOCUMENT, instruction)
        return model.generate_answers(texts, instruction, max_new_tokens=max_new_tokens,
                                      batch_size=ANSWER_BATCH)


def _call(model: Embedder, texts: list[str], role: Role, instruction: str | None,
          batch_size: int) -> np.ndarray:
    with domain_errors():
        _check_instruction(model, role, instruction)
        return model.encode(texts, role=role, instruction=instruction, batch_size=batch_size)


class InlineQueryEncoder:
    """Encodes in the calling thread (one process, one user: the CLI, tests, workers).

    Args:
        embedders: where models come from.
        batch_size: texts per forward pass.
        query_threads: torch threads for non-bulk calls (set for the call, then restored);
            None leaves torch's setting alone. A one-query forward gains nothing from more
            threads and, on a machine whose cores are busy, loses a lot (docs/api.md).
    """

    def __init__(self, embedders: EmbedderCache, batch_size: int = 32,
                 query_threads: int | None = None) -> None:
        self.embedders = embedders
        self.batch_size = batch_size
        self.query_threads = query_threads

    def encode(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None, bulk: bool = False) -> np.ndarray:
        model = self.embedders.get(embedder)
        items, role_, instruction_ = _validated(texts, role, instruction)
        if bulk or self.query_threads is None:
            return _call(model, items, role_, instruction_, self.batch_size)
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(self.query_threads)
        try:
            return _call(model, items, role_, instruction_, self.batch_size)
        finally:
            torch.set_num_threads(before)

    def submit(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None) -> Future[np.ndarray]:
        """Encodes now, in the calling thread; returns a finished future."""
        future: Future[np.ndarray] = Future()
        try:
            future.set_result(self.encode(texts, embedder=embedder, role=role,
                                          instruction=instruction))
        except Exception as e:
            future.set_exception(e)
        return future

    def generate_answers(self, texts: Sequence[str], *, explainer: str, instruction: str | None,
                         max_new_tokens: int | None = None) -> list[str]:
        return _answers(self.embedders, texts, explainer, instruction, max_new_tokens)

    def close(self) -> None:
        """Nothing to release."""


def _validated(texts: Sequence[str], role: Role | str,
               instruction: str | None) -> tuple[list[str], Role, str | None]:
    with domain_errors():
        return validate_texts(texts), Role.parse(role), validate_instruction(instruction)


@dataclass
class _Request:
    key: tuple[str, Role, str | None]
    texts: list[str]
    future: Future[Any] = field(default_factory=Future)
    queued_at: float = field(default_factory=time.perf_counter)
    # Other model work (answer generation) runs alone, on the same thread as encoding.
    work: Callable[[], Any] | None = None


@dataclass
class BatchStats:
    """What the model thread did: how many calls and texts, and in how many batches."""

    requests: int = 0
    texts: int = 0
    batches: int = 0
    largest_batch: int = 0
    busy_refusals: int = 0
    cancelled_texts: int = 0  # dropped unencoded: their caller had gone (a client disconnected)


def _joined(futures: list[Future[np.ndarray]]) -> Future[np.ndarray]:
    """One future for the pieces of a request: their rows in order, or the first error."""
    joined: Future[np.ndarray] = Future()
    left = [len(futures)]
    lock = threading.Lock()

    def done(_piece: Future[np.ndarray]) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if joined.done():
            return
        error = _piece.exception()
        if error is not None:
            with lock:
                if not joined.done():
                    joined.set_exception(error)
            return
        if last:
            with lock:
                if not joined.done():
                    joined.set_result(np.concatenate([f.result() for f in futures], axis=0))

    for future in futures:
        future.add_done_callback(done)

    def cancel_pieces(whole: Future[np.ndarray]) -> None:
        if whole.cancelled():  # the caller went away: the pieces still queued are dropped
            for future in futures:
                future.cancel()

    joined.add_done_callback(cancel_pieces)
    return joined


class BatchingQueryEncoder:
    """One model thread; concurrent same-key requests share a batch; queries before bulk work.

    The thread takes everything of one key that is waiting when it becomes free (up to
    ``max_batch_texts``), so under load the batches grow by themselves and an idle server
    adds no wait to a lone request. ``max_wait_ms`` > 0 additionally holds a batch open that
    long for more requests (useful when clients fire at exactly the same moment).

    Args:
        embedders: where models come from.
        threads: torch threads of the model thread (``torch.set_num_threads`` is per thread).
        max_batch_texts: texts encoded together at most.
        max_wait_ms: how long to wait for more requests of the same key.
        max_pending_texts: texts waiting at most; more are refused with ``BusyError``.
        batch_size: the batch size passed to ``Embedder.encode`` (its forward passes).
    """

    def __init__(self, embedders: EmbedderCache, *, threads: int | None = 1,
                 max_batch_texts: int = 64, max_wait_ms: float = 0.0,
                 max_pending_texts: int = 8192, batch_size: int = 32) -> None:
        if max_batch_texts < 1 or max_pending_texts < 1 or batch_size < 1:
            raise ValueError("max_batch_texts, max_pending_texts and batch_size must be >= 1")
        self.embedders = embedders
        self.threads = threads
        self.max_batch_texts = max_batch_texts
        self.max_wait_s = max(0.0, max_wait_ms) / 1000.0
        self.max_pending_texts = max_pending_texts
        self.batch_size = batch_size
        self.stats = BatchStats()
        self._urgent: deque[_Request] = deque()
        self._bulk: deque[_Request] = deque()
        self._pending = 0
        self._in_flight = 0
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- callers

    def submit(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None, bulk: bool = False) -> Future[np.ndarray]:
        """Queue one request; the future gets its ``(len(texts), dim)`` vectors.

        Raises:
            InvalidRequestError: texts not a list of strings, a bad role or instruction.
            BusyError: more than ``max_pending_texts`` texts would be waiting.
        """
        items, role_, instruction_ = _validated(texts, role, instruction)
        key = (embedder, role_, instruction_)
        if not items:
            request = _Request(key, items)
            # Nothing to batch; the model still says how wide an empty result is.
            request.future.set_result(_call(self.embedders.get(embedder), items, role_,
                                            instruction_, self.batch_size))
            return request.future
        if len(items) <= self.batch_size:
            requests = [_Request(key, items)]
        else:
            # A request of more texts than one forward pass is bulk work in pieces, so queries
            # sent meanwhile are served between them (one request of 512 long texts held every
            # search for 90 s).
            requests = [_Request(key, items[i:i + self.batch_size])
                        for i in range(0, len(items), self.batch_size)]
            bulk = True
        with self._cond:
            if self._closed:
                raise FacetError("the query encoder is closed")
            if self._pending and self._pending + len(items) > self.max_pending_texts:
                self.stats.busy_refusals += 1
                raise BusyError(
                    f"{self._pending} texts are already waiting to be encoded (limit "
                    f"{self.max_pending_texts}, FACET_MAX_PENDING_TEXTS); retry shortly or send "
                    "fewer texts per request", retry_after_s=1.0)
            (self._bulk if bulk else self._urgent).extend(requests)
            self._pending += len(items)
            self._start()
            self._cond.notify()
        return requests[0].future if len(requests) == 1 else _joined([r.future for r in requests])

    def encode(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None, bulk: bool = False) -> np.ndarray:
        """Encode and wait. Bulk work, and any request of more than ``batch_size`` texts, goes
        in ``batch_size`` pieces, so waiting queries are served between the pieces."""
        if not bulk:
            return self.submit(texts, embedder=embedder, role=role, instruction=instruction).result()
        items, _, _ = _validated(texts, role, instruction)
        if len(items) <= self.batch_size:
            return self.submit(items, embedder=embedder, role=role, instruction=instruction,
                               bulk=True).result()
        # One piece queued at a time: a long index batch never fills the queue ahead of others.
        return np.concatenate([
            self.submit(items[i:i + self.batch_size], embedder=embedder, role=role,
                        instruction=instruction, bulk=True).result()
            for i in range(0, len(items), self.batch_size)], axis=0)

    def generate_answers(self, texts: Sequence[str], *, explainer: str, instruction: str | None,
                         max_new_tokens: int | None = None) -> list[str]:
        """Generate on the model thread, as bulk work (after waiting queries)."""
        items, _, _ = _validated(texts, Role.DOCUMENT, instruction)
        request = _Request((explainer, Role.DOCUMENT, instruction), items,
                           work=lambda: _answers(self.embedders, items, explainer, instruction,
                                                 max_new_tokens))
        with self._cond:
            if self._closed:
                raise FacetError("the query encoder is closed")
            self._bulk.append(request)
            self._pending += len(items)
            self._start()
            self._cond.notify()
        answers: list[str] = request.future.result()
        return answers

    def close(self) -> None:
        """Finish what is queued, then stop the model thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)

    @property
    def pending_texts(self) -> int:
        """Texts queued and not yet taken by the model thread."""
        with self._cond:
            return self._pending

    @property
    def in_flight(self) -> int:
        """Texts the model thread is working on now (0 when idle)."""
        with self._cond:
            return self._in_flight

    # ------------------------------------------------------------ model thread

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="facet-encoder", daemon=True)
            self._thread.start()

    def _take(self) -> list[_Request] | None:
        """The next batch: the oldest waiting request and the same-key ones behind it."""
        with self._cond:
            while not self._urgent and not self._bulk:
                if self._closed:
                    return None
                self._cond.wait()
            queue = self._urgent if self._urgent else self._bulk
            first = queue.popleft()
            # RUNNING from here on, so a late cancel cannot race the result (setting one on a
            # cancelled future raised in this thread and stopped it); a request cancelled while
            # it waited (its caller went away) is dropped.
            if not first.future.set_running_or_notify_cancel():
                self._drop(first)
                return []
            batch, size = [first], len(first.texts)
            if first.work is not None:
                self._pending -= size
                self._in_flight = size
                return batch
            deadline = time.perf_counter() + self.max_wait_s
            while size < self.max_batch_texts:
                size = self._gather(queue, first.key, batch, size)
                remaining = deadline - time.perf_counter()
                if size >= self.max_batch_texts or remaining <= 0 or self._closed:
                    break
                self._cond.wait(timeout=remaining)
            self._pending -= size
            self._in_flight = size
            return batch

    def _done(self) -> None:
        with self._cond:
            self._in_flight = 0

    def _gather(self, queue: deque[_Request], key: tuple[str, Role, str | None],
                batch: list[_Request], size: int) -> int:
        for request in list(queue):
            if request.work is None and request.key == key and \
                    size + len(request.texts) <= self.max_batch_texts:
                queue.remove(request)
                if not request.future.set_running_or_notify_cancel():
                    self._drop(request)
                    continue
                batch.append(request)
                size += len(request.texts)
        return size

    def _drop(self, request: _Request) -> None:
        """A request cancelled while it waited, taken off the queue (under the lock)."""
        self._pending -= len(request.texts)
        self.stats.cancelled_texts += len(request.texts)

    def _fail(self, batch: list[_Request], error: BaseException) -> None:
        self._done()
        for request in batch:
            request.future.set_exception(error)

    def _run_alone(self, request: _Request) -> None:
        name, role, instruction = request.key
        try:
            vectors = _call(self.embedders.get(name), request.texts, role, instruction,
                            self.batch_size)
        except Exception as e:
            request.future.set_exception(e)
            return
        request.future.set_result(vectors)
        self.stats.requests += 1
        self.stats.texts += len(request.texts)
        self.stats.batches += 1
        self.stats.largest_batch = max(self.stats.largest_batch, len(request.texts))

    def _loop(self) -> None:
        if self.threads is not None:
            import torch

            torch.set_num_threads(self.threads)  # this thread's OpenMP pool only
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:  # a cancelled request, dropped
                continue
            work = batch[0].work
            if work is not None:
                try:
                    result = work()
                except Exception as e:
                    self._done()
                    batch[0].future.set_exception(e)
                    continue
                self._done()
                batch[0].future.set_result(result)
                continue
            name, role, instruction = batch[0].key
            texts = [t for request in batch for t in request.texts]
            try:
                vectors = _call(self.embedders.get(name), texts, role, instruction, self.batch_size)
            except Exception as e:
                if len(batch) == 1:
                    self._fail(batch, e)
                    continue
                # One caller's text can fail a merged batch: each request runs alone, so the
                # error reaches only the caller whose text it was (it reached every caller of
                # the batch before).
                for request in batch:
                    self._run_alone(request)
                self._done()
                continue
            except BaseException as e:  # handed to every waiting caller, never lost in this thread
                self._fail(batch, e)
                raise
            self._done()
            offset = 0
            for request in batch:
                n = len(request.texts)
                request.future.set_result(vectors[offset:offset + n])
                offset += n
            self.stats.requests += len(batch)
            self.stats.texts += len(texts)
            self.stats.batches += 1
            self.stats.largest_batch = max(self.stats.largest_batch, len(texts))
