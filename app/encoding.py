"""Where the application's texts are turned into vectors: the ``QueryEncoder`` seam.

Every service encodes through a ``QueryEncoder`` instead of calling a model itself, so where
the model runs is a deployment choice:

* ``InlineQueryEncoder``: in the calling thread (the CLI, tests, a worker process).
* ``BatchingQueryEncoder``: one model thread per process (``facet serve``). Concurrent
  requests that share (embedder, role, instruction) are encoded as one batch (dynamic
  batching), search queries go before bulk work (an index job's chunks) unless it has been
  passed over for a while (then one piece of it goes), bulk work is encoded in pieces timed to
  about half a second so a query waits at most about that, and the model is never used from two
  threads at once (Hugging Face tokenizers are not safe for that).
* a Celery encoder (the worker issue) sends the same calls to the ``query`` queue, and bulk
  calls to the ``index`` queue, of GPU workers.

Models are loaded once per process by ``EmbedderCache``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import re
import threading
import time
import unicodedata
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from app.errors import (
    BusyError,
    FacetError,
    InvalidRequestError,
    UnavailableError,
    as_domain_error,
    domain_errors,
)
from app.text import plural
from embedders.contract import (
    UNREAD_WHY,
    Embedder,
    EncodesFromPlain,
    Role,
    validate_instruction,
    validate_texts,
)
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
        self._lock = threading.Lock()  # held briefly: never while a model loads
        self._loading: dict[str, threading.Lock] = {}  # name -> held while that name loads

    def get(self, name: str) -> Embedder:
        """The embedder called ``name`` (a registered name or a checkpoint path), loaded on first use.

        Raises:
            UnknownModelError: neither a registered name nor a checkpoint directory.
            DataError: a checkpoint that cannot be read.
            UnavailableError: FACET_DEVICE names a device this machine lacks (cuda without a GPU,
                cuda:N past its GPUs, mps, xpu: the server's configuration, not the request: a
                503, not a 422).
        """
        return self.get_timed(name)[0]

    def get_timed(self, name: str) -> tuple[Embedder, float]:
        """``get``, with the seconds this call spent loading the model: 0 where it was loaded
        already (under ``name`` or as a twin, ``_loaded_twin``) or another call loaded it
        meanwhile (a worker's job timed a twin's lookup, or two chunks' wait on one load, as a
        model load of its own). Same errors as ``get``."""
        model = self._models.get(name)
        if model is not None:
            return model, 0.0
        twin = self._loaded_twin(name)
        if twin is not None:
            with self._lock:
                return self._models.setdefault(name, twin), 0.0
        # One lock per name: a model that takes seconds to load (a plugin's, a large checkpoint)
        # held every other request, for models loaded long before, behind one lock; a name
        # asked for twice at once still loads once.
        with self._lock:
            loading = self._loading.setdefault(name, threading.Lock())
        with loading:
            model = self._models.get(name)
            if model is not None:
                return model, 0.0
            started = time.perf_counter()
            try:
                model = self._load(name)
                with self._lock:
                    self._remember(name, model)
            finally:
                with self._lock:
                    if self._loading.get(name) is loading:
                        del self._loading[name]
            return model, time.perf_counter() - started

    def _loaded_twin(self, name: str) -> Embedder | None:
        """The model already loaded under the registered name that ``name`` loads exactly (its
        checkpoint's path, another case: ``loads_registered``), else None. ``_remember`` keeps a
        path's model under the name too, but the name loaded first and the path asked for later
        loaded a second copy (``gircse`` then ``checkpoints/gircse``: two for the process's
        life in a server or worker). Reads configs only; a name it cannot read is ``get``'s to
        refuse."""
        from embedders.registry import loads_registered, saved_name

        try:
            registered = saved_name(name)
        except Exception:  # unknown or unreadable: the load says why
            return None
        if registered is None or registered == name:
            return None
        model = self._models.get(registered)
        return model if model is not None and loads_registered(name, registered) else None

    def _load(self, name: str) -> Embedder:
        from embedders import load_embedder
        from embedders.errors import DeviceUnavailableError

        try:
            with domain_errors():
                return load_embedder(name, device=self.device)
        except UnavailableError as e:
            if not isinstance(e.__cause__, DeviceUnavailableError):
                raise
            # The setting that asked for it (the embedders, also a library, cannot name it);
            # they name the device as given ("cuda:0"), as `facet worker`'s check does.
            raise UnavailableError(f"{e} (FACET_DEVICE=cpu)") from e

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


# What ``RecentVectors`` counts for each entry beside its vectors' bytes: its key (a tuple of the
# spec, the identity, a digest...) and the array's header. A search keeps one entry a text, and
# counted by vector bytes alone 16 MB of 16-wide vectors took 124 MB (about 470 bytes an entry
# beside the vector's 64; the review of the sixth session of 2026-12-07).
ENTRY_BYTES = 512


class RecentVectors:
    """Vectors kept by what made them (a ``local_model_key`` and what was encoded), the least
    recently used dropped beyond ``max_bytes``; safe to share between threads. A clustering
    keeps its texts' embeddings here (another k of the same texts), a search its query's.

    Args:
        max_bytes: what is kept at most, each entry counted as its vectors' bytes plus
            ``ENTRY_BYTES``; a larger one is not kept (0 keeps nothing).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0  # ``get``s that found vectors, and those that did not

    def get(self, key: Hashable) -> np.ndarray | None:
        """A copy of the vectors kept under ``key`` (the caller's to change), or None."""
        with self._lock:
            vectors = self._entries.get(key)
            if vectors is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end(key)
        return vectors.copy()

    def get_all(self, keys: Sequence[Hashable]) -> list[np.ndarray] | None:
        """Copies of the vectors of every one of ``keys``, or None where any is not kept: hits
        counted only for a whole set found (a set not found whole is encoded whole)."""
        with self._lock:
            found = [self._entries.get(key) for key in keys]
            if any(vectors is None for vectors in found):
                self.misses += len(keys)
                return None
            for key in keys:
                self._entries.move_to_end(key)
            self.hits += len(keys)
        return [vectors.copy() for vectors in found if vectors is not None]

    def stats(self) -> dict[str, float | int]:
        """What is kept (``entries``; ``mb``, keys counted as ``ENTRY_BYTES``), the bound
        (``limit_mb``), and the ``hits`` and ``misses`` of ``get`` so far: whether the bound
        suits the load (``GET /info``)."""
        with self._lock:
            return {"entries": len(self._entries), "mb": round(self._bytes / 2**20, 3),
                    "limit_mb": round(self.max_bytes / 2**20, 3), "hits": self.hits,
                    "misses": self.misses}

    def put(self, key: Hashable, vectors: np.ndarray) -> None:
        """Keep a copy of ``vectors`` under ``key``, dropping the least recently used beyond
        ``max_bytes``."""
        if vectors.nbytes + ENTRY_BYTES > self.max_bytes:
            return
        kept = vectors.copy()
        with self._lock:
            old = self._entries.pop(key, None)
            self._bytes += kept.nbytes - (old.nbytes if old is not None else -ENTRY_BYTES)
            self._entries[key] = kept
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.nbytes + ENTRY_BYTES

    def drop(self, which: Callable[[Hashable], bool]) -> None:
        """Drop the vectors of every key ``which`` says."""
        with self._lock:
            for key in [key for key in self._entries if which(key)]:
                self._bytes -= self._entries.pop(key).nbytes + ENTRY_BYTES

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def texts_digest(texts: Sequence[str]) -> str:
    """A digest of ``texts`` in order (each one's length first: ["ab", "c"] is not ["a", "bc"])."""
    digest = hashlib.blake2b(digest_size=20)
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def loaded_model(encoder: object, spec: str) -> Embedder | None:
    """The model ``encoder`` encodes ``spec`` with in this process, where it has loaded it; None
    where it has not (not yet, or encoded by workers, whose copy this process cannot see)."""
    embedders = getattr(encoder, "embedders", None)
    return embedders.peek(spec) if isinstance(embedders, EmbedderCache) else None


def local_model_key(encoder: object, spec: str) -> tuple[str, str] | None:
    """``(spec, identity)`` of ``loaded_model``, the part of a ``RecentVectors`` key that says
    which model made the vectors (its identity changes whenever its vectors would: a checkpoint
    retrained at the same path is another); None where it is not loaded here: nothing is kept
    or reused then."""
    model = loaded_model(encoder, spec)
    return None if model is None else (spec, encoder.embedders.identity(model))  # type: ignore[attr-defined]


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

# How long one piece of bulk work may hold the model thread (a query waits at most about this);
# servers take it from FACET_BULK_PIECE_MS (``FacetSettings.bulk_piece_ms``).
# Pieces are cut from the time the model took per (padded) character so far: on the 2-core CPU
# a piece of 32 chunk-length texts took 6.6 s with minilm under an instruction and held every
# search that long; pieces of any size gave the same throughput (less padding in small ones).
BULK_PIECE_MS = 500.0
# How long queries may keep bulk work waiting at most, by default: this many timed pieces of it,
# and at least BULK_MIN_DELAY_MS (``BatchingQueryEncoder(bulk_max_delay_ms=...)``). Under
# queries sent back to back, bulk work then gets one piece (about BULK_PIECE_MS) every 2 s:
# about a fifth of the model thread, so an index job slows down (about 5x) instead of stalling
# (a piece sat for more than 30 s), while a query waits for at most one more piece per 2 s.
BULK_DELAY_PIECES = 4
BULK_MIN_DELAY_MS = 1000.0
# A text's cost in characters: at most what the model reads (about 4 characters a token), plus
# the special and prompt tokens every text carries.
_CHARS_PER_TOKEN = 4
_TEXT_OVERHEAD_CHARS = 16
# The longest wait a 429 of a full queue asks for (``BatchingQueryEncoder._retry_after_s``).
MAX_RETRY_AFTER_S = 300.0
# Timings kept for this many (embedder, role, instruction) keys, the most recent ones.
_TIMED_KEYS = 256

# What clustering imports on first use (app/services/clustering.py imports them inside its
# functions, so commands that never cluster do not pay for them): about 7 s on the 2-core CPU.
CLUSTERING_MODULES = ("sklearn.cluster", "sklearn.metrics", "sklearn.decomposition",
                      "sklearn.exceptions")
_warm_up_lock = threading.Lock()
_warm_up_thread: threading.Thread | None = None


def warm_up_clustering() -> threading.Thread:
    """Import ``CLUSTERING_MODULES`` in a background daemon thread, once per process, and
    return that thread at once: a server's first cluster request paid for importing
    scikit-learn (about 7 s on the 2-core CPU), and importing it before serving would delay
    readiness by as much. A request that needs a module before the thread is done waits on
    Python's import lock for the same import; nothing is imported twice. Servers call it at
    start-up (``facet serve``, ``facet ui``), never the CLI's one-shot commands."""
    global _warm_up_thread
    with _warm_up_lock:
        if _warm_up_thread is None:
            _warm_up_thread = threading.Thread(target=_import_quietly, args=(CLUSTERING_MODULES,),
                                               name="facet-warm-up", daemon=True)
            _warm_up_thread.start()
        return _warm_up_thread


def _import_quietly(modules: Sequence[str]) -> None:
    """Import ``modules``; one that fails is logged only (the request that needs it says why)."""
    import importlib

    t0 = time.perf_counter()
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as e:  # scikit-learn missing or broken: clustering reports it itself
            logger.warning("%s was not imported at start-up: %s", module, e)
            return
    logger.info("clustering modules imported in %.1f s", time.perf_counter() - t0)


def longest_first(texts: Sequence[str], size: int) -> list[list[int]]:
    """The positions of ``texts``, longest first, in pieces of ``size``: the order an embedder's
    ``encode`` and an explainer's ``generate_answers`` batch one call's texts in. Called piece by
    piece (so a progress bar moves between the pieces), with ``size`` a multiple of their batch
    size, they see exactly the batches of one call: the same vectors and answers."""
    lengths = [len(unicodedata.normalize("NFC", t)) for t in texts]  # as `encode` measures
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])
    return [order[i:i + size] for i in range(0, len(order), size)]


def unread_rows(model: Embedder, texts: Sequence[str]) -> list[int]:
    """The positions of ``texts`` that are mostly the unknown token (``[UNK]``) to ``model``'s
    tokenizer (all-MiniLM reads Thai and emoji so): they embed nearly alike and rank
    arbitrarily. The embedder logs it; this is for the edges to tell the person who indexed or
    searched. None for a model whose tokenizer has no unknown token."""
    if not texts:  # (before the tokenizer: a model not loaded yet is not loaded for nothing)
        return []
    tokenizer = getattr(model, "tokenizer", None)
    unk = getattr(tokenizer, "unk_token_id", None)
    if tokenizer is None or unk is None:
        return []
    from embedders.base import mostly_unknown

    special = set(tokenizer.all_special_ids)
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return [i for i, row in enumerate(ids) if mostly_unknown(row, unk, special)]


def unread_count(model: Embedder, texts: Sequence[str]) -> int:
    """How many of ``texts`` are mostly the unknown token to ``model``'s tokenizer
    (``unread_rows``)."""
    return len(unread_rows(model, texts))


def cut_count(model: Embedder, texts: Sequence[str], role: Role | str = Role.DOCUMENT,
              instruction: str | None = None) -> int:
    """How many of ``texts`` are longer than ``model`` reads whole in ``role`` under
    ``instruction`` (by default as documents, read bare: ``document_budget``): it cuts them, and
    what follows the cut is in no vector of it. Asked of the model (``texts_cut``; a plugin's
    ``documents_cut`` for documents read bare); 0 for a model that does not tell."""
    if not texts:  # (before the model: a deferred one is not loaded for nothing)
        return 0
    role_ = Role.parse(role)
    count_of = getattr(model, "texts_cut", None)
    if callable(count_of):
        count = count_of(list(texts), role_, instruction)
    elif role_ is Role.DOCUMENT and instruction is None and callable(
            getattr(model, "documents_cut", None)):
        count = model.documents_cut(list(texts))  # type: ignore[attr-defined]
    else:
        return 0
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


# What ``cut_message`` says, for the chunk tasks' warnings to be summed.
CUT_MARK = "chunks written are longer than"


# Tokens a chunk's size advice leaves below an embedder's budget: a chunk read inside the
# prompt can take a token or two more than the chunker counted in the whole document (a word
# cut at the chunk's start is tokenised anew).
CHUNK_MARGIN = 4


def cut_message(name: str, count: int, total: int, budget: int | None,
                option_spec: str | None = None) -> str:
    """The warning for ``count`` of the ``total`` chunks ``name`` encoded in a run that it reads
    only the start of (``budget`` tokens of text). ``option_spec``: the spec it was loaded with
    where it takes a ``[max_length=N]`` option (``max_length_spec``), None where it does not
    (minilm: the advice to use one was an error to copy)."""
    reads = f" reads whole ({budget} tokens of text)" if budget else " reads whole"
    advice = (f"index into a new collection with --chunk-tokens {max(1, budget - CHUNK_MARGIN)} "
              "or less" if budget else "index into a new collection with smaller --chunk-tokens")
    option = f", or with --embedder '{option_spec}'" if option_spec else ""
    # Whole chunks are not always the better index: causal2vec on SciFact dev ranked better with
    # 200-token chunks read in part (nDCG@10 86.3) than with whole 80-token ones (84.1).
    return (f"{count:,} of {total:,} {CUT_MARK} {name}{reads}: only the start of each is in its "
            f"vectors, so its searches miss what the rest says; to embed every part whole, "
            f"{advice}{option} (not always better: docs/indexing.md, chunks an embedder cuts)")


def max_length_spec(model: object, spec: str) -> str | None:
    """``spec`` with ``max_length=N`` among its options (the others kept: the advice dropped
    ``[instruction_weight=1]``, a different embedding), where ``model`` takes that option (its
    ``OPTIONS``); None where it does not."""
    if "max_length" not in tuple(getattr(model, "OPTIONS", ()) or ()):
        return None
    from embedders.registry import join_options, split_options  # (loaded with the model)

    base, options = split_options(spec)
    options.pop("max_length", None)
    return join_options(base, {**options, "max_length": "N"})


# "N of M ...": how a cut or [UNK] warning begins (their counts are read back to be summed).
_COUNT_OF = re.compile(r"^([\d,]+) of ([\d,]+) ")
_CUT_BUDGET = re.compile(r" reads whole \((\d+) tokens of text\)")
_CUT_SPEC = re.compile(r", or with --embedder '([^']*)'")


def cut_counted(message: str) -> tuple[int, int, int | None, str | None] | None:
    """The count, total, budget and option spec a ``cut_message`` says (None for any other
    message): the warnings of a worker job's chunk tasks are summed into the one an inline job
    gives."""
    if CUT_MARK not in message:
        return None
    parts = _COUNT_OF.match(message)
    if parts is None:
        return None
    budget = _CUT_BUDGET.search(message)
    spec = _CUT_SPEC.search(message)
    return (int(parts.group(1).replace(",", "")), int(parts.group(2).replace(",", "")),
            int(budget.group(1)) if budget else None, spec.group(1) if spec else None)


# What ``unread_message`` says, for an edge to find the warning among a job's.
UNREAD_MARK = "are mostly unknown tokens to the tokenizer of"


# Documents an ``unread_message`` names at most (the rest are counted).
UNREAD_NAMED = 3
_UNREAD_IN = re.compile(r" They are in ([\d,]+) documents?: (.*)$")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def unread_message(name: str, count: int, total: int, what: str = "texts",
                   documents: Sequence[str] = (), in_documents: int | None = None) -> str:
    """The warning for ``count`` of ``total`` texts that ``name`` reads as mostly unknown tokens
    (the words of the embedder's own log line), naming the first ``UNREAD_NAMED`` of the
    ``documents`` they are in (of ``in_documents``, default as many as named): a count alone
    left a user of a large corpus to search for them."""
    message = (f"{count:,} of {total:,} {what} {UNREAD_MARK} {name} {UNREAD_WHY}, so they embed "
               "nearly alike and rank arbitrarily; use an embedder whose tokenizer reads them "
               "(e.g. causal2vec).")
    n = len(documents) if in_documents is None else in_documents
    if not documents or n < 1:
        return message
    named = ", ".join(json.dumps(key, ensure_ascii=False) for key in documents[:UNREAD_NAMED])
    more = n - min(len(documents), UNREAD_NAMED)
    return (f"{message} They are in {plural(n, 'document')}: {named}"
            + (f" and {more:,} more" if more > 0 else ""))


def unread_counted(message: str) -> int | None:
    """The count an ``unread_message`` says (None for any other message): the warnings of a
    worker job's chunks are summed into the one an inline job gives."""
    if UNREAD_MARK not in message:
        return None
    parts = _COUNT_OF.match(message)
    return int(parts.group(1).replace(",", "")) if parts else None


def unread_documents(message: str) -> tuple[list[str], int]:
    """The documents an ``unread_message`` names and how many it says they are in (``[], 0``
    for one that names none)."""
    found = _UNREAD_IN.search(message)
    if found is None:
        return [], 0
    named = [json.loads(q) for q in _QUOTED.findall(found.group(2))]
    return named, int(found.group(1).replace(",", ""))


def not_an_explainer(explainer: str) -> InvalidRequestError:
    """The refusal of an explainer that cannot answer: what does answer is an InBedder
    checkpoint or an embedder registered as an explainer (``register_embedder(...,
    explains=True)``), not only the former. One registered as an explainer whose model has no
    ``generate_answers`` is said to be so (it was told it was not registered as one)."""
    try:
        from embedders.registry import answers_questions

        registered = answers_questions(explainer)
    except Exception:  # a name that loads nothing, a config that cannot be read: the words below
        registered = None
    if registered:
        return InvalidRequestError(
            f"explainer {explainer!r} does not generate answers: it is registered as an explainer "
            "(register_embedder(..., explains=True)) but its model has no generate_answers(texts, "
            "instruction, max_new_tokens=None, batch_size=16); fix the plugin, pass another "
            "explainer, or none to take keywords from the texts themselves")
    return InvalidRequestError(
        f"explainer {explainer!r} does not generate answers (it is not an InBedder checkpoint nor "
        "an embedder registered as an explainer); pass one that is, or no explainer to take "
        "keywords from the texts themselves")


# How an embedder's refusal of an instruction over its limit begins (``PromptTokenizer.
# check_instruction``); ``instruction_refusal`` names the model there where it is not the
# request's embedder.
TOO_LONG_FOR_THIS_EMBEDDER = "the instruction is too long for this embedder"


def instruction_refusal(error: FacetError, whose: str | None = None) -> FacetError:
    """``error``, a model's refusal of an instruction, naming its field (``param``
    "instruction"; a request that nests it, as a cluster request's search, prefixes its own)
    and, with ``whose`` ("the explainer inbedder", "the reranker inbedder"), the model whose
    limit it is, where that is not the request's embedder. Both were missing: ``param`` was
    null (an unpaired surrogate in the same field named it), and "too long for this embedder"
    sent the user to an embedder whose limit the instruction kept."""
    message = str(error)
    if whose and message.startswith(TOO_LONG_FOR_THIS_EMBEDDER) and \
            isinstance(error, InvalidRequestError):
        rest = message[len(TOO_LONG_FOR_THIS_EMBEDDER):].replace("tokens the embedder reads",
                                                                 "tokens it reads")
        error = InvalidRequestError(f"the instruction is too long for {whose}{rest}")
    error.param = "instruction"
    return error


def _check_instruction(model: object, role: Role, instruction: str | None,
                       whose: str | None = None) -> None:
    """The application's limit on an instruction (``BaseEmbedder.check_instruction``: at most
    half of what the prompt leaves), for every text the edges encode or answer; an embedder
    called directly (evaluation, training) only refuses one that leaves no room. Refused as
    ``instruction_refusal`` says (``whose``: the model, where it is not the request's
    embedder)."""
    check = getattr(model, "check_instruction", None)
    if instruction is None or not callable(check):
        return
    try:
        check(role, instruction)
    except Exception as e:
        domain = as_domain_error(e)
        if domain is None:
            raise
        raise instruction_refusal(domain, whose) from e


def check_explainer(embedders: EmbedderCache, explainer: str, instruction: str | None,
                    embedder: str | None = None) -> AnswerGenerator:
    """The loaded ``explainer`` (``embedders`` keeps it: its answers load it no more), refused
    where it does not answer (``not_an_explainer``) or where ``instruction`` is over its limit
    ("the instruction is too long for the explainer inbedder: ..."), as its answers would be:
    a clustering checks it before any text is encoded."""
    model = embedders.get(explainer)
    if not isinstance(model, AnswerGenerator):
        raise not_an_explainer(explainer)
    # (The explainer that is the embedder too is "this embedder": both refuse it.)
    same = embedder is not None and (embedder == explainer or embedders.peek(embedder) is model)
    whose = None if same else f"the explainer {explainer}"
    _check_instruction(model, Role.DOCUMENT, instruction, whose=whose)
    return model


def _answers(embedders: EmbedderCache, texts: Sequence[str], explainer: str,
             instruction: str | None, max_new_tokens: int | None) -> list[str]:
    model = check_explainer(embedders, explainer, instruction)
    with domain_errors():
        return model.generate_answers(texts, instruction, max_new_tokens=max_new_tokens,
                                      batch_size=ANSWER_BATCH)


def _from_plain(embedders: EmbedderCache, embedder: str, plain: np.ndarray, texts: list[str],
                role: Role, instruction: str | None) -> np.ndarray:
    """``encode_from_plain`` of the loaded ``embedder`` (``EncodesFromPlain``), under the
    application's limit on the instruction, its refusals in the application's words."""
    model = embedders.get(embedder)
    if not isinstance(model, EncodesFromPlain):
        raise InvalidRequestError(f"embedder {embedder!r} cannot encode from its bare vectors")
    with domain_errors():
        _check_instruction(model, role, instruction)
        return model.encode_from_plain(plain, texts, role=role, instruction=instruction)


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

    def encode_from_plain(self, plain: np.ndarray, texts: Sequence[str], *, embedder: str,
                          role: Role | str = Role.DOCUMENT, instruction: str | None = None,
                          bulk: bool = False) -> np.ndarray:
        """What ``encode`` returns for texts whose bare vectors ``plain`` are at hand (a
        collection's stored ones), from an embedder that blends them in (``EncodesFromPlain``):
        only the instructed half is encoded. At ``query_threads`` as a query (a rerank), or with
        ``bulk`` (a clustering's texts) at torch's threads, as bulk encoding."""
        items, role_, instruction_ = _validated(texts, role, instruction)
        if bulk or self.query_threads is None:
            return _from_plain(self.embedders, embedder, plain, items, role_, instruction_)
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(self.query_threads)
        try:
            return _from_plain(self.embedders, embedder, plain, items, role_, instruction_)
        finally:
            torch.set_num_threads(before)

    def generate_answers(self, texts: Sequence[str], *, explainer: str, instruction: str | None,
                         max_new_tokens: int | None = None) -> list[str]:
        return _answers(self.embedders, texts, explainer, instruction, max_new_tokens)

    def close(self) -> None:
        """Nothing to release."""


def _validated(texts: Sequence[str], role: Role | str,
               instruction: str | None) -> tuple[list[str], Role, str | None]:
    with domain_errors():
        return validate_texts(texts), Role.parse(role), validate_instruction(instruction)


# How long a bulk group's last turn is remembered once nothing of it is queued (``_bulk_turn``).
BULK_TURN_MEMORY_S = 60.0
_GROUPS: itertools.count[int] = itertools.count()  # bulk request groups (``_Request.group``)


@dataclass
class _Request:
    key: tuple[str, Role, str | None]
    texts: list[str]
    future: Future[Any] = field(default_factory=Future)
    queued_at: float = field(default_factory=time.perf_counter)
    # Other model work (answer generation) runs alone, on the same thread as encoding.
    work: Callable[[], Any] | None = None
    # Throughput work: encoded in timed pieces, waiting queries served between them.
    bulk: bool = False
    # The server's own bulk work (queued by ``encode(..., bulk=True)``, which waits for room):
    # not counted against the limit on what clients queue.
    own: bool = False
    # The pieces of one call share a group; bulk work takes turns between groups.
    group: int = field(default_factory=lambda: next(_GROUPS))


@dataclass
class BatchStats:
    """What the model thread did: how many calls and texts, and in how many batches."""

    requests: int = 0
    texts: int = 0
    batches: int = 0
    largest_batch: int = 0
    busy_refusals: int = 0
    cancelled_texts: int = 0  # dropped unencoded: their caller had gone (a client disconnected)


def _joined(futures: list[Future[np.ndarray]],
            order: list[int] | None = None) -> Future[np.ndarray]:
    """One future for the pieces of a request: their rows in order (row ``i`` of the pieces
    put at ``order[i]`` when given), or the first error."""
    joined: Future[np.ndarray] = Future()
    left = [len(futures)]
    lock = threading.Lock()

    def done(_piece: Future[np.ndarray]) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if joined.done():
            return
        if _piece.cancelled():  # (its caller withdrew it: the whole is cancelled)
            joined.cancel()
            return
        error = _piece.exception()
        if error is not None:
            with lock:
                if not joined.done():
                    joined.set_exception(error)
            # The request has failed: its pieces not started yet are dropped (the model thread
            # went on encoding them for a caller that had its error).
            for future in futures:
                future.cancel()
            return
        if last:
            with lock:
                if not joined.done():
                    joined.set_result(_placed(np.concatenate([f.result() for f in futures],
                                                             axis=0), order))

    for future in futures:
        future.add_done_callback(done)

    def cancel_pieces(whole: Future[np.ndarray]) -> None:
        if whole.cancelled():  # the caller went away: the pieces still queued are dropped
            for future in futures:
                future.cancel()

    joined.add_done_callback(cancel_pieces)
    return joined


def _placed(rows: np.ndarray, order: list[int] | None) -> np.ndarray:
    """``rows`` in the callers' order: row ``i`` is the text at ``order[i]`` (None: as is)."""
    if order is None:
        return rows
    out = np.empty_like(rows)
    out[order] = rows
    return out


class BatchingQueryEncoder:
    """One model thread; concurrent same-key requests share a batch; queries before bulk work.

    The thread takes everything of one key that is waiting when it becomes free (up to
    ``max_batch_texts``), so under load the batches grow by themselves and an idle server
    adds no wait to a lone request. ``max_wait_ms`` > 0 additionally holds a batch open that
    long for more requests (useful when clients fire at exactly the same moment).

    Bulk work (and a request of more than ``batch_size`` texts) is queued in ``batch_size``
    pieces, longest first (the batches of one ``Embedder.encode`` call), and the model thread
    encodes each in smaller pieces of about ``bulk_piece_ms``, serving the queries that came
    meanwhile between them: one piece of 32 texts held a search for seconds. A piece's size
    comes from the time per padded character the model took so far for the same key (or, for a
    key not timed yet, the slowest of the embedder's), at least one text; nothing timed yet,
    it is the whole piece.

    Bulk requests take turns: the next piece is that of the request whose pieces have waited
    longest since one of them went (or since it was queued), so a request is not kept behind
    every piece of the bulk requests queued before it (a 40-text embed waited 9.9 s behind one
    2048-text call); an index job's pieces, queued one at a time, take turns with them too.
    While several requests' pieces wait (an ``encode(..., bulk=True)`` call counting as waiting
    between its pieces), a turn is one piece (of ``batch_size`` texts); one request alone has
    its pieces gathered up to ``max_batch_texts``.

    Queries go first, but not for ever: bulk work that queries have kept waiting for
    ``bulk_max_delay_ms`` (counted from the first query taken before it, or from its last
    timed piece) goes before the newer queries, one piece (or timed part) at a time; then
    queries go first again. Queries sent back to back kept a queued bulk piece waiting for more
    than 30 s, and an index job stalled.

    A caller whose wait ends with an exception (Ctrl-C's KeyboardInterrupt in ``encode``, a
    failed piece) takes its pieces not started yet off the queue (``stats.cancelled_texts``)
    and queues no more; the model thread finishes only the piece it is on. A future cancelled
    by an async caller (a client that went away) drops its pieces the same way.

    Args:
        embedders: where models come from.
        threads: torch threads of the model thread (``torch.set_num_threads`` is per thread).
        max_batch_texts: texts encoded together at most.
        max_wait_ms: how long to wait for more requests of the same key.
        max_pending_texts: texts waiting at most. A caller's request that would pass it is
            refused with ``BusyError`` (``submit``, ``encode`` without ``bulk``: the HTTP API's
            429); the server's own bulk work (``encode(..., bulk=True)``: an index job's or a
            clustering's pieces) waits for room instead, since refusing it failed the whole job
            while searches ran. A piece larger than the limit goes when nothing else waits.
            A caller's request is measured against the texts callers queued only: the server's
            own piece waiting in the queue refused every search (429, "32 texts are already
            waiting") though no client had queued anything; that piece still waits for room
            counting everything, so at most one of a job's pieces is queued beyond the limit.
        batch_size: the batch size passed to ``Embedder.encode`` (its forward passes).
        bulk_piece_ms: how long one piece of bulk work should take; None or 0 encodes each
            ``batch_size`` piece in one call (the vectors of one call bit for bit; pieces of
            another size differ from them by float rounding, at most about 1e-7).
        bulk_max_delay_ms: how long queries may keep waiting bulk work from the model thread
            before one piece of it goes first (> 0). Default (None): ``BULK_DELAY_PIECES``
            (4) times ``bulk_piece_ms``, at least ``BULK_MIN_DELAY_MS`` (1 s): 2 s with the
            default pieces, so under constant queries bulk work still gets about a fifth of
            the model thread, and a query waits for one more piece at most every 2 s; queries
            that come in bursts shorter than that are all served first, as before.
    """

    def __init__(self, embedders: EmbedderCache, *, threads: int | None = 1,
                 max_batch_texts: int = 64, max_wait_ms: float = 0.0,
                 max_pending_texts: int = 8192, batch_size: int = 32,
                 bulk_piece_ms: float | None = BULK_PIECE_MS,
                 bulk_max_delay_ms: float | None = None) -> None:
        if max_batch_texts < 1 or max_pending_texts < 1 or batch_size < 1:
            raise ValueError("max_batch_texts, max_pending_texts and batch_size must be >= 1")
        if bulk_max_delay_ms is None:
            bulk_max_delay_ms = max(BULK_MIN_DELAY_MS, BULK_DELAY_PIECES * (bulk_piece_ms or 0.0))
        elif not math.isfinite(bulk_max_delay_ms) or bulk_max_delay_ms <= 0:
            raise ValueError(f"bulk_max_delay_ms must be a number > 0, not {bulk_max_delay_ms!r}")
        self.embedders = embedders
        self.threads = threads
        self.max_batch_texts = max_batch_texts
        self.max_wait_s = max(0.0, max_wait_ms) / 1000.0
        self.max_pending_texts = max_pending_texts
        self.batch_size = batch_size
        self.bulk_piece_s = bulk_piece_ms / 1000.0 if bulk_piece_ms and bulk_piece_ms > 0 else None
        self.bulk_max_delay_s = bulk_max_delay_ms / 1000.0
        # When queries were first taken ahead of the bulk work waiting now (None: not since a
        # piece of it last went, or none waits).
        self._bulk_passed_over: float | None = None
        # When a piece of each bulk group waiting now last went (``_bulk_turn``).
        self._bulk_turns: dict[int, float] = {}
        # The groups of ``encode(..., bulk=True)`` calls queueing their pieces one at a time.
        self._queueing: set[int] = set()
        self.stats = BatchStats()
        # Seconds per padded character of each key's recent pieces (model thread only).
        self._rates: OrderedDict[tuple[str, Role, str | None], float] = OrderedDict()
        self._urgent: deque[_Request] = deque()
        self._bulk: deque[_Request] = deque()
        self._pending = 0
        # Of ``_pending``, the texts of the server's own bulk work (``_Request.own``).
        self._own_pending = 0
        self._in_flight = 0
        lock = threading.RLock()
        self._cond = threading.Condition(lock)  # the model thread waits here for work
        # Bulk callers wait here for room in the queue (notified whenever texts leave it, and
        # on close); a condition of its own, so a notify meant for the model thread never
        # wakes a waiting caller instead.
        self._room = threading.Condition(lock)
        self._closed = False
        self._abandoning = False  # ``abandon_bulk_work``: bulk work fails from now on
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- callers

    def submit(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None, bulk: bool = False) -> Future[np.ndarray]:
        """Queue one request; the future gets its ``(len(texts), dim)`` vectors.

        Raises:
            InvalidRequestError: texts not a list of strings, a bad role or instruction.
            BusyError: more than ``max_pending_texts`` texts would be waiting.
        """
        return self._submit(texts, embedder=embedder, role=role, instruction=instruction,
                            bulk=bulk, wait_for_room=False)

    def _submit(self, texts: Sequence[str], *, embedder: str, role: Role | str,
                instruction: str | None, bulk: bool, wait_for_room: bool,
                queued: list[_Request] | None = None,
                group: int | None = None) -> Future[np.ndarray]:
        """``submit``; with ``wait_for_room`` (the server's own bulk work), waiting until the
        queue has room for ``texts`` rather than refusing them (``FacetError`` if the encoder is
        closed meanwhile). ``queued`` gets the requests before they are queued (for ``_wait``
        to withdraw, even where an interrupt comes before the future is returned). ``group``:
        the turn-taking group of the requests (``encode``'s pieces, queued one at a time, share
        one), else a new one."""
        items, role_, instruction_ = _validated(texts, role, instruction)
        key = (embedder, role_, instruction_)
        if not items:
            request = _Request(key, items)
            # Nothing to batch; the model still says how wide an empty result is.
            request.future.set_result(_call(self.embedders.get(embedder), items, role_,
                                            instruction_, self.batch_size))
            return request.future
        order: list[int] | None = None
        group = next(_GROUPS) if group is None else group
        if len(items) <= self.batch_size:
            requests = [_Request(key, items, bulk=bulk, own=wait_for_room, group=group)]
        else:
            # A request of more texts than one forward pass is bulk work in pieces, so queries
            # sent meanwhile are served between them (one request of 512 long texts held every
            # search for 90 s); longest first, as one call batches them.
            pieces = longest_first(items, self.batch_size)
            requests = [_Request(key, [items[i] for i in piece], bulk=True, own=wait_for_room,
                                 group=group)
                        for piece in pieces]
            order = [i for piece in pieces for i in piece]
            bulk = True
        for request in requests:
            request.future.add_done_callback(self._withdrawn_if_cancelled(request))
        with self._cond:
            if self._closed or (bulk and self._abandoning):
                raise FacetError("the query encoder is closed")
            if wait_for_room:
                self._wait_for_room(len(items))
            elif self._over_client_limit(len(items)):
                self.stats.busy_refusals += 1
                retry = self._retry_after_s(len(items))
                raise BusyError(self._busy_message(len(items), retry),
                                retry_after_s=retry)
            if queued is not None:
                queued.extend(requests)
            (self._bulk if bulk else self._urgent).extend(requests)
            self._pending += len(items)
            if wait_for_room:
                self._own_pending += len(items)
            self._start()
            self._cond.notify()
        if len(requests) == 1:
            return requests[0].future
        return _joined([r.future for r in requests], order)

    def encode(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None, bulk: bool = False) -> np.ndarray:
        """Encode and wait. Bulk work, and any request of more than ``batch_size`` texts, goes
        in ``batch_size`` pieces (longest first), so waiting queries are served between the
        pieces (and between the timed parts the model thread cuts them into).

        An exception while waiting (KeyboardInterrupt: Ctrl-C) withdraws the pieces not
        started yet and queues no more (``_wait``)."""
        if not bulk:
            return self._wait(lambda queued: self._submit(
                texts, embedder=embedder, role=role, instruction=instruction, bulk=False,
                wait_for_room=False, queued=queued))
        items, _, _ = _validated(texts, role, instruction)
        group = next(_GROUPS)  # its pieces take turns with others' as one request
        if len(items) <= self.batch_size:
            return self._wait(lambda queued: self._submit(
                items, embedder=embedder, role=role, instruction=instruction, bulk=True,
                wait_for_room=True, queued=queued, group=group))
        # One piece queued at a time: a long index batch never fills the queue ahead of others.
        # Each waits for room rather than being refused: a full queue of searches failed the
        # server's own index job (BusyError) where it should only slow it down.
        pieces = longest_first(items, self.batch_size)

        def queue_piece(piece: list[int]) -> Callable[[list[_Request]], Future[Any]]:
            return lambda queued: self._submit(
                [items[i] for i in piece], embedder=embedder, role=role, instruction=instruction,
                bulk=True, wait_for_room=True, queued=queued, group=group)

        # (An exception in one piece's wait ends the loop: no more pieces are queued.) While it
        # runs, its group counts as waiting between its pieces (``_take``: others' turns stay
        # one piece, not gathered while its next piece is being queued).
        with self._cond:
            self._queueing.add(group)
        try:
            rows = [self._wait(queue_piece(piece)) for piece in pieces]
        finally:
            with self._cond:
                self._queueing.discard(group)
        return _placed(np.concatenate(rows, axis=0), [i for piece in pieces for i in piece])

    def _wait(self, queue: Callable[[list[_Request]], Future[Any]]) -> Any:
        """Queue requests (``queue`` puts them in the list it is given as it queues them) and
        wait for the result of the future it returns. Any exception meanwhile (Ctrl-C's
        KeyboardInterrupt in the main thread, an error of one piece) withdraws those requests
        not started yet (``_withdraw``) before it reaches the caller: the model thread went on
        encoding every abandoned piece of an interrupted ``Facet.embed``."""
        queued: list[_Request] = []
        try:
            return queue(queued).result()
        except BaseException:
            self._withdraw(queued)
            raise

    def _withdrawn_if_cancelled(self, request: _Request) -> Callable[[Future[Any]], None]:
        """A done-callback that takes ``request`` off the queue once its future is cancelled
        by whoever holds it (an async caller whose client went away: ``asyncio`` cancels the
        future): it stayed queued and counted against ``max_pending_texts`` until the model
        thread came to it, and a new query was refused meanwhile (429) for room it held."""
        def done(future: Future[Any]) -> None:
            if future.cancelled():
                self._withdraw([request])
        return done

    def _withdraw(self, requests: Sequence[_Request]) -> None:
        """Cancel ``requests`` and take those not started yet off the queue at once (counted in
        ``stats.cancelled_texts``; their room goes to others); the one the model thread is on
        finishes, what is done stays done."""
        if not requests:
            return
        with self._cond:
            gone = {id(r) for r in requests if r.future.cancel()}
            for queue in (self._urgent, self._bulk):
                if not any(id(r) in gone for r in queue):
                    continue
                kept = [r for r in queue if id(r) not in gone]
                for request in queue:
                    if id(request) in gone:
                        self._drop(request)
                queue.clear()
                queue.extend(kept)

    def encode_from_plain(self, plain: np.ndarray, texts: Sequence[str], *, embedder: str,
                          role: Role | str = Role.DOCUMENT, instruction: str | None = None,
                          bulk: bool = False) -> np.ndarray:
        """``InlineQueryEncoder.encode_from_plain`` on the model thread, as a query (a search's
        rerank waits for it) or with ``bulk`` after the waiting queries (send bulk work in small
        pieces: each runs as one block): every forward pass of the server's models stays on
        that thread and its thread count, rather than a request thread's competing with it."""
        items, role_, instruction_ = _validated(texts, role, instruction)
        rows = np.asarray(plain)
        request = _Request((embedder, role_, instruction_), items,
                           work=lambda: _from_plain(self.embedders, embedder, rows, items, role_,
                                                    instruction_))
        vectors: np.ndarray = self._wait(lambda queued: self._queue_work(request, bulk, queued))
        return vectors

    def generate_answers(self, texts: Sequence[str], *, explainer: str, instruction: str | None,
                         max_new_tokens: int | None = None) -> list[str]:
        """Generate on the model thread, as bulk work (after waiting queries), one decoding
        batch at a time: ``ANSWER_BATCH`` texts, longest first (the batches of one call, so its
        answers), queued one after the other, so queries that come meanwhile are served between
        them. One call was one block: 128 texts held every search for about 40 s on the 2-core
        CPU; now a query waits for at most one batch (about 10 s there). Timed parts as small as
        bulk encoding's would cost throughput: a batch of one answers 1.90 texts per CPU second,
        one of 32, 3.26."""
        items, _, _ = _validated(texts, Role.DOCUMENT, instruction)
        if len(items) <= ANSWER_BATCH:
            return self._answer_piece(items, explainer, instruction, max_new_tokens)
        answers = [""] * len(items)
        for piece in longest_first(items, ANSWER_BATCH):
            got = self._answer_piece([items[i] for i in piece], explainer, instruction,
                                     max_new_tokens)
            for i, answer in zip(piece, got, strict=True):
                answers[i] = answer
        return answers

    def _answer_piece(self, items: list[str], explainer: str, instruction: str | None,
                      max_new_tokens: int | None) -> list[str]:
        """Queue one piece of answer generation as bulk work and wait for its answers."""
        request = _Request((explainer, Role.DOCUMENT, instruction), items,
                           work=lambda: _answers(self.embedders, items, explainer, instruction,
                                                 max_new_tokens))
        answers: list[str] = self._wait(lambda queued: self._queue_work(request, True, queued))
        return answers

    def _queue_work(self, request: _Request, bulk: bool, queued: list[_Request]) -> Future[Any]:
        """Queue ``request`` (other model work: one block) as bulk work or a query. Bulk work
        (a clustering's blend of stored vectors, its explanations' answers) is the server's own,
        as ``encode(..., bulk=True)``'s pieces are: not counted against the clients' limit (it
        made searches 429 while a clustering's answers waited)."""
        with self._cond:
            if self._closed or (bulk and self._abandoning):
                raise FacetError("the query encoder is closed")
            queued.append(request)
            (self._bulk if bulk else self._urgent).append(request)
            self._pending += len(request.texts)
            if bulk:
                request.own = True
                self._own_pending += len(request.texts)
            self._start()
            self._cond.notify()
        return request.future

    def close(self, timeout: float = 60.0) -> None:
        """Finish what is queued, then stop the model thread; bulk callers still waiting for
        room are woken and fail (``FacetError``) rather than wait forever. Waits ``timeout``
        seconds at most for the model thread (a daemon: left, it ends with the process;
        ``working`` says whether it still runs)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            self._room.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=max(0.0, timeout))

    @property
    def working(self) -> bool:
        """Whether the model thread is still running (after ``close``: it did not end in time)."""
        return self._thread is not None and self._thread.is_alive()

    def abandon_bulk_work(self) -> int:
        """Fail the bulk work queued (``FacetError``, "the query encoder is closed") and stop
        the bulk piece the model thread is on at its next timed part: what a server stopping
        does once its index job overran its wait. ``close()`` alone finished the job's piece
        first (``join(timeout=60)``), so a SIGTERM'd `facet serve` took 30 s + up to 60 s to
        exit, and the job, no longer waited for, never recorded itself interrupted. Queries
        still go. Returns the texts dropped from the queue."""
        with self._cond:
            self._abandoning = True
            dropped = list(self._bulk)
            self._bulk.clear()
            for request in dropped:
                self._drop(request)
                if request.future.set_running_or_notify_cancel():
                    request.future.set_exception(FacetError("the query encoder is closed"))
            self._cond.notify_all()
            return sum(len(r.texts) for r in dropped)

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

    def _over_limit(self, count: int) -> bool:
        """Whether ``count`` more texts would pass ``max_pending_texts``, counting every text
        queued (under the lock): what the server's own bulk work waits on. A piece larger than
        the limit still goes into an empty queue."""
        return bool(self._pending) and self._pending + count > self.max_pending_texts

    def _client_pending(self) -> int:
        """Texts queued by callers (under the lock): all but the server's own bulk work."""
        return self._pending - self._own_pending

    def _over_client_limit(self, count: int) -> bool:
        """Whether a caller's ``count`` more texts would pass ``max_pending_texts``, counting
        the texts callers queued (under the lock); the server's own bulk work waiting there
        refused every search while an index job ran. A request larger than the limit still goes
        when no caller's text waits."""
        waiting = self._client_pending()
        return bool(waiting) and waiting + count > self.max_pending_texts

    def _busy_message(self, count: int, retry_after_s: float) -> str:
        """The refusal, with the wait its ``Retry-After`` says (it said "retry shortly" beside a
        header of 23 s: the OpenAI-client review of the sixth session of 2026-12-06)."""
        pending = self._client_pending()
        waiting = f"{plural(pending, 'text')} {'is' if pending == 1 else 'are'}"
        wait = max(1, round(retry_after_s))
        return (f"{waiting} already waiting to be encoded; the {count:,} of this request would "
                f"pass the limit of {self.max_pending_texts:,} (FACET_MAX_PENDING_TEXTS); retry "
                f"in about {plural(wait, 'second')} or send fewer texts per request")

    def _retry_after_s(self, count: int) -> float:
        """About how long until a caller's ``count`` texts fit (under the lock): the share of the
        callers' queued texts that must leave first, at the model's measured rate (seconds per
        padded character, ``_learn``); 1 where no rate is measured yet, at most
        ``MAX_RETRY_AFTER_S``. ``Retry-After: 1`` was said with 8,128 texts (about 58 s of
        work) queued, so clients came back 57 times for nothing."""
        waiting = [r for queue in (self._urgent, self._bulk) for r in queue if not r.own]
        total = sum(len(r.texts) for r in waiting)
        if not total:
            return 1.0
        try:
            rates = dict(self._rates)  # (the model thread folds new ones in as it goes)
        except RuntimeError:
            return 1.0
        seconds = 0.0
        for request in waiting:
            rate = rates.get(request.key) or max(
                (r for k, r in rates.items() if k[0] == request.key[0]), default=None)
            if rate is None:
                return 1.0  # a key not measured yet: no figure to give
            model = self.embedders.peek(request.key[0])
            cap = _CHARS_PER_TOKEN * _int_or(getattr(model, "max_length", None), 512)
            seconds += rate * sum(min(len(t), cap) + _TEXT_OVERHEAD_CHARS for t in request.texts)
        need = min(total, total + count - self.max_pending_texts)
        return min(MAX_RETRY_AFTER_S, max(1.0, seconds * need / total))

    def _wait_for_room(self, count: int) -> None:
        """Wait (under the lock) until ``count`` texts fit the queue, or it is empty.

        Raises:
            FacetError: the encoder was closed meanwhile.
        """
        while self._over_limit(count) and not self._closed and not self._abandoning:
            # Woken whenever texts leave the queue (``_left``) and on close; the timeout is
            # only a backstop.
            self._room.wait(timeout=1.0)
        if self._closed or self._abandoning:  # (only bulk work waits for room)
            raise FacetError("the query encoder is closed")

    def _left(self, requests: Sequence[_Request]) -> None:
        """``requests`` left the queue (taken, or dropped; under the lock): bulk callers may
        have room now."""
        self._pending -= sum(len(r.texts) for r in requests)
        self._own_pending -= sum(len(r.texts) for r in requests if r.own)
        self._room.notify_all()

    # ------------------------------------------------------------ model thread

    def _start(self) -> None:
        # Also where the last one died: a plugin's SystemExit (a BaseException, raised on to
        # its caller) ended it, and every later request waited for ever.
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="facet-encoder", daemon=True)
            self._thread.start()

    def _take(self, urgent_only: bool = False) -> list[_Request] | None:
        """The next batch: the oldest waiting request and the same-key ones behind it.
        ``urgent_only``: a batch of queries if one waits, else None at once (between the pieces
        of bulk work)."""
        with self._cond:
            if urgent_only and not self._urgent:
                return None
            while not self._urgent and not self._bulk:
                if self._closed:
                    return None
                self._cond.wait()
            queue = self._urgent if urgent_only else self._next_queue()
            first = self._bulk_turn() if queue is self._bulk else queue.popleft()
            # RUNNING from here on, so a late cancel cannot race the result (setting one on a
            # cancelled future raised in this thread and stopped it); a request cancelled while
            # it waited (its caller went away) is dropped.
            if not first.future.set_running_or_notify_cancel():
                self._drop(first)
                return []
            batch, size = [first], len(first.texts)
            # Other model work runs alone; so does a piece of bulk work while another request's
            # pieces wait, each turn one piece: an index job queues one piece at a time, and a
            # client's turns of two gathered pieces (and its pieces filling the job's turns) left
            # the job about 7% of the model thread beside four clients, not a fifth.
            if first.work is not None or (queue is self._bulk and (
                    any(r.group != first.group for r in self._bulk)
                    or any(g != first.group for g in self._queueing))):
                self._left(batch)
                self._in_flight = size
                return batch
            deadline = time.perf_counter() + self.max_wait_s
            while size < self.max_batch_texts:
                size = self._gather(queue, first, batch, size)
                remaining = deadline - time.perf_counter()
                if size >= self.max_batch_texts or remaining <= 0 or self._closed:
                    break
                self._cond.wait(timeout=remaining)
            self._left(batch)
            self._in_flight = size
            return batch

    def _next_queue(self) -> deque[_Request]:
        """Where the next batch comes from (under the lock; something waits): the queries, unless
        bulk work has waited behind them for ``bulk_max_delay_s`` since queries were first taken
        ahead of it; then one piece of it (the clock starts again once it is taken)."""
        if not self._urgent or not self._bulk:
            self._bulk_passed_over = None
            return self._urgent if self._urgent else self._bulk
        now = time.perf_counter()
        if self._bulk_passed_over is None:
            self._bulk_passed_over = now
        elif now - self._bulk_passed_over >= self.bulk_max_delay_s:
            self._bulk_passed_over = None
            return self._bulk
        return self._urgent

    def _bulk_turn(self) -> _Request:
        """Take the next piece of bulk work (under the lock; some waits): bulk requests take
        turns, the one whose pieces waited longest since one of them last went (or since it was
        queued) goes first. Queue order alone made a request wait for every piece of those
        queued before it: a 40-text embed waited 9.9 s behind one 2048-text call."""
        firsts: dict[int, _Request] = {}
        for request in self._bulk:
            firsts.setdefault(request.group, request)
        # A group with nothing queued may queue its next piece soon (``encode``'s pieces go one
        # at a time): its last turn is kept a while, else that piece would count from when it
        # was queued, after the other request's latest turn, and wait behind it every time.
        now = time.perf_counter()
        for group in [g for g, t in self._bulk_turns.items()
                      if g not in firsts and now - t > BULK_TURN_MEMORY_S]:
            del self._bulk_turns[group]  # done, or withdrawn
        chosen = min(firsts.values(),
                     key=lambda r: self._bulk_turns.get(r.group, r.queued_at))
        self._bulk.remove(chosen)
        self._bulk_turns[chosen.group] = now
        return chosen

    def _done(self) -> None:
        with self._cond:
            self._in_flight = 0

    def _gather(self, queue: deque[_Request], first: _Request,
                batch: list[_Request], size: int) -> int:
        """Add the waiting requests of ``first``'s key to ``batch`` while they fit, those of
        ``first``'s own call first (another call's bulk pieces fill what is left)."""
        key = first.key
        for request in sorted(queue, key=lambda r: r.group != first.group):
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
        self._left([request])
        self.stats.cancelled_texts += len(request.texts)

    def _fail(self, batch: list[_Request], error: BaseException) -> None:
        self._done()
        for request in batch:
            request.future.set_exception(error)

    def _run_alone(self, request: _Request) -> None:
        name, role, instruction = request.key
        try:
            vectors = self._encode(name, request.texts, role, instruction, request.bulk)
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
        try:
            while True:
                batch = self._take()
                if batch is None:
                    return
                if batch:  # else a cancelled request, dropped
                    self._run(batch)
        except BaseException:
            # Ended by a plugin's SystemExit (handed to that batch's callers): the requests
            # queued behind it waited for the next submit to start a thread (for ever where
            # none came, their timeouts aside). Another thread takes them over at once.
            with self._cond:
                if not self._closed and (self._urgent or self._bulk):
                    self._thread = threading.Thread(target=self._loop, name="facet-encoder",
                                                    daemon=True)
                    self._thread.start()
            raise

    def _serve_urgent(self) -> None:
        """Encode the queries waiting now (called between the pieces of bulk work), for
        ``bulk_max_delay_s`` at most: queries sent back to back held the bulk work in hand for
        good; then its next piece goes (at least one batch of queries is served first)."""
        since = time.perf_counter()
        while time.perf_counter() - since < self.bulk_max_delay_s:
            batch = self._take(urgent_only=True)
            if batch is None:
                return
            if batch:
                self._run(batch)

    def _run(self, batch: list[_Request]) -> None:
        work = batch[0].work
        if work is not None:
            try:
                result = work()
            except Exception as e:
                self._done()
                batch[0].future.set_exception(e)
                return
            self._done()
            batch[0].future.set_result(result)
            return
        name, role, instruction = batch[0].key
        texts = [t for request in batch for t in request.texts]
        try:
            vectors = self._encode(name, texts, role, instruction, batch[0].bulk)
        except Exception as e:
            if len(batch) == 1 or (self._abandoning and batch[0].bulk):
                self._fail(batch, e)
                return
            # One caller's text can fail a merged batch: each request runs alone, so the
            # error reaches only the caller whose text it was (it reached every caller of
            # the batch before).
            for request in batch:
                self._run_alone(request)
            self._done()
            return
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

    def _encode(self, name: str, texts: list[str], role: Role, instruction: str | None,
                bulk: bool) -> np.ndarray:
        """The vectors of a batch. Bulk work goes longest first (as ``Embedder.encode`` orders
        it) in pieces of about ``bulk_piece_s``, the queries that came meanwhile served between
        them; every call is timed for the pieces to come."""
        model = self.embedders.get(name)
        key = (name, role, instruction)
        lengths = [len(unicodedata.normalize("NFC", t)) for t in texts]  # as `encode` measures
        cap = _CHARS_PER_TOKEN * _int_or(getattr(model, "max_length", None), 512)
        if not bulk or self.bulk_piece_s is None:
            t0 = time.perf_counter()
            vectors = _call(model, texts, role, instruction, self.batch_size)
            if len(texts) <= self.batch_size:  # one forward pass, padded to the longest
                self._learn(key, time.perf_counter() - t0,
                            len(texts) * (min(max(lengths, default=0), cap) + _TEXT_OVERHEAD_CHARS))
            return vectors
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        out: np.ndarray | None = None
        start = 0
        while start < len(order):
            if start:
                self._serve_urgent()
                if self._abandoning:  # the server stopping: its job's piece is not finished
                    raise FacetError("the query encoder is closed")
                with self._cond:
                    self._in_flight = len(order) - start
            # A piece is padded to its first (longest) text: it costs its size times that.
            units = min(lengths[order[start]], cap) + _TEXT_OVERHEAD_CHARS
            idx = order[start:start + self._piece_size(key, units, len(order) - start)]
            t0 = time.perf_counter()
            vectors = _call(model, [texts[i] for i in idx], role, instruction, self.batch_size)
            self._learn(key, time.perf_counter() - t0, len(idx) * units)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=vectors.dtype)
            out[idx] = vectors
            start += len(idx)
        assert out is not None  # (a batch is never empty)
        return out

    def _piece_size(self, key: tuple[str, Role, str | None], units: int, left: int) -> int:
        """Texts in the next piece of bulk work (of ``left``), each costing ``units`` padded
        characters: what fits ``bulk_piece_s`` at the key's measured rate, or the slowest rate
        measured for the embedder; the whole ``batch_size`` piece when nothing is measured."""
        assert self.bulk_piece_s is not None
        rate = self._rates.get(key)
        if rate is None:
            rate = max((r for k, r in self._rates.items() if k[0] == key[0]), default=None)
        if rate is None or rate <= 0:
            return min(left, self.batch_size)
        return max(1, min(left, self.batch_size, int(self.bulk_piece_s / (rate * units))))

    def _learn(self, key: tuple[str, Role, str | None], seconds: float, units: int) -> None:
        """Fold one call's seconds per padded character into the key's rate (half the last)."""
        if units <= 0:
            return
        rate = seconds / units
        before = self._rates.pop(key, None)
        self._rates[key] = rate if before is None else (before + rate) / 2
        if len(self._rates) > _TIMED_KEYS:
            self._rates.popitem(last=False)


def _int_or(value: object, default: int) -> int:
    return value if isinstance(value, int) and value > 0 else default
