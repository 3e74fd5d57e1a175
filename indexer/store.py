"""The vector store: one interface, two Qdrant backends.

* ``EdgeStore``: ``qdrant-edge-py``, the Qdrant engine in process (HNSW, WAL). One shard
  folder per collection under a root folder. The embedded default.
* ``QdrantClientStore``: ``qdrant-client`` against a server URL (full stack), or its
  local mode (a folder or ``:memory:``), which is how that code path is tested here.

A collection holds one *named vector* per embedder (the vector name is the embedder
name), each sized from that embedder's dimension, cosine distance. Point ids are
deterministic (``point_id``: uuid5 of document id and chunk number), so writing the same
chunk twice overwrites it instead of duplicating it.

Filters are a mapping ``payload path -> value`` (match) or ``-> list of values``
(match any); all entries must hold.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import itertools
import json
import logging
import math
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from indexer import lexical as lex
from indexer.errors import (
    DISK_GONE_ERRNOS,
    REMOUNT_AND_RERUN,
    CollectionNotFoundError,
    StoreBusyError,
    StoreDamagedError,
    StoreError,
    StoreUnavailableError,
    StoreUnreachableError,
    disk_full_text,
    disk_full_words,
    mask_secrets,
    masked_url,
)

logger = logging.getLogger(__name__)

# Fixed namespace: the same (document, chunk) gets the same id on every machine and run.
FACET_NAMESPACE = uuid.UUID("6f1d3c1e-5a0b-4f7e-9a53-2c8d7e4b9f10")
DOC_ID_FIELD = "doc_id"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")

Scalar = str | int | float | bool
Filters = Mapping[str, Scalar | Sequence[Scalar]]


def _command() -> str:
    """This process as a user started it, for another process's busy message: ``facet
    serve``, ``facet index``... (the program's name and its first argument)."""
    import sys

    program = os.path.basename(sys.argv[0]) if sys.argv else ""
    if program in ("", "-c"):
        return ""
    if sys.argv[0].endswith(os.path.join("app", "__main__.py")):  # python -m app ...
        program = "facet"
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)  # past -v
    return " ".join([program, *([command] if command else [])])[:80]


def held_by_worker(holder: dict[str, Any] | None) -> bool:
    """Whether a lock file's ``holder`` is a `facet worker` process (its ``command``: the
    program and its first argument, ``_command``)."""
    return str((holder or {}).get("command") or "").split()[1:2] == ["worker"]


def _busy_message(collection: str, holder: dict[str, Any] | None) -> str:
    who = (f"pid {holder.get('pid')} on host {holder.get('host')}" if holder else "another process")
    command = str((holder or {}).get("command") or "")
    if command:
        who += f" ({command})"
    why = f"collection {collection!r} is open in {who}: an embedded store folder is used by one process at a time"
    if any(word in command.split() for word in ("serve", "ui")):
        return (f"{why}; that server keeps it open while it is among the {MAX_OPEN_SHARDS} it used last, "
                "so send this work to it (its HTTP API or UI; from Python, "
                "FacetRetriever(base_url=...)) or stop it first")
    if held_by_worker(holder):
        # (Another worker of the stack writing its chunks: the web app's advice below read
        # wrong to a second `facet worker`, which only waits its turn.)
        return (f"{why}; a worker writes it, and the others wait their turn (with the vectors in "
                "a Qdrant server, FACET_QDRANT_URL, workers write side by side)")
    return (f"{why}; wait for it to finish, or serve every reader and writer from one `facet serve` "
            "(from a web app's several workers: run one `facet serve` and use "
            "FacetRetriever(base_url=...) or the HTTP API from each)")


def point_id(doc_id: str, chunk_no: int) -> str:
    """Deterministic point id of chunk ``chunk_no`` of document ``doc_id``."""
    return str(uuid.uuid5(FACET_NAMESPACE, f"{doc_id}\x00{chunk_no}"))


def validate_name(name: str, what: str = "collection") -> str:
    """Collection and vector names become folder names: keep them simple."""
    # fullmatch: with match and "$", a name ending in a newline passed (a folder "nl\n").
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        # A long one cut (an HTTP path's name of 60,000 characters was echoed whole).
        shown = (repr(name) if not isinstance(name, str) or len(name) <= 160 else
                 f"{name[:60]!r}… ({len(name):,} characters)")
        raise StoreError(
            f"invalid {what} name {shown}: use 1-128 ASCII letters (A-Z, a-z), digits, '_', '-' "
            "or '.', starting with a letter or digit"
        )
    return name


def validate_new_collection_name(name: str) -> str:
    """``validate_name`` for a collection about to be created, which also may not end in
    ``.lock``: the embedded store keeps collection NAME's lock file as NAME.lock beside its
    folder, and a collection "NAME.lock" collided with it (a traceback when indexed, and a
    half-made row that could not be deleted). Only new names: one made before the rule is
    still listed, searched and deleted."""
    validate_name(name)
    if name.lower().endswith(".lock"):
        raise StoreError(f"invalid collection name {name!r}: a name may not end in '.lock' (the "
                         "vector store's lock files are named so)")
    return name


@dataclass(frozen=True)
class PointRecord:
    """A point to write: id, one vector per embedder name, payload."""

    id: str
    vectors: Mapping[str, Sequence[float] | np.ndarray]
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fusion:
    """Reciprocal rank fusion of the dense and lexical lists (Qdrant's weighted RRF): a point
    gets ``1 / (k - 1 + R / w)`` from each list that holds it at 1-based rank ``R``, ``w`` that
    list's weight; with weight 1 that is the usual ``1 / (k + rank)``, rank 0 the best.

    Attributes:
        k: damps the top ranks' lead (Qdrant's default is 2; larger values flatten).
        dense_weight, lexical_weight: each list's weight (a weight w counts rank R as R / w).
        candidates: how many points each list contributes before fusion (at least the limit).
    """

    k: int = 30  # the defaults are what the search service serves (HYBRID_FUSION), chosen on dev sets
    dense_weight: float = 1.0
    lexical_weight: float = 1.5
    candidates: int = 100


@dataclass(frozen=True)
class Hit:
    """A point read back: id, score (0 for retrieve/scroll) and payload."""

    id: str
    score: float
    payload: dict[str, Any]


# A point read with its vectors (``retrieve``, ``scroll(with_vectors=...)``): hit, named vectors.
Scrolled = tuple[Hit, dict[str, list[float]]]


# Scores tie often (BM25 of texts with the same matched words and length; RRF of mirrored
# ranks; cosines of identical vectors, which the indexer copies for duplicate content), and
# Qdrant returns tied points in no fixed order: every search (dense, word and hybrid) fetches
# this many more, orders ties by point id and cuts, so one query always gives one list, each
# ``limit``'s a prefix of a larger one's (a dense search gave dup2 at k=1 and dup4, dup1, dup2
# at k=3 for eight copies of one text).
_TIE_MARGIN = 16
# Where more points tie at the cut than the margin holds (a long document's repeated chunks,
# boilerplate, templated records: 76 chunks of one score), the points past it were fetched in
# no fixed order, so the list depended on the store's layout: an embedded and a worker-written
# index of one corpus ranked them apart, and k=3 was no prefix of k=8 (the parity review of
# the sixth session of 2026-12-06). The fetch grows (x4) until the last point read scores below
# the cut, up to this many past ``limit``; ties beyond that stay in the store's order.
_TIE_FETCH_MAX = 4096


def _fetch_ranked(fetch: Callable[[int, bool], Sequence[Any]], limit: int, with_payload: bool,
                  payloads: Callable[[list[str]], dict[str, dict[str, Any]]]) -> list[Hit]:
    """``_ranked`` of ``fetch(n, with_payload)`` (a search for the top ``n``, in score order),
    ``n`` grown from ``limit + _TIE_MARGIN`` while the last point read ties with the point at
    the cut. The larger fetches read ids and scores alone, and the payloads of the kept top
    come from ``payloads(ids)`` (a point deleted meanwhile left out): 5,000 tied chunks of
    500 characters read 6,300 payloads to keep 10, a dense search 41 ms, 21 ms with ids alone
    (0.6 ms when only 16 more were read, in the store's order; its verification)."""
    want = limit + _TIE_MARGIN
    found = fetch(want, with_payload)
    grown = False
    while not (len(found) < want or limit < 1 or want >= limit + _TIE_FETCH_MAX):
        cut = round(float(sorted(found, key=lambda p: -float(p.score))[limit - 1].score), 7)
        if round(min(float(p.score) for p in found), 7) < cut:
            break
        want = min(want * 4, limit + _TIE_FETCH_MAX)
        found, grown = fetch(want, False), True
    top = _ranked(found, limit)
    if not (grown and with_payload):
        return top
    read = payloads([h.id for h in top])
    return [Hit(h.id, h.score, read[h.id]) for h in top if h.id in read]

# Generations of a collection name in a store object (``VectorStore.generation``): unique in
# the process, so a name dropped and made again never reads as unchanged.
_GENERATIONS = itertools.count(1)


def _ranked(points: Sequence[Any], limit: int) -> list[Hit]:
    hits = [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in points]
    hits.sort(key=lambda h: (-round(h.score, 7), h.id))
    return hits[:limit]


def _vector_name(name: str) -> str:
    validate_name(name, "vector")
    if name in lex.LEXICAL_VECTORS:
        raise StoreError(f"{name!r} names the term vectors of lexical search; give the embedder "
                         "another name")
    return name


def _as_list(vector: Sequence[float] | np.ndarray) -> list[float]:
    if isinstance(vector, np.ndarray):
        return [float(x) for x in vector.astype(np.float32, copy=False).tolist()]
    return [float(x) for x in vector]


def _vector_dict(vectors: Any) -> dict[str, list[float]]:
    """The dense vectors of a record (the term vectors of lexical search are not returned). Both
    clients give each as a new list of floats, kept as it is: copying it float by float, and an
    edge record's ``vector`` built twice (``_retrieved``), were half of turning 200 minilm
    records into pairs (39 -> 21 ms)."""
    return {str(k): v if isinstance(v, list) else [float(x) for x in v]
            for k, v in dict(vectors).items() if k not in lex.LEXICAL_VECTORS}


def _retrieved(records: Sequence[Any]) -> list[tuple[Hit, dict[str, list[float]]]]:
    """Read records (edge or qdrant-client: same fields) as (hit, named vectors) pairs. An edge
    record builds its ``vector`` anew at each read of it: read once."""
    pairs = []
    for r in records:
        vectors = r.vector
        pairs.append((Hit(str(r.id), 0.0, dict(r.payload or {})),
                      _vector_dict(vectors if isinstance(vectors, dict) else {})))
    return pairs



def _values(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


# Integers up to this size are exact as floats, so a range [v, v] matches a float field equal to v.
_EXACT_FLOAT_INT = 2**53


def _condition(field_condition: Any, match_value: Callable[[Any], Any],
               match_any: Callable[[list[Any]], Any], match_range: Callable[[float], Any],
               filter_: Any, key: str, value: Any) -> Any:
    """One filter key as a Qdrant condition (either client's classes): one value matched
    exactly, a list by any of its values. ``MatchAny`` takes only all-string or all-integer
    lists; a list with booleans or of mixed types is a ``should`` of exact matches.

    A number matches a field holding the same number as an integer or a float: Qdrant's exact
    match takes no floats and matches an integer only to an integer field, so a number is the
    range [v, v] (a field of 6.0 matched neither ``6.0``, refused, nor ``6``; JSON clients
    send 6.0 as 6 after validation). An integer beyond a float's exact ones is the exact match
    alone. An integer within them was ``should`` [exact match, range] until that range alone
    (the exact match finds a subset of what it finds): a float payload index, a server's for
    numbers (``_SERVER_SCHEMAS``), serves a range but no exact match, and a ``should`` with
    one branch no index serves is checked against every point's payload."""
    def one(v: Any) -> Any:
        if isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool) and abs(v) <= _EXACT_FLOAT_INT):
            return field_condition(key=key, range=match_range(float(v)))
        return field_condition(key=key, match=match_value(v))

    values = _values(value)
    if len(values) == 1:
        return one(values[0])
    if all(isinstance(v, str) for v in values):
        return field_condition(key=key, match=match_any(values))
    return filter_(should=[one(v) for v in values])


# Payload indexes of filtered fields (edge store). A filter on a field without one reads the
# payload of every point: 445 ms a search at 60,000 points against 0.2 ms with an index. A field
# is indexed when a filtered search on it first finds something (a point found holds every
# filtered key; a key no point holds, a typo, finds nothing, so it costs no scan and takes none
# of the ``_MAX_INDEXED_FIELDS`` slots), by the kinds of value it holds; every index serves
# exactly the conditions ``_condition`` sends, or none (the engine then reads the payload as
# before), so results are the same with and without it:
#   strings only -> keyword; integers only -> integer; numbers with a float among them ->
#   float (an integer index leaves 2.5 out, and a range [2.5, 2.5] served by it missed it);
#   anything else (booleans, which the edge store does not filter on, mixed kinds, objects or
#   values under a list) -> none.
_PAYLOAD_SCHEMAS = {frozenset({"str"}): "Keyword", frozenset({"int"}): "Integer",
                    frozenset({"float"}): "Float", frozenset({"int", "float"}): "Float"}
# Fields a collection keeps indexes for (arbitrary metadata may have many; past this many a
# filtered field is read from the payloads, as before).
_MAX_INDEXED_FIELDS = 32
# A Qdrant server's index for a filtered field, by the filter's values (``QdrantClientStore``):
# the stored values are not known there (other processes write), so only indexes that serve
# ``_condition``'s conditions whatever else the field holds. Numbers -> float: a number is the
# range [v, v], which an integer index (qdrant-client's ``IntegerIndexParams``, ``range``/
# ``lookup``) would serve leaving out a field of 6.0 (it indexes integer payloads only, and a
# record may hold 6.0: another process writes it); a float index holds integers too and serves
# the whole condition. An integer past 2**53 (an exact match) then reads the payloads.
_SERVER_SCHEMAS = {frozenset({"str"}): "KEYWORD", frozenset({"bool"}): "BOOL",
                   frozenset({"int"}): "FLOAT", frozenset({"float"}): "FLOAT",
                   frozenset({"int", "float"}): "FLOAT"}
_PLAIN_SEGMENT = r'[\w-]+|"[^"]*"'
_FIELD_PATH = re.compile(rf"(?:{_PLAIN_SEGMENT})(?:\.(?:{_PLAIN_SEGMENT}))*")


def _path_segments(path: str) -> list[str] | None:
    """A payload path's field names (``meta."a b"`` -> meta, a b); None for a path this store
    does not index (array selectors ``[]``, anything it cannot read)."""
    if not _FIELD_PATH.fullmatch(path):
        return None
    return [m.strip('"') for m in re.findall(_PLAIN_SEGMENT, path)]


def _value_kinds(payload: Mapping[str, Any] | None, segments: Sequence[str]) -> set[str]:
    """The kinds of value (str, int, float, bool, other) a payload holds at a path, a list's
    items each; none where the path is missing or null."""
    value: Any = payload or {}
    for name in segments:
        if not isinstance(value, dict):
            return {"other"} if isinstance(value, list) else set()
        value = value.get(name)
    kinds = set()
    for v in (value if isinstance(value, list) else [value]):
        if v is None:
            continue
        kinds.add("bool" if isinstance(v, bool) else "int" if isinstance(v, int)
                  else "float" if isinstance(v, float) else "str" if isinstance(v, str) else "other")
    return kinds


class VectorStore(ABC):
    """What the index and search services need from a vector database."""

    backend: str = "abstract"

    @abstractmethod
    def list_collections(self) -> list[str]: ...

    @abstractmethod
    def vector_sizes(self, collection: str) -> dict[str, int]:
        """Named vectors of ``collection`` and their dimensions.

        Raises:
            CollectionNotFoundError: no such collection.
        """

    def collection_exists(self, collection: str) -> bool:
        return collection in self.list_collections()

    def generation(self, collection: str) -> int:
        """Which collection the name ``collection`` stands for in this store object: a number
        that changes whenever this object drops it or creates it anew (0: neither yet). A
        search reads it before it looks the name up and again where a step of it failed: one
        changed in between met the collection deleted, or deleted and created again, by another
        thread (a soak test's searches during a delete/re-create said "keeps no term vectors" or
        "has no vectors from ..." of the new collection, 400s blaming the request). Another
        process's drop is not seen here: an embedded store's folder lock keeps another process
        out of a collection this one has open."""
        generations: dict[str, int] = self.__dict__.get("_generations", {})
        return generations.get(collection, 0)

    def _replaced(self, collection: str) -> None:
        """Mark ``collection`` dropped or created anew (``generation``)."""
        self.__dict__.setdefault("_generations", {})[collection] = next(_GENERATIONS)

    @abstractmethod
    def ensure_collection(self, collection: str, vectors: Mapping[str, int], *,
                          lexical: bool = False) -> None:
        """Create ``collection`` or add missing named vectors.

        ``lexical``: keep BM25 term vectors of each point's payload ``text`` beside the dense
        ones (``indexer.lexical``), for ``search_lexical`` and ``search_hybrid``. A new
        collection gets them from the start; an existing edge collection without them gets
        them added and filled from its stored texts; a server or local-mode collection
        cannot add them and is left without (its searches say so).

        Raises:
            StoreError: a named vector exists with another dimension, or the backend
                cannot add a vector to an existing collection.
        """

    def has_lexical(self, collection: str) -> bool:
        """Whether ``collection`` keeps term vectors for lexical and hybrid search."""
        return self.lexical_version(collection) is not None

    def lexical_version(self, collection: str) -> str | None:
        """The definition of a term (``indexer.lexical.DEFINITIONS``) ``collection``'s term
        vectors were written with; None when it keeps none."""
        return None

    def search_lexical(self, collection: str, text: str, *, limit: int,
                       filters: Filters | None = None) -> list[Hit]:
        """Points by BM25 score of ``text`` against their stored text, best first.

        Raises:
            StoreError: the collection keeps no term vectors.
        """
        raise self._no_lexical(collection)

    def search_hybrid(self, collection: str, vector_name: str, vector: Sequence[float] | np.ndarray,
                      text: str, *, limit: int, filters: Filters | None = None, exact: bool = False,
                      fusion: Fusion | None = None, candidates: int | None = None) -> list[Hit]:
        """The dense and the lexical rankings fused by reciprocal rank (``Fusion``: each hit gets
        ``1 / (k - 1 + R / w)`` from each list holding it at 1-based rank ``R``).

        Each list is its top ``max(candidates or limit, fusion.candidates)``, ranked here with
        ties in point-id order (Qdrant's own fusion ranks tied BM25 scores in an order that moves
        with the list's length, so one query ranked differently at another ``limit``); so the
        first results do not depend on ``limit`` while it is within ``fusion.candidates``.
        ``candidates`` lets a caller that over-fetches (grouping by document) keep the lists a
        plain search of the same request would fuse: longer lists let other chunks into the top.

        Raises:
            StoreError: the collection keeps no term vectors, or has no ``vector_name``.
        """
        f = fusion or Fusion()
        self._check_vector(collection, vector_name)
        if not self.has_lexical(collection):
            raise self._no_lexical(collection)
        n = max(int(candidates or limit), f.candidates)
        # Both lists are ids and scores only, and payloads are read for the fused top alone: a
        # search converted the payloads of ~2 x 116 candidates to keep 10 (7.8-12.7 ms against
        # 4.1-7.1 ms, the same rankings).
        dense = self._search(collection, vector_name, vector, limit=n, filters=filters,
                             exact=exact, with_payload=False)  # ties ranked (``_TIE_MARGIN``)
        words = self._search_lexical(collection, text, limit=n, filters=filters,
                                     with_payload=False)
        fused: dict[str, float] = {}
        for weight, ranked in ((f.dense_weight, dense), (f.lexical_weight, words)):
            for rank, hit in enumerate(ranked, start=1):
                fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (f.k - 1 + rank / weight)
        top = _ranked([Hit(pid, score, {}) for pid, score in fused.items()], int(limit))
        payloads = self._payloads(collection, [h.id for h in top])
        # A point deleted between the searches and this read is left out, as a later search would.
        return [Hit(h.id, h.score, payloads[h.id]) for h in top if h.id in payloads]

    def _search(self, collection: str, vector_name: str, vector: Sequence[float] | np.ndarray,
                *, limit: int, filters: Filters | None, exact: bool, with_payload: bool) -> list[Hit]:
        """``search``, with empty payloads unless ``with_payload`` (a backend that can skip
        reading them overrides this)."""
        hits = self.search(collection, vector_name, vector, limit=limit, filters=filters, exact=exact)
        return hits if with_payload else [Hit(h.id, h.score, {}) for h in hits]

    def _search_lexical(self, collection: str, text: str, *, limit: int,
                        filters: Filters | None, with_payload: bool) -> list[Hit]:
        """``search_lexical``, with empty payloads unless ``with_payload``."""
        hits = self.search_lexical(collection, text, limit=limit, filters=filters)
        return hits if with_payload else [Hit(h.id, h.score, {}) for h in hits]

    def _check_vector(self, collection: str, vector_name: str) -> None:
        """StoreError unless ``collection`` has the named vector ``vector_name``."""
        sizes = self.vector_sizes(collection)
        if vector_name not in sizes:
            raise StoreError(
                f"collection {collection!r} has no vectors from {vector_name!r} "
                f"(it has: {', '.join(sizes)}); index it with --embedder {vector_name}")

    def _terms(self, terms: tuple[list[int], list[float]]) -> Any:
        """Term ids and weights as this backend's sparse vector."""
        raise NotImplementedError

    def _text_terms(self, payload: Mapping[str, Any] | None, version: str) -> Any:
        """The BM25 document terms of a point's stored text under definition ``version``, as
        this backend's sparse vector."""
        return self._terms(lex.document_terms(str((payload or {}).get("text", "")), version))

    def _query_terms(self, collection: str, text: str) -> tuple[str, Any]:
        """``text``'s query terms under ``collection``'s definition: (its sparse vector's name,
        the terms as this backend's sparse vector).

        Raises:
            StoreError: the collection keeps no term vectors.
        """
        version = self.lexical_version(collection)
        if version is None:
            raise self._no_lexical(collection)
        return lex.vector_name(version), self._terms(lex.query_terms(text, version))

    def _point_vectors(self, collection: str, point: PointRecord) -> dict[str, Any]:
        """A point's named vectors to write, with its term vector where the collection keeps them."""
        vectors: dict[str, Any] = {k: _as_list(v) for k, v in point.vectors.items()}
        version = self.lexical_version(collection)
        if version is not None:
            vectors[lex.vector_name(version)] = self._text_terms(point.payload, version)
        return vectors

    def older_lexical(self, collection: str) -> str | None:
        """Why a word search of ``collection`` misses what today's definition of a term finds,
        and what to run, when its term vectors were written under an older one (``qdrant-bm25-
        en-v1``: no word inside Chinese, Japanese, Korean or Thai text); None when they are
        today's, or it keeps none. A search found nothing for "熊猫" and said only that no
        indexed word of the query was in it (the edge store rewrites them on the next index
        run; server and local mode cannot, and said so only in an index run's log).

        Raises:
            StoreError: term vectors of a definition this Facet does not know.
        """
        version = self.lexical_version(collection)
        if version is None or version == lex.LEXICAL_VERSION:
            return None
        # What that definition's word search misses, as ``indexer.lexical.MISSES`` says it (it
        # named Chinese, Japanese, Korean and Thai text for each, which en-pairs-v1 reads).
        misses = lex.MISSES.get(version, "words today's definition finds")
        older = (f"collection {collection!r} keeps the term vectors of {version}, an older "
                 f"definition of a term (its word search misses {misses}: docs/indexing.md)")
        if self.backend == "edge":
            return (f"{older}; run `facet index` on its sources once more to rewrite them as "
                    f"{lex.LEXICAL_VERSION} (from its stored texts; unchanged documents are not "
                    f"embedded again)")
        return (f"{older}; the {self.backend} backend cannot rewrite them: index its sources into "
                f"a new collection for today's {lex.LEXICAL_VERSION}")

    def _no_lexical(self, collection: str) -> StoreError:
        """What to do depends on the backend: the edge store adds term vectors to an existing
        collection (``ensure_collection``, on the next index run), server and local mode cannot
        (the message named the edge store among those that cannot)."""
        if self.backend == "edge":
            return StoreError(
                f"collection {collection!r} keeps no term vectors, so it cannot be searched by "
                f"words (mode lexical or hybrid); it was indexed before they existed: run "
                f"`facet index` on its sources once more, which adds them from its stored texts "
                f"(unchanged documents are not embedded again)")
        return StoreError(
            f"collection {collection!r} keeps no term vectors, so it cannot be searched by words "
            f"(mode lexical or hybrid); it was indexed before they existed, and the "
            f"{self.backend} backend cannot add them to an existing collection (the edge backend "
            f"can): index its sources into a new collection")

    @abstractmethod
    def drop_collection(self, collection: str) -> bool:
        """Delete a collection; returns whether it existed."""

    @abstractmethod
    def upsert(self, collection: str, points: Sequence[PointRecord]) -> None:
        """Insert or overwrite whole points (vectors not given are not kept)."""

    @abstractmethod
    def update_vectors(self, collection: str, vector_name: str,
                       ids: Sequence[str], vectors: np.ndarray) -> None:
        """Set one named vector on existing points, keeping their other vectors and payload."""

    @abstractmethod
    def delete(self, collection: str, ids: Sequence[str]) -> None: ...

    @abstractmethod
    def delete_documents(self, collection: str, doc_ids: Sequence[str]) -> None:
        """Delete every point whose payload ``doc_id`` is one of ``doc_ids``."""

    @abstractmethod
    def search(self, collection: str, vector_name: str, vector: Sequence[float] | np.ndarray,
               *, limit: int, filters: Filters | None = None, exact: bool = False) -> list[Hit]:
        """Nearest points by cosine similarity, best first, tied scores in point-id order
        (``_TIE_MARGIN`` more are fetched to rank them), so a smaller ``limit``'s list is a
        prefix of a larger one's."""

    @abstractmethod
    def count(self, collection: str, filters: Filters | None = None) -> int: ...

    @abstractmethod
    def retrieve(self, collection: str, ids: Sequence[str],
                 with_vectors: bool = False) -> list[tuple[Hit, dict[str, list[float]]]]:
        """Points by id (missing ids are left out), with their vectors when asked."""

    def _payloads(self, collection: str, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The payloads of the points ``ids`` that exist (a search's kept top, read after it)."""
        return {hit.id: hit.payload for hit, _ in self.retrieve(collection, ids)}

    def scroll(self, collection: str, *, limit: int = 1000, filters: Filters | None = None,
               with_payload: bool = True) -> list[Hit]:
        """Up to ``limit`` points (payloads, or empty ones without ``with_payload``), in id
        order."""
        return [hit for hit, _ in self._scroll(collection, limit, filters, with_payload, False)]

    def scroll_with_vectors(self, collection: str, vectors: bool | str = True, *, limit: int = 1000,
                            filters: Filters | None = None, with_payload: bool = True) -> list[Scrolled]:
        """``scroll``'s points with their vectors, as (hit, named vectors) pairs as ``retrieve``
        gives them (``vectors``: True, every dense vector; a name, that one alone, and none where
        the collection has no vector of that name): a caller that needs the points' vectors
        reads them in the same pass rather than retrieving the same points again."""
        # A name the collection lacks asks for none (qdrant-edge and a server refuse it, local
        # mode returns nothing), so every backend reads it as a point without that vector.
        asked = ([vectors] if vectors in self.vector_sizes(collection) else False) if isinstance(vectors, str) \
            else bool(vectors)
        return self._scroll(collection, limit, filters, with_payload, asked)

    @abstractmethod
    def _scroll(self, collection: str, limit: int, filters: Filters | None, with_payload: bool,
                vectors: bool | list[str]) -> list[Scrolled]:
        """The engine's scroll behind ``scroll`` and ``scroll_with_vectors``: (hit, vectors)
        pairs, ``vectors`` what the engine is asked for."""

    def optimize(self, collection: str) -> None:
        """Build indexes after a bulk load (a no-op where the backend does it itself)."""

    def flush(self) -> None:
        """Make every write durable."""

    def release(self, collection: str) -> None:
        """Let other processes open ``collection`` (embedded stores; a no-op for a server)."""

    def is_open(self, collection: str) -> bool:
        """Whether this process holds ``collection`` open now (embedded stores); True where
        nothing is opened per collection (a server), so callers never release it for nothing."""
        return True

    def check_free(self, collection: str, *, wait_s: float | None = None) -> None:
        """Raise ``StoreBusyError`` where another process holds ``collection`` (an embedded
        store's folder lock), without opening it: a caller about to load a model for it learns
        now what opening it would say. ``wait_s``: how long to wait for the holder (default the
        store's own wait). Nothing where collections are not locked per process."""

    def check_reachable(self, *, timeout_s: float | None = None, ask: bool = False) -> None:
        """Raise ``StoreUnavailableError`` where the store is a server nothing answers on, in
        ``timeout_s`` (default ``REACH_TIMEOUT_S``), not a request's 30 s; ``ask``: send it one
        request too, so that something else answering there is said as well. Nothing for an
        embedded store: there is nothing to reach."""

    def check_ready(self, *, timeout_s: float | None = None) -> None:
        """Raise ``StoreUnavailableError`` where the store could not serve a request now: a
        server out of reach (``check_reachable``), a folder of an embedded store that cannot be
        written (reads take a lock file there too). Cheap: no collection is opened (a readiness
        probe, ``Facet.readiness``)."""
        self.check_reachable(timeout_s=timeout_s)

    def hold(self, collection: str) -> None:
        """Open an existing ``collection`` for this process now, before a write begins, so
        that another process holding it is found first (embedded stores; a no-op for a server).

        Raises:
            StoreBusyError: another process has it open.
            CollectionNotFoundError: no such collection.
        """

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require(self, collection: str) -> None:
        if not self.collection_exists(collection):
            known = ", ".join(self.list_collections()) or "none yet"
            raise CollectionNotFoundError(
                f"no collection {collection!r} in the {self.backend} store (collections: {known}); "
                "create it with `facet index SOURCE --collection NAME`"
            )


# --------------------------------------------------------------------------- edge


def _folder_gone(path: Path) -> bool:
    """Whether a collection's folder does not exist; False where it cannot be told (a disk
    gone under its mount: EIO, ENOTCONN), so that a release in a ``finally`` never raises over
    the error that stopped the work."""
    try:
        return not path.exists()
    except OSError:
        return False


def _same_file(fd: int, path: str) -> bool:
    """Whether the open ``fd`` is the file at ``path`` now (not one removed or replaced)."""
    try:
        held, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def _open_in_this_process(collection: str) -> str:
    """Why a collection another store of this process has open cannot be used here."""
    return (f"collection {collection!r} is open in another store of this process "
            f"(pid {os.getpid()}), another Facet on the same data folder: open one "
            "Facet per data folder per process and share it (Facet.set_shared(facet) "
            "makes yours the one Facet.shared() and the LangChain classes use when "
            "given no facet=; or pass facet= to them), or close() the other one first")


class _FolderLocks:
    """Process-wide exclusive ``flock``s on ``<root>/<collection>.lock``, reference counted.

    An edge shard folder can be open in one process only, and a second process must not even
    *try* to load it: a failed load still touches the shard's payload-index files and breaks
    the process that holds it ("tracker_journal.dat is shorter than expected", issue 12). So
    every open goes through this lock first, and only the lock's holder loads the shard. The
    lock is per process (several ``EdgeStore`` objects of one process share it) and the kernel
    drops it when the process dies, however it dies.
    """

    def __init__(self) -> None:
        self._held: dict[str, tuple[int, int]] = {}  # path -> (fd, references)
        self._lock = threading.Lock()

    def acquire(self, path: Path, collection: str, wait_s: float, *, alone: bool = False) -> None:
        """Take the lock, or another reference to it where this process holds it already;
        ``alone``: refuse that (StoreBusyError) for a caller about to delete or re-make the
        folder, which another store of this process has open (it went on serving the deleted
        collection's points, and lost its writes)."""
        key = str(path)
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            # The process-wide lock is held for one try, not for the wait: a thread waiting
            # for another process's shard held every other thread's open behind it, so ten
            # searches of a collection a worker was writing got their 409 after 3, 6, ... 27 s
            # (the PostgreSQL exploration of the sixth session of 2026-12-05).
            with self._lock:
                if key in self._held and alone:
                    raise StoreBusyError(_open_in_this_process(collection), collection,
                                         {"pid": os.getpid()})
                if key in self._held:
                    fd, refs = self._held[key]
                    self._held[key] = (fd, refs + 1)
                    return
                if self._try_lock(path, key):
                    return
            if time.monotonic() >= deadline:
                holder = _read_holder(path)
                raise StoreBusyError(_busy_message(collection, holder), collection, holder)
            time.sleep(0.05)

    def _try_lock(self, path: Path, key: str) -> bool:
        """One try at the ``flock`` of ``path`` (``self._lock`` held): taken and recorded, or
        False where another process holds it."""
        while True:
            try:
                fd = os.open(key, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:  # was a traceback from every command on the folder (a 500)
                raise _unwritable(path.parent, e, path) from e
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            # A deleted collection's lock file is removed by its deleter while locked
            # (``release(remove=True)``): a lock won on that file, opened before, locks
            # nothing another process would see. Open the file now at the path again.
            if _same_file(fd, key):
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "command": _command()}).encode(), 0)
        self._held[key] = (fd, 1)
        return True

    def release(self, path: Path, *, remove: bool = False) -> None:
        """Let go of one reference; the last lets go of the lock. ``remove``: the collection
        was deleted, so its lock file goes too (removed while still locked; a waiter that had
        opened it opens the path again: ``acquire``). Each deleted collection left its file
        for good: 152 of them after 250 create/delete cycles of a long-running server."""
        key = str(path)
        with self._lock:
            if key not in self._held:
                return
            fd, refs = self._held[key]
            if refs > 1:
                self._held[key] = (fd, refs - 1)
                return
            del self._held[key]
            if remove and _same_file(fd, key):
                with contextlib.suppress(OSError):
                    os.unlink(key)
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            # A close can fail where the disk went away (a drive pulled: ENOTCONN, EIO); the
            # descriptor is gone all the same, and the error hid the one that stopped the work
            # (a 100-line traceback ending in os.close).
            with contextlib.suppress(OSError):
                os.close(fd)

    def forget_in_child(self) -> None:
        """In a forked child: the locks are the parent's (its stores hold those shards open),
        so the child must not count them as its own, or a store it opens would load a shard
        the parent has open. Its copies of the descriptors are closed, never unlocked: an
        ``flock`` belongs to the open file description, which the parent's descriptor keeps
        (``LOCK_UN`` on a copy would have let go of the parent's lock)."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        held, self._held = self._held, {}
        for fd, _ in held.values():
            with contextlib.suppress(OSError):
                os.close(fd)


# How a process limit reads in the engine's words (Rust's Display and Debug forms) and Python's:
# too many open files (EMFILE, ENFILE) or no memory to map (ENOMEM: an address-space limit,
# `ulimit -v`, each open shard maps ~400 MB). Said as the store's damage ("restore the folder
# from a backup, or delete the collection", a 422), as a folder another user owns, or as one
# deleted or unmounted, over files that were whole.
_LIMIT_SIGNS = ("Too many open files", "TooManyOpenFiles", "os error 24", "code: 24",
                "os error 23", "code: 23", "Cannot allocate memory", "OutOfMemory",
                "os error 12", "code: 12")
_LIMIT_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)


def _limit_hint() -> str:
    """What to do where this process hit a limit of the machine (its file descriptors or its
    address space), with the limits it has."""
    try:
        import resource

        files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        space = resource.getrlimit(resource.RLIMIT_AS)[0]
        have = f"ulimit -n is {files}" + ("" if space == resource.RLIM_INFINITY
                                           else f", ulimit -v {space // 1024} KiB")
    except (ImportError, ValueError, OSError):  # (no such module on Windows)
        have = "see ulimit -n and ulimit -v"
    return ("this process has reached a limit of its open files or memory, and nothing on disk "
            f"is wrong ({have}): raise it (ulimit -n, systemd's LimitNOFILE=, docker's "
            "--ulimit nofile=...; an open collection maps ~400 MB of address space), or open "
            "fewer collections or serve fewer connections at once")


def _unwritable(folder: Path, error: OSError, path: Path | None = None) -> StoreUnavailableError:
    """The error for a file of an embedded store's ``folder`` that cannot be written (``path``:
    the one tried, default the folder): a read-only mount (a `:ro` bind mounted under a running
    server), a folder or file of another user. Unavailable, not a refused request: reads take a
    lock file there too, so nothing can be served from it until it is writable again."""
    what = f"cannot write {path if path is not None else folder}: {error.strerror or error}"
    if error.errno == errno.EROFS:
        why = (f"the vector store's folder {folder} is on a read-only file system, and Facet "
               "writes there (a lock file) even to read a collection; mount it read-write, or "
               "point FACET_DATA_DIR at a writable copy of the data folder")
    elif error.errno in (errno.EACCES, errno.EPERM) and path is not None and path.exists():
        why = ("the data folder's files belong to another user (after a `sudo facet ...`?): "
               f"give them back to this one (chown -R {folder}), or run as their owner")
    elif error.errno in (errno.EACCES, errno.EPERM):
        why = (f"this user cannot write in the vector store's folder {folder}, and Facet writes "
               "there (a lock file) even to read a collection; make it writable for this user "
               "(chown -R, chmod u+w), or run as its owner")
    elif error.errno == errno.ENOENT:
        why = _GONE_HINT
    elif error.errno in _LIMIT_ERRNOS:
        why = _limit_hint()
    else:
        why = f"check the vector store's folder {folder} (FACET_DATA_DIR)"
    return StoreUnavailableError(f"{what}; {why}")


def _unreadable(collection: str, folder: Path, error: OSError) -> StoreUnavailableError:
    """The error for an embedded store's collection whose files this process cannot read
    (``error`` from a stat or read under its ``folder``): a folder another user owns or one
    made unreadable (a restore run as root, a ``chmod``). One line naming the file and what to
    do, as the listing says it (``store files unreadable``); a search ended in a
    PermissionError traceback."""
    where = error.filename or folder
    if error.errno in _LIMIT_ERRNOS:  # (not the files' owner: this process's limit)
        return StoreUnavailableError(f"collection {collection!r}: {error.strerror or error}: "
                                     f"{where}; {_limit_hint()}")
    try:
        import pwd

        user = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):  # no such module (Windows), a uid with no name
        user = "$USER"
    return StoreUnavailableError(
        f"collection {collection!r}: {error.strerror or error}: {where}; give its files back to "
        f"this user (chown -R {user} {folder}) or make them readable (chmod -R u+rwX {folder}), "
        "or run as their owner")


def probe_write(folder: Path) -> None:
    """Create and remove a file in ``folder``: whether this process can write there now (a
    readiness probe; ``os.access`` says yes to root on a folder without write permission).

    Raises:
        OSError: it cannot (a read-only mount, another user's folder, gone).
    """
    fd, name = tempfile.mkstemp(prefix=".facet-ready-", dir=folder)
    os.close(fd)
    os.unlink(name)


def _check_writable(folder: Path) -> None:
    """``probe_write`` for a store's folder, failing as ``_unwritable``."""
    try:
        probe_write(folder)
    except OSError as e:
        raise _unwritable(folder, e) from e


def _read_holder(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_LOCKS = _FolderLocks()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_LOCKS.forget_in_child)


class _ShardGate:
    """Shared use and exclusive closing of one collection's shard, between threads.

    Every call into a shard holds the gate shared (any number at once); dropping, releasing or
    closing the shard holds it exclusive, so it waits for the calls in flight to return instead
    of closing the shard under them (the binding then raises a bare "Shard is not initialized").
    A waiting close goes first: calls that arrive meanwhile wait for it, then find the shard
    re-opened or the collection gone.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._users = 0
        self._closers = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._closers:
                self._cond.wait()
            self._users += 1
        try:
            yield
        finally:
            with self._cond:
                self._users -= 1
                if not self._users:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._closers += 1
            try:
                while self._users:
                    self._cond.wait()
            except BaseException:
                self._closers -= 1
                self._cond.notify_all()
                raise
        try:
            yield
        finally:
            with self._cond:
                self._closers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive_if_idle(self) -> Iterator[bool]:
        """``exclusive`` without waiting: False (nothing held) where a call is in flight or a
        close waits. For a thread that holds another gate: waiting there could deadlock."""
        with self._cond:
            idle = not self._users and not self._closers
            if idle:
                self._closers += 1
        if not idle:
            yield False
            return
        try:
            yield True
        finally:
            with self._cond:
                self._closers -= 1
                self._cond.notify_all()


# Open edge shards one store keeps: each holds a search thread pool, two files and ~37 MB
# resident (its vectors' chunk file is mapped at a fixed 32 MB however few points it holds), so
# a server that searched 30 collections kept 1.1 GB and 240 threads more, for its life. The least
# recently used beyond this are closed (their folder locks let go) and reopened on their next use.
MAX_OPEN_SHARDS = 8
# Threads of a shard's search pool (qdrant-edge's default: 8, even on 2 cores). A search here is
# one query; on a 1,000-point shard 1 or 2 threads search as fast as 8.
SEARCH_THREADS = 2

# How qdrant-edge's plain Exceptions say that a file could not be read or written.
_IO_SIGNS = ("IO Error", "os error", "No such file", "Permission denied", "Read-only file system")
_GONE_HINT = "the data folder deleted, moved or unmounted while in use?"
# The ones that say the disk under the folder went away (a drive pulled, a network share
# dropped: ``DISK_GONE_ERRNOS``), in the engine's words: an outage to wait out, not a folder
# to restore.
_DISK_GONE_SIGNS = ("Transport endpoint is not connected", "(os error 107)",
                    "Software caused connection abort", "(os error 103)", "Input/output error",
                    "(os error 5)", "Stale file handle", "(os error 116)", "No such device",
                    "(os error 19)")
# ENODEV where the folder still reads: a file system that cannot memory-map files (an SSHFS
# mount with direct_io, some SMB and FUSE mounts), which the store's files need.
_NO_MMAP_SIGNS = ("No such device", "(os error 19)", "code: 19")
# The ones of them that say the folder is there but cannot be written.
_NOT_WRITABLE_SIGNS = ("Permission denied", "Read-only file system")
# The ones that say its disk is full (ENOSPC, EDQUOT): a shard's load writes a small file even
# to be read, so on a full disk a search failed as "the vector store's files ... are gone or
# unreadable (the data folder deleted, moved or unmounted while in use?)", a bad request (exit
# 2), over data that was whole.
_FULL_SIGNS = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122")
# How they say that a file is there but its content cannot be read (garbled, cut short, edited
# by hand): a JSON config that does not parse, a version file, a WAL segment's header; a segment
# file cut short (to 0 bytes by a copy that ran out of room), met only once a search or a read
# reaches it: "vector 0 is not readable from .../vectors" (a dense vectors' chunk file),
# "Gridstore IO error: elements range 0..366 is out of bounds, file contains 0 elements" (a
# payload or sparse page file). They fell through to the plain StoreError, "edge shard ...
# searching it failed", a bad request (exit 2) that named no damage and no way back.
_DAMAGED_SIGNS = ("Failed to deserialize", "Can't parse", "InvalidData", "EOF while parsing",
                  "orrupt", "Illegal segment", "checksum", "is not readable from",
                  "is out of bounds, file contains")
# An absolute path in such a message (quoted or not).
_MESSAGE_PATH = re.compile(r"""(/[^\s"':]+)""")


class StoreClosedError(StoreError):
    """A call on an ``EdgeStore`` after its ``close()`` (a call of another thread in flight
    while its ``Facet`` closed): a closed store opens no shard, nor takes a folder's lock,
    again. Its facade says "this Facet is closed" (an ``InvalidRequestError``)."""


def _damaged(collection: str, folder: Path, text: str, what: str) -> StoreDamagedError:
    """A collection whose store files cannot be read, naming the file (the deepest path of the
    collection's folder the message names) and what its reader said of it."""
    inside = [p for p in _MESSAGE_PATH.findall(text) if p.startswith(str(folder))]
    file = max(inside, key=len) if inside else None
    why = text.rsplit(file, 1)[-1].lstrip('": ').strip() if file else text
    return StoreDamagedError(
        f"collection {collection!r}: the vector store's files cannot be read: "
        f"{file or folder} is damaged ({why or text}); {what} failed. {_damaged_hint(collection, folder)}",
        collection, file or str(folder))


def _damaged_hint(collection: str, folder: Path) -> str:
    import shlex

    return (f"Restore the folder {folder} from a backup, or delete the collection (facet delete "
            f"{shlex.quote(collection)} -y: its folder goes with it) and index it again")


class EdgeStore(VectorStore):
    """Qdrant edge shards, one folder per collection under ``root``.

    The shard itself does not report its vector configuration, so the named vectors and
    their sizes are kept beside it in ``facet_vectors.json`` (written atomically).
    """

    backend = "edge"
    _SIDE = "facet_vectors.json"
    _LEXICAL_SIDE = "facet_lexical.json"  # written when the shard keeps term vectors
    _INDEX_SIDE = "facet_payload_indexes.json"  # filtered payload fields and their kinds of value

    def __init__(self, root: Path | str, *, lock_wait_s: float = 3.0) -> None:
        import qdrant_edge

        self._q = qdrant_edge
        self.lock_wait_s = lock_wait_s
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._shards: dict[str, Any] = {}
        self.max_open_shards = MAX_OPEN_SHARDS
        # Collection -> when its shard was last used (a counter): the least recent is closed
        # first. Collections held open for a writer (``hold``, a write) are never closed so.
        self._last_use: dict[str, int] = {}
        self._uses = itertools.count(1)
        self._pinned: set[str] = set()
        # Named vectors per collection, read from the side file once while its shard is open
        # here: searches check the vector name on every call, and while this process holds the
        # folder no other can change it; forgotten when the shard is closed (``release``,
        # ``_close_unused``), after which another process may add a vector.
        self._sizes: dict[str, dict[str, int]] = {}
        # collection -> (its side file's mtime, None where there is none; its term definition,
        # None: none)
        self._lexical: dict[str, tuple[int | None, str | None]] = {}
        # collection -> {filtered payload path: kinds of value it holds} (``_INDEX_SIDE``), and
        # the lock that keeps an index's kind in step with the values written.
        self._indexed: dict[str, dict[str, set[str]]] = {}
        self._index_lock = threading.Lock()
        # Collections written since they were opened or last flushed: a release after reads
        # only (a count, searches) has nothing to flush (the engine's own close still rewrites
        # its segment headers, unchanged).
        self._written: set[str] = set()
        # A server's request threads and its job thread may open a shard at the same moment;
        # a second load of the same folder would fail on the folder's lock.
        self._open_lock = threading.Lock()
        # Lock order: a collection's gate, then the open lock (never the other way round).
        self._gates: dict[str, _ShardGate] = {}
        self._gates_lock = threading.Lock()
        # Set by ``close`` (under the open lock): no shard is opened, no folder lock taken, after.
        self._closed = False

    def _dir(self, collection: str) -> Path:
        return self.root / validate_name(collection)

    def _lock_path(self, collection: str) -> Path:
        return self.root / f"{validate_name(collection)}.lock"

    def _lock(self, collection: str, *, alone: bool = False) -> None:
        """Under the open lock: hold the collection's folder lock (once per open shard);
        StoreBusyError if taken (``alone``: by another store of this process too),
        StoreClosedError once the store is closed (a call of another
        thread in flight then opened the shard again, its lock held by a store nobody would
        close: the folder locked for the rest of the process)."""
        if self._closed:
            raise StoreClosedError(
                f"this Facet is closed: its vector store ({self.root}) was closed while a call "
                f"on collection {collection!r} was in flight; open another one (Facet.open(), "
                "Facet.for_serving())")
        _LOCKS.acquire(self._lock_path(collection), collection, self.lock_wait_s, alone=alone)

    def list_collections(self) -> list[str]:
        try:
            return sorted(p.name for p in self.root.iterdir() if (p / self._SIDE).is_file())
        except OSError as e:  # the data folder deleted or unmounted under a running process
            raise StoreError(f"cannot read the vector store's folder {self.root}: "
                             f"{e.strerror or e} ({_GONE_HINT})") from e

    def check_ready(self, *, timeout_s: float | None = None) -> None:
        """The store's folder writable (its lock files are written there on every open)."""
        _check_writable(self.root)

    def collection_exists(self, collection: str) -> bool:
        """Whether its side file is there. Raises StoreUnavailableError (``_unreadable``) where
        its folder cannot be looked into by this process (another user's, ``chmod 000``)."""
        folder = self._dir(collection)
        try:
            return (folder / self._SIDE).is_file()
        except OSError as e:  # not "absent" (is_file says False to that): refused
            raise _unreadable(collection, folder, e) from e

    def vector_sizes(self, collection: str) -> dict[str, int]:
        held = collection in self._shards  # else another process may change it: read it each time
        cached = self._sizes.get(collection)
        if cached is not None and held and self.collection_exists(collection):
            return dict(cached)
        self._require(collection)
        side = self._dir(collection) / self._SIDE
        try:
            sizes = {str(k): int(v) for k, v in json.loads(side.read_text()).items()}
        except OSError as e:  # the side file there, but not readable by this user
            raise _unreadable(collection, self._dir(collection), e) from e
        except (ValueError, AttributeError, TypeError) as e:  # not JSON, or not {name: size}
            raise self._damaged_side(collection, side, e) from e
        if held:
            self._sizes[collection] = sizes
        return dict(sizes)

    def _damaged_side(self, collection: str, side: Path, e: Exception) -> StoreDamagedError:
        """The error for a side file that is not what this Facet wrote (cut short by a power
        loss, garbled, edited by hand)."""
        return StoreDamagedError(
            f"collection {collection!r}: the vector store's files cannot be read: {side} is "
            f"damaged ({type(e).__name__}: {e}). {_damaged_hint(collection, self._dir(collection))}",
            collection, str(side))

    @staticmethod
    def _write_side(path: Path, text: str) -> None:
        """Write a side file whole (a temp file renamed over it); a folder that cannot be written
        (a read-only mount under a running server) is ``_unwritable``'s one line, not an
        OSError traceback (a search's payload index wrote one: a 500)."""
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
        except OSError as e:
            raise _unwritable(path.parent, e, path) from e

    def _write_sizes(self, collection: str, sizes: Mapping[str, int]) -> None:
        self._write_side(self._dir(collection) / self._SIDE, json.dumps(dict(sizes), sort_keys=True))
        self._sizes[collection] = {str(k): int(v) for k, v in sizes.items()}

    def _gate(self, collection: str) -> _ShardGate:
        with self._gates_lock:
            return self._gates.setdefault(collection, _ShardGate())

    @contextlib.contextmanager
    def _using(self, collection: str, what: str = "a call on its shard", *,
               write: bool = False) -> Iterator[Any]:
        """The collection's shard (opened if need be), not closed by another thread while the
        caller uses it (``write``: to change it, so it is flushed on release). What the binding
        raises in the caller's block (a plain ``Exception``) comes out as one ``StoreError``
        line (``_edge_error``); other errors pass unchanged."""
        with self._gate(collection).shared():
            shard = self._shard(collection)
            self._last_use[collection] = next(self._uses)
            if write:
                self._written.add(collection)
                self._pinned.add(collection)  # a writer's until release()
            try:
                yield shard
            except Exception as e:
                if type(e) is not Exception:  # ours, or Python's own (a bug): as they are
                    raise
                raise self._edge_error(collection, what, e) from e

    def _edge_error(self, collection: str, what: str, error: Exception) -> StoreError:
        """A qdrant-edge error as one StoreError line naming the collection's folder.

        The binding raises plain ``Exception``s; a running job whose data folder was deleted
        ended in two of them (the batch's flush, then the release), a 69-line traceback. An
        I/O failure (or the folder gone) says so, with what to check."""
        folder = self.root / collection
        text = " ".join(str(error).split()) or type(error).__name__
        unreachable = any(sign in text for sign in _DISK_GONE_SIGNS)
        try:
            gone = not folder.is_dir()
        except OSError as e:
            gone = True
            unreachable = unreachable or e.errno in DISK_GONE_ERRNOS
        try:  # (the store's own folder: a shard being created has none of its own yet)
            reachable = self.root.is_dir() and os.listdir(self.root) is not None
        except OSError:
            reachable = False
        if reachable and any(sign in text for sign in _NO_MMAP_SIGNS):
            return StoreUnavailableError(
                f"collection {collection!r}: {what} failed ({text}): the file system of the vector "
                f"store's folder {self.root} cannot memory-map files, which the embedded store "
                "needs (a network or FUSE mount such as SSHFS with direct_io); keep the data "
                "folder on a local disk, or the vectors in a Qdrant server (FACET_QDRANT_URL)")
        if unreachable and not reachable:
            return StoreUnavailableError(
                f"collection {collection!r}: the vector store's files in {folder} cannot be "
                f"reached ({what} failed: {text}): is the data folder's drive or network share "
                f"still mounted? {REMOUNT_AND_RERUN}")
        if not gone and any(sign in text for sign in _LIMIT_SIGNS):
            return StoreUnavailableError(f"collection {collection!r}: {what} failed ({text}); "
                                         f"{_limit_hint()}")
        if not gone and any(sign in text for sign in _DAMAGED_SIGNS):
            return _damaged(collection, folder, text, what)
        if not gone and any(sign in text for sign in _FULL_SIGNS):
            return self._full(collection, what, text)
        if not gone and any(sign in text for sign in _NOT_WRITABLE_SIGNS):
            # The folder there but not writable (a read-only mount under a running server):
            # nothing can be served from it until it is, as for its lock (``_unwritable``).
            return StoreUnavailableError(
                f"collection {collection!r}: the vector store's files in {folder} cannot be "
                f"written; {what} failed: {text}; make the data folder (FACET_DATA_DIR) writable "
                "again (mount it read-write, give its files back to this user), or point "
                "FACET_DATA_DIR at a writable copy")
        if gone or any(sign in text for sign in _IO_SIGNS):
            return StoreError(f"collection {collection!r}: the vector store's files in {folder} "
                              f"are gone or unreadable ({_GONE_HINT}); {what} failed: {text}")
        return StoreError(f"collection {collection!r}: edge shard {folder}: {what} failed: {text}")

    def _full(self, collection: str, what: str, text: str) -> StoreUnavailableError:
        """A collection's operation refused for its disk being full, with what there is to do;
        ``text``: the engine's words."""
        where = f"the vector store {self.root}"
        said = disk_full_text(self.root, where) or disk_full_words(where)
        return StoreUnavailableError(f"collection {collection!r}: {what} failed ({text}): {said}")

    def _shard(self, collection: str) -> Any:
        """Only inside ``_using``: the open shard, or open it."""
        shard = self._shards.get(collection)
        if shard is not None:
            return shard
        with self._open_lock:
            shard = self._shards.get(collection)
            if shard is not None:
                return shard
            self._require(collection)
            self._lock(collection)
            try:
                shard = self._load_making_room(collection)
            except Exception as e:  # the binding raises plain Exceptions
                _LOCKS.release(self._lock_path(collection))
                if "WouldBlock" in str(e):
                    # Its WAL is locked while this process holds Facet's lock file: by another
                    # store of this process, or by a process that takes no such file (a Facet
                    # from before the lock files, 2026-11-23, or another program), which was
                    # said as this process too.
                    raise StoreBusyError(
                        _open_in_this_process(collection) + "; or, where no other Facet of this "
                        "process has it, in another process that opened it without Facet's lock "
                        "file, such as an older Facet (from before 2026-11-23) still running on "
                        "this data folder: stop that one, then run this again", collection,
                        {"pid": os.getpid()}) from e
                if isinstance(e, StoreError):  # the side file's, already said
                    raise
                # This process holds the folder's lock (``_lock``): no other Facet has it open,
                # and the engine's own lock said nothing (WouldBlock above). What it cannot read
                # is a damaged collection (it was "another process may hold it", a 400); a folder
                # gone or not writable is said as for any other operation.
                error = self._edge_error(collection, "opening it", e)
                if type(error) is StoreError and not any(sign in str(e) for sign in _IO_SIGNS):
                    error = _damaged(collection, self._dir(collection),
                                     " ".join(str(e).split()) or type(e).__name__, "opening it")
                raise error from e
            self._shards[collection] = shard
            self._close_unused(collection)
        return shard

    def _load(self, collection: str) -> Any:
        """Load the collection's shard with ``SEARCH_THREADS`` search threads. Giving a config
        needs its vectors (from the side file; the engine refuses ones that differ from its
        segments, a shard's included, and keeps the rest, term vectors too); where it refuses
        them (a run killed between adding a vector and writing the side file), as it was."""
        q = self._q
        path = str(self._dir(collection))
        sizes = self.vector_sizes(collection)
        if sizes:
            try:
                return q.EdgeShard.load(path, q.EdgeConfig(
                    vectors={name: q.EdgeVectorParams(size=dim, distance=q.Distance.Cosine)
                             for name, dim in sizes.items()},
                    max_search_threads=SEARCH_THREADS))
            except Exception as e:
                if "incompatible" not in str(e):
                    raise
                logger.debug("edge shard %s loaded with its default search threads: %s", path, e)
        return q.EdgeShard.load(path)

    def _close_unused(self, keep: str, keep_open: int | None = None) -> int:
        """Under the open lock: close the least recently used shards beyond ``max_open_shards``
        (``keep_open``, where given) and let go of their folder locks, as ``release`` does.
        Never ``keep``, a collection held for a writer, or a shard another thread is using now
        (its next turn comes). Returns how many it closed."""
        over = len(self._shards) - (self.max_open_shards if keep_open is None else keep_open)
        closed = 0
        for name in sorted(self._shards, key=lambda n: self._last_use.get(n, 0)):
            if over <= 0:
                return closed
            if name == keep or name in self._pinned:
                continue
            with self._gate(name).exclusive_if_idle() as idle:
                if not idle:
                    continue
                shard = self._shards.pop(name)
                self._indexed.pop(name, None)  # another process may write to it meanwhile
                self._sizes.pop(name, None)  # a vector it adds meanwhile: read the side file again
                written = name in self._written
                self._written.discard(name)
                try:
                    if written:  # a search's new payload index
                        shard.flush()
                    shard.close()
                except Exception as e:  # the search that opened another must not fail for it
                    logger.warning("%s", self._edge_error(name, "closing it", e))
                finally:
                    _LOCKS.release(self._lock_path(name))
            over -= 1
            closed += 1
        return closed

    def _load_making_room(self, collection: str) -> Any:
        """``_load``, under the open lock; where a limit of this process (open files, address
        space) refused it and other shards are open and idle, those are closed and it is tried
        once more. The least recently used shards were closed only after an open succeeded, so
        a server that once hit its limit kept failing on the same collections after its load
        had gone."""
        try:
            return self._load(collection)
        except Exception as e:
            if not any(sign in str(e) for sign in _LIMIT_SIGNS):
                raise
            closed = self._close_unused(collection, keep_open=0)
            if not closed:
                raise
            logger.warning("collection %r could not be opened for a limit of this process (%s); "
                           "closed %d other open collection(s) and tried again", collection,
                           " ".join(str(e).split())[:200], closed)
        return self._load(collection)

    def ensure_collection(self, collection: str, vectors: Mapping[str, int], *,
                          lexical: bool = False) -> None:
        q = self._q
        for name in vectors:
            _vector_name(name)
        path = self._dir(collection)
        if not self.collection_exists(collection):
            validate_new_collection_name(collection)
            config = q.EdgeConfig(vectors={
                name: q.EdgeVectorParams(size=int(dim), distance=q.Distance.Cosine)
                for name, dim in vectors.items()},
                sparse_vectors={lex.LEXICAL_VECTOR: q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)}
                if lexical else None, max_search_threads=SEARCH_THREADS)
            created = False
            with self._open_lock:
                self._lock(collection, alone=True)  # (a folder another store has open: not re-made)
                if self.collection_exists(collection):  # created by the lock's last holder
                    _LOCKS.release(self._lock_path(collection))
                else:
                    if path.exists():  # a half-created shard from a killed run: start again
                        shutil.rmtree(path)
                    try:
                        shard = q.EdgeShard.create(str(path), config)
                        shard.update(q.UpdateOperation.create_field_index(
                            DOC_ID_FIELD, q.PayloadSchemaType.Keyword))
                    except Exception as e:
                        _LOCKS.release(self._lock_path(collection))
                        said = self._edge_error(collection, "creating its shard", e)
                        if isinstance(said, StoreUnavailableError):  # (a disk gone, no mmap)
                            raise said from e
                        raise StoreError(f"cannot create edge shard {path}: {e}") from e
                    self._shards[collection] = shard
                    self._written.add(collection)
                    self._pinned.add(collection)  # its writer's until release()
                    self._last_use[collection] = next(self._uses)
                    self._close_unused(collection)
                    if lexical:
                        self._write_lexical(collection)
                    self._write_sizes(collection, vectors)  # last: it marks the shard complete
                    self._replaced(collection)
                    created = True
            if created:
                return
        sizes = self.vector_sizes(collection)
        added = False
        for name, dim in vectors.items():
            if name in sizes:
                if sizes[name] != int(dim):
                    raise StoreError(
                        f"collection {collection!r} has vector {name!r} of size {sizes[name]}, "
                        f"not {dim}; use another collection for this embedder")
                continue
            with self._using(collection, "writing to it", write=True) as shard:
                shard.update(q.UpdateOperation.create_dense_vector(name, int(dim), q.Distance.Cosine))
            sizes[name] = int(dim)
            added = True
        if added:
            self._write_sizes(collection, sizes)
        if lexical and self.lexical_version(collection) != lex.LEXICAL_VERSION:
            self._add_lexical(collection)  # none yet, or an older definition's

    def lexical_version(self, collection: str) -> str | None:
        """The term definition the side file names (None: no term vectors), re-read whenever the
        file changed: another process's job may add term vectors to a collection this process
        listed or searched before (a long-running server kept saying it had no word index)."""
        path = self._dir(collection) / self._LEXICAL_SIDE
        stamp = self._lexical_stamp(path)
        cached = self._lexical.get(collection)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        self._require(collection)
        if stamp is None:
            # Looked at again once the collection is found: it may have been deleted and made
            # anew between the two looks, and a new collection's term vectors are recorded
            # before it is complete (``ensure_collection``). Read once only, a word search in
            # that moment said "keeps no term vectors" (a 400) of a collection made with them.
            stamp = self._lexical_stamp(path)
        version = None
        if stamp is not None:
            try:
                text = path.read_text()
            except FileNotFoundError:  # deleted since the look: as any call on it now says
                self._require(collection)
                return self.lexical_version(collection)  # (made anew meanwhile)
            try:
                version = json.loads(text).get("version")
            except (ValueError, AttributeError) as e:  # a traceback, and `facet collections` with it
                raise self._damaged_side(collection, path, e) from e
            if version not in lex.DEFINITIONS:
                raise StoreError(f"collection {collection!r} keeps term vectors of another "
                                 f"definition ({version!r}; this Facet reads "
                                 f"{', '.join(map(repr, lex.DEFINITIONS))}); index its sources "
                                 "into a new one")
        self._lexical[collection] = (stamp, version)
        return version

    @staticmethod
    def _lexical_stamp(path: Path) -> int | None:
        """The term vectors' side file's mtime, None where there is none."""
        try:
            return path.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def _write_lexical(self, collection: str) -> None:
        path = self._dir(collection) / self._LEXICAL_SIDE
        self._write_side(path, json.dumps({"version": lex.LEXICAL_VERSION}))
        self._lexical[collection] = (path.stat().st_mtime_ns, lex.LEXICAL_VERSION)

    def _add_lexical(self, collection: str) -> None:
        """Add the term vector of today's definition to an existing shard and fill it from the
        stored texts; then drop the term vector of an older definition, if it had one (the
        searches read it until the side file names the new one)."""
        q = self._q
        older = self.lexical_version(collection)
        if older is None:
            logger.info("adding the term vectors of lexical search to %s (from its stored texts)",
                        collection)
        else:
            logger.warning("rewriting the term vectors of %s's lexical search (%s -> %s, from its "
                           "stored texts)", collection, older, lex.LEXICAL_VERSION)
        with self._using(collection, "writing to it", write=True) as shard:
            shard.update(q.UpdateOperation.create_sparse_vector(lex.LEXICAL_VECTOR, q.Modifier.Idf))
        offset = None
        while True:
            with self._using(collection, "writing to it", write=True) as shard:
                records, offset = shard.scroll(q.ScrollRequest(offset=offset, limit=512,
                                                               with_payload=True))
                if records:
                    shard.update(q.UpdateOperation.update_vectors([
                        q.PointVectors(r.id, {lex.LEXICAL_VECTOR: self._text_terms(
                            r.payload, lex.LEXICAL_VERSION)})
                        for r in records]))
            if offset is None or not records:
                break
        with self._using(collection, "writing to it", write=True) as shard:
            shard.flush()
        self._write_lexical(collection)
        if older is not None and lex.vector_name(older) != lex.LEXICAL_VECTOR:
            with self._using(collection, "writing to it", write=True) as shard:
                shard.update(q.UpdateOperation.delete_vector_name(lex.vector_name(older)))
                shard.flush()

    def _terms(self, terms: tuple[list[int], list[float]]) -> Any:
        return self._q.SparseVector(terms[0], terms[1])

    def drop_collection(self, collection: str) -> bool:
        # The gate waits for calls in flight on the shard (a search during a delete returns its
        # hits; the next one finds the collection gone). Under the open lock: a reader in another
        # thread of this process (a UI or API request) would otherwise re-open the shard between
        # its close and the folder's removal, and its new WAL files made rmtree fail ("Directory
        # not empty: 'wal'", seen once in a UI test).
        with self._gate(collection).exclusive(), self._open_lock:
            self._sizes.pop(collection, None)
            self._lexical.pop(collection, None)
            self._indexed.pop(collection, None)
            self._written.discard(collection)
            self._pinned.discard(collection)
            shard = self._shards.pop(collection, None)
            path = self._dir(collection)
            if shard is not None or path.exists():
                self._replaced(collection)  # (before the folder goes: a reader's next look fails)
            if shard is not None:
                try:
                    shard.close()
                except Exception as e:  # its lock is released below all the same
                    _LOCKS.release(self._lock_path(collection))
                    raise self._edge_error(collection, "closing it", e) from e
            else:
                if not path.exists():
                    return False
                # Never delete a folder another process has open, nor another store of this one.
                self._lock(collection, alone=True)
            removed = False
            try:
                if not path.exists():
                    return False
                shutil.rmtree(path)
                removed = True
                return True
            finally:
                # Also when the folder was gone already (another deleter won first): this
                # process re-made the file to wait on it, and nothing else would remove it.
                _LOCKS.release(self._lock_path(collection), remove=removed or _folder_gone(path))

    def _filter(self, filters: Filters | None) -> Any:
        if not filters:
            return None
        q = self._q
        for key, value in filters.items():
            if any(isinstance(v, bool) for v in _values(value)):
                # qdrant-edge 0.9 reads a match on true as one on the integer 1 (bool is an int
                # to its binding), so such a filter would return the points whose field is 1
                # and miss those whose field is true.
                raise StoreError(
                    f"filter {key!r}: the edge store cannot match true/false (qdrant-edge 0.9 "
                    "reads them as the integers 1/0); store the field as a string or an "
                    "integer, or use a Qdrant server or FACET_VECTOR_BACKEND=local (one "
                    "process at a time; for a new collection: a switch indexes every source "
                    "again)",
                    param="filters")
        return q.Filter(must=[_condition(q.FieldCondition, lambda v: q.MatchValue(v),
                                         lambda vs: q.MatchAny(vs),
                                         lambda v: q.RangeFloat(gte=v, lte=v), q.Filter, key, value)
                              for key, value in filters.items()])

    def upsert(self, collection: str, points: Sequence[PointRecord]) -> None:
        if not points:
            return
        q = self._q
        batch = [q.Point(p.id, self._point_vectors(collection, p), dict(p.payload)) for p in points]
        with self._index_lock:  # an index changes kind before a value it would leave out is written
            fields = self._indexed_fields(collection)
            grown = {}
            for path, kinds in fields.items():
                segments = _path_segments(path) or []
                seen = set().union(*(_value_kinds(p.payload, segments) for p in points))
                if not seen <= kinds:
                    grown[path] = kinds | seen
            if grown:
                fields.update(grown)
                self._write_indexed(collection)
                for path, kinds in grown.items():
                    self._set_index(collection, path, _PAYLOAD_SCHEMAS.get(frozenset(kinds)))
            with self._using(collection, "writing to it", write=True) as shard:
                shard.update(q.UpdateOperation.upsert_points(batch))

    def _indexed_fields(self, collection: str) -> dict[str, set[str]]:
        """Under ``_index_lock``: the collection's filtered fields and the kinds of value they
        hold, read from its side file once per open, each field's index made to fit them (a
        run killed between the side file's write and the index's change left them apart)."""
        fields = self._indexed.get(collection)
        if fields is None:
            path = self._dir(collection) / self._INDEX_SIDE
            try:
                data = json.loads(path.read_text()) if path.is_file() else {}
                # A field no point held (a filtered typo, recorded by an older Facet) has no
                # index: its slot is free again.
                fields = {str(k): set(v) for k, v in data.items() if v}
            except (ValueError, AttributeError, TypeError) as e:
                # Only a record of which fields have an index, made again as fields are
                # filtered and written: a damaged one (a power loss cuts a file short) failed
                # every filtered search and index run on a traceback.
                logger.warning("collection %r: %s is damaged (%s: %s); its payload indexes are "
                               "made again as fields are filtered", collection, path,
                               type(e).__name__, e)
                fields = {}
            for key, kinds in fields.items():
                self._set_index(collection, key, _PAYLOAD_SCHEMAS.get(frozenset(kinds)))
            self._indexed[collection] = fields
        return fields

    def _write_indexed(self, collection: str) -> None:
        self._write_side(self._dir(collection) / self._INDEX_SIDE,
                         json.dumps({k: sorted(v) for k, v in self._indexed[collection].items()},
                                    sort_keys=True))

    def _set_index(self, collection: str, path: str, schema: str | None) -> None:
        """Give payload field ``path`` an index of ``schema`` (a ``PayloadSchemaType`` name), or
        none."""
        q = self._q
        want = getattr(q.PayloadSchemaType, schema) if schema else None
        with self._using(collection, "indexing a payload field") as shard:
            current = shard.info().payload_schema.get(path)
            if (current.data_type if current is not None else None) == want:
                return
            self._written.add(collection)
            if current is not None:
                shard.update(q.UpdateOperation.delete_field_index(path))
            if want is not None:
                shard.update(q.UpdateOperation.create_field_index(path, want))

    def _index_filtered(self, collection: str, filters: Filters | None, found: bool) -> None:
        """After a filtered search that ``found`` something, index each field ``filters`` name
        that has no index yet (``_PAYLOAD_SCHEMAS``): the first such search of a field reads its
        values once (0.2 s at 20,000 points); the index is kept in the shard, the field's kinds
        of value in ``_INDEX_SIDE``. A search that found nothing indexes nothing: its filter may
        name a key no point holds (a typo), which must not take a slot for good."""
        known = self._indexed.get(collection)
        if not found or not filters or (
                known is not None and all(k == DOC_ID_FIELD or k in known for k in filters)):
            return
        with self._index_lock:
            fields = self._indexed_fields(collection)
            for path in filters:
                segments = _path_segments(path)
                if (path == DOC_ID_FIELD or path in fields or segments is None
                        or len(fields) >= _MAX_INDEXED_FIELDS):
                    continue
                kinds = self._scan_kinds(collection, path, segments)
                if not kinds:  # deleted since the search found it
                    continue
                fields[path] = kinds
                try:
                    self._write_indexed(collection)  # first: a field in it gets its index on the next open
                except StoreError:  # not writable: every such search says so, not the first only
                    del fields[path]
                    raise
                self._set_index(collection, path, _PAYLOAD_SCHEMAS.get(frozenset(fields[path])))

    def _scan_kinds(self, collection: str, path: str, segments: Sequence[str]) -> set[str]:
        """The kinds of value field ``path`` holds across the collection."""
        q = self._q
        kinds: set[str] = set()
        offset = None
        while True:
            with self._using(collection, "reading it") as shard:
                records, offset = shard.scroll(q.ScrollRequest(
                    offset=offset, limit=1000, with_payload=q.PayloadSelector.Include([path])))
            for r in records:
                kinds |= _value_kinds(r.payload, segments)
            if offset is None or not records:
                return kinds

    def update_vectors(self, collection: str, vector_name: str,
                       ids: Sequence[str], vectors: np.ndarray) -> None:
        if not len(ids):
            return
        q = self._q
        ops = [q.PointVectors(pid, {vector_name: _as_list(vec)}) for pid, vec in zip(ids, vectors,
                                                                                  strict=True)]
        with self._using(collection, "writing to it", write=True) as shard:
            shard.update(q.UpdateOperation.update_vectors(ops))

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if ids:
            with self._using(collection, "writing to it", write=True) as shard:
                shard.update(self._q.UpdateOperation.delete_points(list(ids)))

    def delete_documents(self, collection: str, doc_ids: Sequence[str]) -> None:
        if doc_ids:
            with self._using(collection, "writing to it", write=True) as shard:
                shard.update(self._q.UpdateOperation.delete_points_by_filter(
                    self._filter({DOC_ID_FIELD: list(doc_ids)})))

    def search(self, collection: str, vector_name: str, vector: Sequence[float] | np.ndarray,
               *, limit: int, filters: Filters | None = None, exact: bool = False) -> list[Hit]:
        return self._search(collection, vector_name, vector, limit=limit, filters=filters,
                            exact=exact, with_payload=True)

    def _search(self, collection: str, vector_name: str, vector: Sequence[float] | np.ndarray,
                *, limit: int, filters: Filters | None, exact: bool, with_payload: bool) -> list[Hit]:
        q = self._q
        self._check_vector(collection, vector_name)
        query = q.Query.Nearest(_as_list(vector), using=vector_name)

        def fetch(n: int, payload: bool) -> Sequence[Any]:
            request = q.SearchRequest(
                query=query, limit=n, filter=self._filter(filters), with_payload=payload,
                params=q.SearchParams(exact=True) if exact else None)
            with self._using(collection, "searching it") as shard:
                return list(shard.search(request))

        top = _fetch_ranked(fetch, int(limit), with_payload,  # ties ranked (``_TIE_MARGIN``)
                            functools.partial(self._payloads, collection))
        self._index_filtered(collection, filters, bool(top))
        return top

    def search_lexical(self, collection: str, text: str, *, limit: int,
                       filters: Filters | None = None) -> list[Hit]:
        return self._search_lexical(collection, text, limit=limit, filters=filters,
                                    with_payload=True)

    def _search_lexical(self, collection: str, text: str, *, limit: int,
                        filters: Filters | None, with_payload: bool) -> list[Hit]:
        q = self._q
        using, terms = self._query_terms(collection, text)
        def fetch(n: int, payload: bool) -> Sequence[Any]:
            request = q.QueryRequest(limit=n, query=q.Query.Nearest(terms, using=using),
                                     filter=self._filter(filters), with_payload=payload)
            with self._using(collection, "searching it") as shard:
                return list(shard.query(request))

        top = _fetch_ranked(fetch, int(limit), with_payload,
                            functools.partial(self._payloads, collection))
        self._index_filtered(collection, filters, bool(top))
        return top

    def count(self, collection: str, filters: Filters | None = None) -> int:
        with self._using(collection, "counting its points") as shard:
            n = int(shard.count(self._q.CountRequest(exact=True, filter=self._filter(filters))))
        self._index_filtered(collection, filters, n > 0)
        return n

    def retrieve(self, collection: str, ids: Sequence[str],
                 with_vectors: bool = False) -> list[tuple[Hit, dict[str, list[float]]]]:
        with self._using(collection, "reading it") as shard:
            records = shard.retrieve(list(ids), with_payload=True, with_vector=with_vectors)
        return _retrieved(records)

    def _scroll(self, collection: str, limit: int, filters: Filters | None, with_payload: bool,
                vectors: bool | list[str]) -> list[Scrolled]:
        q = self._q
        read: list[Scrolled] = []
        offset = None
        while len(read) < limit:
            with self._using(collection, "reading it") as shard:
                records, offset = shard.scroll(q.ScrollRequest(
                    offset=offset, limit=min(1000, limit - len(read)), filter=self._filter(filters),
                    with_payload=with_payload, with_vector=vectors))
            read.extend(_retrieved(records))
            if offset is None or not records:
                break
        self._index_filtered(collection, filters, bool(read))
        return read

    def optimize(self, collection: str) -> None:
        with self._using(collection, "optimizing it", write=True) as shard:
            shard.optimize()

    def flush(self) -> None:
        for name in list(self._shards):
            with self._gate(name).shared():
                shard = self._shards.get(name)  # None if dropped or released meanwhile
                if shard is not None and name in self._written:
                    self._written.discard(name)  # first: a write during the flush marks it again
                    try:
                        shard.flush()
                    except Exception as e:
                        self._written.add(name)
                        raise self._edge_error(name, "writing it to disk (flush)", e) from e

    def hold(self, collection: str) -> None:
        with self._using(collection):
            self._pinned.add(collection)  # opened (its lock taken) and kept open until release / close

    def is_open(self, collection: str) -> bool:
        return collection in self._shards

    def check_free(self, collection: str, *, wait_s: float | None = None) -> None:
        """The folder lock taken as opening the shard first takes it (waiting ``wait_s``, else
        ``lock_wait_s``) and let go at once, the shard not loaded: held no longer than a reader
        holds it now. Nothing for a collection this process has open."""
        if collection in self._shards:
            return
        _LOCKS.acquire(self._lock_path(collection), collection,
                       self.lock_wait_s if wait_s is None else wait_s)
        # A collection without a folder (deleted while this waited, or not made yet) keeps no
        # lock file of this check's making.
        _LOCKS.release(self._lock_path(collection), remove=_folder_gone(self._dir(collection)))

    def release(self, collection: str) -> None:
        """Close one collection's shard and let other processes open it (its folder lock is
        let go even when the close fails).

        Raises:
            StoreError: the shard could not be written or closed (its files gone?). Not when
                called while another error is being handled (a ``finally`` on an error's way
                out, as a job's end): that error is what went wrong, this one is logged.
        """
        handling = sys.exc_info()[1]
        failure: StoreError | None = None
        with self._gate(collection).exclusive(), self._open_lock:
            self._indexed.pop(collection, None)  # another process may write to it meanwhile
            self._sizes.pop(collection, None)  # and add a vector: its side file is read again
            self._pinned.discard(collection)
            shard = self._shards.pop(collection, None)
            if shard is None:
                return
            written = collection in self._written
            self._written.discard(collection)
            try:
                # Closed even when the flush failed; no flush after reads only (nothing to write).
                for step in (shard.flush, shard.close) if written else (shard.close,):
                    try:
                        step()
                    except Exception as e:
                        if failure is None:  # the first one says what went wrong
                            failure = self._edge_error(collection, "closing it", e)
                            failure.__cause__ = e
            finally:
                _LOCKS.release(self._lock_path(collection))
        if failure is None:
            return
        if handling is None:
            raise failure
        # Logged, not raised: raised from a ``finally`` it would replace the error on its way
        # out. A store error on its way out says the same already (debug only, then).
        logger.log(logging.DEBUG if isinstance(handling, StoreError) else logging.WARNING,
                   "%s (not raised: it came while handling %s)", failure,
                   type(handling).__name__)

    def close(self) -> None:
        # Every gate, then the open lock, like drop_collection: a reader thread opening another
        # collection mid-close would otherwise add a shard after the swap below, which the close
        # would forget open, its folder lock held until the process exits.
        with contextlib.ExitStack() as gates:
            with self._gates_lock:
                every = [self._gates[name] for name in sorted(self._gates)]
            for gate in every:  # calls in flight return first; later ones wait, then are refused
                gates.enter_context(gate.exclusive())
            gates.enter_context(self._open_lock)
            # Final: a call that waited for the close (or comes later) opens no shard again
            # (``_lock`` refuses it); it held the folder's lock in a store nobody would close.
            self._closed = True
            shards, self._shards = self._shards, {}
            written, self._written = self._written, set()
            self._pinned.clear()
            self._indexed.clear()
            failed: list[tuple[str, Exception]] = []
            for name, shard in shards.items():
                try:
                    if name in written:  # after reads only there is nothing to flush
                        shard.flush()
                    shard.close()
                except Exception as e:  # one shard failing must not leave the others open
                    failed.append((name, e))
                finally:
                    _LOCKS.release(self._lock_path(name))
        if failed:
            name, error = failed[0]
            raise StoreError(f"cannot close edge shard {self._dir(name)}: {error}") from error


# ------------------------------------------------------------------ qdrant-client


# How long a server (FACET_QDRANT_URL) is given to take a connection before a search, an index
# run or a listing says it is out of reach: qdrant-client waits 30 s a request, and search and
# index loaded their model (10 s and more) before their first request.
REACH_TIMEOUT_S = 2.0
# How long a server that took a connection is trusted to be there: a busy server is not
# connected to once more for each request of each search.
REACH_TTL_S = 5.0
QDRANT_PORT = 6333  # qdrant-client's port for a URL that names none
_UNREACHABLE_HINT = "start it (docker compose up -d qdrant) or check FACET_QDRANT_URL (unset it for the embedded store)"


# What a Qdrant server's create_collection may be given beyond the vectors (FACET_QDRANT_SHARDS,
# FACET_QDRANT_REPLICATION_FACTOR, FACET_QDRANT_WRITE_CONSISTENCY: ``open_store``'s ``layout``).
_LAYOUT_KEYS = ("shard_number", "replication_factor", "write_consistency_factor")


def _checked_layout(layout: Mapping[str, int]) -> dict[str, int]:
    """``layout`` as given, checked.

    Raises:
        StoreError: a key other than ``shard_number``, ``replication_factor`` or
            ``write_consistency_factor``, or a value that is not a whole number >= 1.
    """
    for key, value in layout.items():
        if key not in _LAYOUT_KEYS:
            raise StoreError(f"unknown collection layout {key!r}; use {', '.join(_LAYOUT_KEYS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise StoreError(f"collection layout {key} must be a whole number, 1 or more, got {value!r}")
    return dict(layout)


# qdrant-client warns "Api key is used with an insecure connection." (a UserWarning, 3 log
# lines) for each client made with an API key and an http:// URL: twice per command (the store's
# client and its reach probe's). Said once per process instead, naming the server.
_INSECURE_KEY = "Api key is used with an insecure connection"
_said_insecure: set[str] = set()
_said_insecure_lock = threading.Lock()


def _server_client(url: str, api_key: str | None, timeout: int) -> Any:
    """A ``QdrantClient`` of a server, its warning of a key sent over http said in one log line,
    once per process (``_INSECURE_KEY``); any other warning of it is left as it is."""
    import warnings

    from qdrant_client import QdrantClient

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)
    for warning in caught:
        if str(warning.message).startswith(_INSECURE_KEY):
            _say_insecure_key(url)
        else:  # not ours to hide
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno, source=warning.source)
    return client


def _say_insecure_key(url: str) -> None:
    import urllib.parse

    parts = urllib.parse.urlsplit(url if "://" in url else f"//{url}")
    try:
        where = f"{parts.hostname}:{parts.port or QDRANT_PORT}"
    except ValueError:  # a port that is no number (the client refuses it anyway)
        where = str(parts.hostname)
    with _said_insecure_lock:
        if where in _said_insecure:
            return
        _said_insecure.add(where)
    logger.info("FACET_QDRANT_API_KEY goes in clear (http, not https) to the Qdrant server at %s: "
                "fine on a private network (docker compose's own); otherwise give Qdrant TLS and "
                "an https:// FACET_QDRANT_URL", where)


def _connect_target(url: str) -> tuple[str, int] | None:
    """The host and port qdrant-client connects to for ``url`` (a scheme optional, "qdrant:6333"
    too; port 6333 where it names none); None where a TCP connect cannot tell whether it is
    reached: a URL this does not read, or a proxy in between (HTTP_PROXY and the like, which
    qdrant-client's httpx goes through)."""
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url if "://" in url else f"//{url}")
    try:
        host, port = parts.hostname, parts.port or QDRANT_PORT
    except ValueError:  # a port that is no number
        return None
    if not host or parts.scheme not in ("", "http", "https"):
        return None
    proxies = urllib.request.getproxies()
    if (proxies.get(parts.scheme or "http") or proxies.get("all")) and not urllib.request.proxy_bypass(host):
        return None
    return host, port


def _client_error(store: QdrantClientStore, error: Exception) -> StoreError:
    """A qdrant-client / transport error as one StoreError line that says what to check."""
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    # Never the URL's password or API key (a message reaches HTTP bodies and log lines).
    where = f"Qdrant at {masked_url(store.url)}" if store.url else f"the {store.backend} store"
    if isinstance(error, UnexpectedResponse):
        if store.url and "html" in error.headers.get("content-type", ""):
            return _not_qdrant(store.url, error)  # Qdrant answers JSON, or a line of text
        detail = error.content.decode("utf-8", "replace")[:300] if error.content else ""
        return StoreError(mask_secrets(f"{where} refused the request ({error.status_code} "
                                       f"{error.reason_phrase}): {' '.join(detail.split())}"))
    if isinstance(error, ResponseHandlingException | ConnectionError | TimeoutError | OSError) \
            or type(error).__module__.startswith(("httpx", "httpcore", "grpc")):
        cause = error.source if isinstance(error, ResponseHandlingException) else error
        # (A server's connection, which may come back; a local store's OSError is its disk.)
        kind = StoreUnreachableError if store.url else StoreUnavailableError
        return kind(mask_secrets(
            f"cannot reach {where}: {type(cause).__name__}: {cause}; {_UNREACHABLE_HINT}"))
    return StoreError(mask_secrets(f"{where} failed: {type(error).__name__}: {error}"))


def _not_qdrant(url: str | None, error: Any) -> StoreUnavailableError:
    """Another server's answer (``UnexpectedResponse``): a web server's page of 404 or 501 said
    "refused the request" over many lines of HTML, or (a listing) "no collections yet"."""
    return StoreUnavailableError(
        f"Qdrant at {masked_url(url or '')} answered but is not a Qdrant server? (HTTP {error.status_code} "
        f"{error.reason_phrase}); check FACET_QDRANT_URL (unset it for the embedded store)")


def _json_body(content: bytes | None) -> bool:
    try:
        json.loads(content or b"")
    except ValueError:
        return False
    return True


def _dropped_connection(error: Exception) -> bool:
    """A request lost on a connection that was open (reset, or closed without a reply): the
    server may never have seen it, and a fresh connection may well succeed. Not a connection
    refused or never made (nothing listens there: sent again, it was refused again, after a
    warning that the server had dropped it), nor a timeout or a reply."""
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException

    cause = error.source if isinstance(error, ResponseHandlingException) else error
    return isinstance(cause, httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError)


# A read that lost its connection is sent once more (on another connection) before the error
# reaches the caller: a pooled keep-alive connection the server (or a proxy) has closed, or one
# reset under load, fails the request sent on it though the server is fine (seen once in a fresh-
# clone test run: twenty concurrent searches, "ReadError: Bad file descriptor"). Writes are not
# resent here: a worker's job retries the whole chunk (worker.tasks, is_transient).
_READ_RETRY_DELAY_S = 0.1


def _translated(method: Any, *, retry_dropped: bool = False) -> Any:
    @functools.wraps(method)
    def wrapper(self: QdrantClientStore, *args: Any, **kwargs: Any) -> Any:
        # A server nothing answers on is said in REACH_TIMEOUT_S before the first request, not
        # after the client's 30 s (a `facet cluster` asked it first whether the collection exists).
        self.check_reachable()
        try:
            try:
                return method(self, *args, **kwargs)
            except Exception as e:
                if not (retry_dropped and self.url and _dropped_connection(e)):
                    raise
                logger.warning("Qdrant at %s dropped a %s request (%s: %s); sending it again",
                               masked_url(self.url), method.__name__, type(e).__name__,
                               mask_secrets(str(e)))
                time.sleep(_READ_RETRY_DELAY_S)
                return method(self, *args, **kwargs)
        except StoreError:
            raise
        except (ValueError, TypeError) as e:
            # qdrant-client's own argument checks ("Collection x not found" in local mode).
            if "not found" in str(e).lower():
                raise CollectionNotFoundError(str(e)) from e
            raise StoreError(mask_secrets(str(e))) from e
        except Exception as e:
            raise _client_error(self, e) from e

    return wrapper


class QdrantClientStore(VectorStore):
    """``qdrant-client``: a server (``url``) or local mode (``path`` folder or ``":memory:"``).

    Every public method lets only ``StoreError`` out (``StoreUnavailableError`` when the
    server cannot be reached), with the URL and what to check.
    """

    LEXICAL_TTL_S = 10.0  # how long has_lexical's answer is trusted (another process may re-create)
    _clock = staticmethod(time.monotonic)

    def __init__(self, *, url: str | None = None, path: Path | str | None = None,
                 api_key: str | None = None, layout: Mapping[str, int] | None = None) -> None:
        """``layout``: the ``shard_number``, ``replication_factor`` and
        ``write_consistency_factor`` a server gives the collections this store creates (only
        those given are sent: Qdrant's defaults otherwise). Collections already there keep
        theirs: Qdrant sets them at creation. Local mode has no shards and ignores it."""
        from qdrant_client import QdrantClient, models

        self._m = models
        self.url = url
        self._api_key = api_key
        self._layout = _checked_layout(layout or {})
        self._reached_at: float | None = None  # when the server last took a connection (check_reachable)
        self._probe: tuple[int, Any] | None = None  # (timeout, client) of check_reachable's request
        self._folder: Path | None = None  # local mode's folder (``check_ready``)
        if url:
            self.backend = "server"
            try:
                # No version probe at start-up: it would print a warning, not fail, when the
                # server is down; the first request says so in one line instead.
                self._client = _server_client(url, api_key, 30)
            except Exception as e:
                raise StoreError(mask_secrets(f"bad FACET_QDRANT_URL {masked_url(url)!r}: {e}")) from e
        elif path is not None:
            self.backend = "local"
            if str(path) == ":memory:":
                self._client = QdrantClient(location=":memory:")
            else:
                Path(path).mkdir(parents=True, exist_ok=True)
                self._folder = Path(path)
                try:
                    self._client = QdrantClient(path=str(path))
                except RuntimeError as e:
                    raise StoreBusyError(
                        f"cannot open the qdrant local storage {path}: it is open in another "
                        "process (FACET_VECTOR_BACKEND=local allows one process at a time, "
                        "every facet command included); wait for it, serve every reader and "
                        "writer from one `facet serve`, or use the edge store (the default: "
                        "unset FACET_VECTOR_BACKEND) for concurrent use", "*") from e
        else:
            raise StoreError("QdrantClientStore needs a server url or a local path (or ':memory:')")
        # collection -> (keeps term vectors, when read): another process may drop and re-create
        # a collection with or without them, so an answer is trusted for LEXICAL_TTL_S only.
        self._lexical: dict[str, tuple[str | None, float]] = {}
        self._said_older: set[str] = set()  # collections warned of an older term definition
        # collection -> filtered fields whose payload index was seen to or asked for (a server's
        # only; once per field per process, ``_index_filtered``).
        self._index_tried: dict[str, set[str]] = {}
        self._index_lock = threading.Lock()

    def list_collections(self) -> list[str]:
        return sorted(c.name for c in self._client.get_collections().collections)

    def check_reachable(self, *, timeout_s: float | None = None, ask: bool = False) -> None:
        """One TCP connect to the server, closed at once (no request sent), of ``timeout_s`` at
        most (default ``REACH_TIMEOUT_S``); skipped for ``REACH_TTL_S`` after one succeeded. A
        failure is never remembered: the next call connects again. ``ask`` (a listing, which
        sends nothing else where no collection is recorded) connects in any case and then sends
        one request, so that another kind of server there (a web server answering a page) is
        said too; a server too slow to answer it within ``timeout_s`` is not said to be down.
        Until a check of this store has succeeded, each asks as well, ``ask`` or not: `facet index`
        at a web server loaded its model (10 s and more) before its first request was answered
        404, and one request per store, not per call, says it first.

        Raises:
            StoreUnavailableError: nothing takes the connection (refused, no such host, no
                answer), or what answered is no Qdrant server.
            StoreError: the server refused the request (a wrong API key).
        """
        if not self.url:
            return
        timeout_s = REACH_TIMEOUT_S if timeout_s is None else timeout_s
        reached = self._reached_at
        if not ask and reached is not None and self._clock() - reached < REACH_TTL_S:
            return
        target = _connect_target(self.url)
        if target is not None:
            try:
                socket.create_connection(target, timeout=timeout_s).close()
            except OSError as e:  # refused, no such host, no answer (TimeoutError)
                why = f"no answer within {timeout_s:g} s" if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}"
                raise StoreUnreachableError(mask_secrets(
                    f"cannot reach Qdrant at {masked_url(self.url)}: {why}; {_UNREACHABLE_HINT}")) from e
        # Through a proxy a connect to the server says nothing; before a first success, the
        # connect does not tell Qdrant from a web server on its port.
        if ask or target is None or reached is None:
            self._ask(timeout_s)
        self._reached_at = self._clock()

    def check_ready(self, *, timeout_s: float | None = None) -> None:
        """A server: ``check_reachable``'s connect (asking it once, on the first check); local
        mode: its folder writable."""
        if self._folder is not None:
            _check_writable(self._folder)
        self.check_reachable(timeout_s=timeout_s)

    def _ask(self, timeout_s: float) -> None:
        """Send the server the request of ``list_collections``, on a client of its own that waits
        ``timeout_s`` (the store's waits 30 s)."""
        import httpx
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        timeout = max(1, math.ceil(timeout_s))  # qdrant-client takes whole seconds
        with self._index_lock:
            if self._probe is None or self._probe[0] != timeout:
                self._probe = (timeout, _server_client(self.url or "", self._api_key, timeout))
            client = self._probe[1]
        try:
            client.get_collections()
        except UnexpectedResponse as e:
            if e.status_code in (401, 403) or _json_body(e.content):
                raise _client_error(self, e) from e  # Qdrant's refusal (a wrong API key)
            # Qdrant answers the list of collections, and its errors, in JSON.
            raise _not_qdrant(self.url, e) from e
        except ResponseHandlingException as e:
            if isinstance(e.source, httpx.TimeoutException):
                return  # it took the connection: busy, maybe; its requests wait their 30 s
            if isinstance(e.source, httpx.TransportError):
                raise _client_error(self, e) from e
            # Answered 200 with something that is not Qdrant's list of collections.
            raise self._answered_200(e) from e
        except ValueError as e:  # a 200 page that is not JSON (JSONDecodeError), or not its shape
            raise self._answered_200(e) from e
        except Exception as e:
            raise _client_error(self, e) from e

    def _answered_200(self, e: BaseException) -> StoreUnavailableError:
        # A web server answering every path with a page was "failed: JSONDecodeError: Expecting
        # value: line 1 column 1 (char 0)".
        return StoreUnavailableError(
            f"Qdrant at {masked_url(self.url or '')} answered but is not a Qdrant server? (HTTP 200, not Qdrant's "
            f"answer: {type(e).__name__}); check FACET_QDRANT_URL (unset it for the embedded store)")

    def check_free(self, collection: str, *, wait_s: float | None = None) -> None:
        """A server locks no collection per process; whether it is there at all is told now,
        before a caller loads a model for it (``refuse_if_busy``)."""
        self.check_reachable()

    def collection_exists(self, collection: str) -> bool:
        return bool(self._client.collection_exists(validate_name(collection)))

    def vector_sizes(self, collection: str) -> dict[str, int]:
        self._require(collection)
        vectors = self._client.get_collection(collection).config.params.vectors
        if not isinstance(vectors, dict):
            raise StoreError(f"collection {collection!r} has an unnamed vector; Facet collections "
                             "use one named vector per embedder")
        return {name: int(p.size) for name, p in vectors.items()}

    def ensure_collection(self, collection: str, vectors: Mapping[str, int], *,
                          lexical: bool = False) -> None:
        m = self._m
        for name in vectors:
            _vector_name(name)
        if not self.collection_exists(collection):
            validate_new_collection_name(collection)  # (as the edge store's: one rule for names)
            from qdrant_client.http.exceptions import UnexpectedResponse

            # Shards and replicas are a server's (local mode has none): only what is set is
            # sent, Qdrant's defaults otherwise.
            layout = self._layout if self.backend == "server" else {}
            try:
                self._client.create_collection(collection, vectors_config={
                    name: m.VectorParams(size=int(dim), distance=m.Distance.COSINE)
                    for name, dim in vectors.items()},
                    sparse_vectors_config={lex.LEXICAL_VECTOR: m.SparseVectorParams(
                        modifier=m.Modifier.IDF)} if lexical else None, **layout)
                self._lexical.pop(collection, None)
                self._index_tried.pop(collection, None)
                self._replaced(collection)
                if self.backend == "server":  # local mode has no payload indexes
                    self._client.create_payload_index(collection, DOC_ID_FIELD,
                                                      m.PayloadSchemaType.KEYWORD)
                return
            except UnexpectedResponse as e:  # created by another process a moment ago
                if e.status_code != 409:
                    raise
            except ValueError as e:
                if "already exists" not in str(e):
                    raise
        version = self.lexical_version(collection) if lexical else None
        if version not in (None, lex.LEXICAL_VERSION) and collection not in self._said_older:
            self._said_older.add(collection)
            logger.warning("%s", self.older_lexical(collection))  # what a search's note says
        sizes = self.vector_sizes(collection)
        for name, dim in vectors.items():
            if name not in sizes:
                raise StoreError(
                    f"collection {collection!r} has no vector {name!r} and the {self.backend} "
                    "backend cannot add one to an existing collection; index this embedder "
                    "into a new collection, or use the edge backend (FACET_VECTOR_BACKEND=edge)")
            if sizes[name] != int(dim):
                raise StoreError(f"collection {collection!r} has vector {name!r} of size "
                                 f"{sizes[name]}, not {dim}; use another collection")

    def lexical_version(self, collection: str) -> str | None:
        """Read from the server at most once per ``LEXICAL_TTL_S`` per collection (auto mode asks on
        every search), so a collection another process re-created is seen within that time. The
        sparse vector's name says which definition wrote it (a collection created before the
        multilingual one keeps ``bm25``: this backend cannot add a vector to rewrite it)."""
        now = self._clock()
        hit = self._lexical.get(collection)
        if hit is not None and now - hit[1] < self.LEXICAL_TTL_S:
            return hit[0]
        self._require(collection)
        sparse = self._client.get_collection(collection).config.params.sparse_vectors or {}
        versions = [v for v in map(lex.version_of_vector, sparse) if v is not None]
        version = (lex.LEXICAL_VERSION if lex.LEXICAL_VERSION in versions
                   else versions[0] if versions else None)
        self._lexical[collection] = (version, now)
        return version

    def drop_collection(self, collection: str) -> bool:
        self._lexical.pop(collection, None)
        self._index_tried.pop(collection, None)
        if not self.collection_exists(collection):
            return False
        self._replaced(collection)
        self._client.delete_collection(collection)
        return True

    def _terms(self, terms: tuple[list[int], list[float]]) -> Any:
        return self._m.SparseVector(indices=terms[0], values=terms[1])

    def _index_filtered(self, collection: str, filters: Filters | None, found: bool) -> None:
        """After a filtered search on a server that ``found`` something, ask for a payload index
        of each field ``filters`` name that has none (``_SERVER_SCHEMAS``, by the filter's
        values; at most ``_MAX_INDEXED_FIELDS``): without one, a filtered search reads the
        payload of every point. A search that found nothing asks for none (its key may be a
        typo no point holds). The server builds the index in the background (``wait=False``);
        a field is tried once per process, and a failure is logged, never raised: the search
        has its results."""
        if not found or not filters or self.backend != "server":
            return
        with self._index_lock:
            tried = self._index_tried.setdefault(collection, set())
            new = [k for k in filters if k != DOC_ID_FIELD and k not in tried]
            tried.update(new)
        if not new:
            return
        m = self._m
        try:
            indexed = set(self._client.get_collection(collection).payload_schema or {})
            for key in new:
                schema = _SERVER_SCHEMAS.get(frozenset(
                    "bool" if isinstance(v, bool) else type(v).__name__ for v in _values(filters[key])))
                if key in indexed or schema is None or len(indexed - {DOC_ID_FIELD}) >= _MAX_INDEXED_FIELDS:
                    continue  # an index of another kind (another filter's, or a person's) is kept
                self._client.create_payload_index(collection, key, getattr(m.PayloadSchemaType, schema),
                                                  wait=False)
                indexed.add(key)
        except Exception as e:
            logger.debug("Qdrant at %s: no payload index for filter fields %s of %r: %s: %s",
                         masked_url(self.url or ""), new, collection, type(e).__name__,
                         mask_secrets(str(e)))

    def _filter(self, filters: Filters | None) -> Any:
        if not filters:
            return None
        m = self._m
        return m.Filter(must=[_condition(m.FieldCondition, lambda v: m.MatchValue(value=v),
                                         lambda vs: m.MatchAny(any=vs),
                                         lambda v: m.Range(gte=v, lte=v), m.Filter, key, value)
                              for key, value in filters.items()])

    def upsert(self, collection: str, points: Sequence[PointRecord]) -> None:
        if not points:
            return
        m = self._m
        self._client.upsert(collection, wait=True, points=[
            m.PointStruct(id=p.id, vector=self._point_vectors(collection, p), payload=dict(p.payload))
            for p in points])

    def update_vectors(self, collection: str, vector_name: str,
                       ids: Sequence[str], vectors: np.ndarray) -> None:
        if not len(ids):
            return
        m = self._m
        self._client.update_vectors(collection, wait=True, points=[
            m.PointVectors(id=pid, vector={vector_name: _as_list(vec)})
            for pid, vec in zip(ids, vectors, strict=True)])

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if ids:
            self._client.delete(collection, wait=True,
                                points_selector=self._m.PointIdsList(points=list(ids)))

    def delete_documents(self, collection: str, doc_ids: Sequence[str]) -> None:
        if doc_ids:
            self._client.delete(collection, wait=True, points_selector=self._m.FilterSelector(
                filter=self._filter({DOC_ID_FIELD: list(doc_ids)})))

    def search(self, collection: str, vector_name: str, vector: Sequence[float] | np.ndarray,
               *, limit: int, filters: Filters | None = None, exact: bool = False) -> list[Hit]:
        return self._search(collection, vector_name, vector, limit=limit, filters=filters,
                            exact=exact, with_payload=True)

    def _search(self, collection: str, vector_name: str, vector: Sequence[float] | np.ndarray,
                *, limit: int, filters: Filters | None, exact: bool, with_payload: bool) -> list[Hit]:
        self._check_vector(collection, vector_name)
        query = _as_list(vector)

        def fetch(n: int, payload: bool) -> Sequence[Any]:
            return self._client.query_points(
                collection, query=query, using=vector_name, limit=n,
                query_filter=self._filter(filters), with_payload=payload,
                # Local mode is always exact and warns about search params.
                search_params=self._m.SearchParams(exact=True)
                if exact and self.backend == "server" else None).points

        top = _fetch_ranked(fetch, int(limit), with_payload,  # ties in point-id order
                            functools.partial(self._payloads, collection))
        self._index_filtered(collection, filters, bool(top))
        return top

    def search_lexical(self, collection: str, text: str, *, limit: int,
                       filters: Filters | None = None) -> list[Hit]:
        return self._search_lexical(collection, text, limit=limit, filters=filters,
                                    with_payload=True)

    def _search_lexical(self, collection: str, text: str, *, limit: int,
                        filters: Filters | None, with_payload: bool) -> list[Hit]:
        using, terms = self._query_terms(collection, text)
        def fetch(n: int, payload: bool) -> Sequence[Any]:
            return self._client.query_points(
                collection, query=terms, using=using, limit=n,
                query_filter=self._filter(filters), with_payload=payload).points

        top = _fetch_ranked(fetch, int(limit), with_payload,
                            functools.partial(self._payloads, collection))
        self._index_filtered(collection, filters, bool(top))
        return top

    def count(self, collection: str, filters: Filters | None = None) -> int:
        self._require(collection)
        n = int(self._client.count(collection, count_filter=self._filter(filters), exact=True).count)
        self._index_filtered(collection, filters, n > 0)
        return n

    def retrieve(self, collection: str, ids: Sequence[str],
                 with_vectors: bool = False) -> list[tuple[Hit, dict[str, list[float]]]]:
        records = self._client.retrieve(collection, ids=list(ids), with_payload=True,
                                        with_vectors=with_vectors)
        return _retrieved(records)

    def _scroll(self, collection: str, limit: int, filters: Filters | None, with_payload: bool,
                vectors: bool | list[str]) -> list[Scrolled]:
        read: list[Scrolled] = []
        offset = None
        while len(read) < limit:
            records, offset = self._client.scroll(
                collection, scroll_filter=self._filter(filters), limit=min(1000, limit - len(read)),
                offset=offset, with_payload=with_payload, with_vectors=vectors)
            read.extend(_retrieved(records))
            if offset is None or not records:
                break
        self._index_filtered(collection, filters, bool(read))
        return read

    def close(self) -> None:
        self._client.close()
        if self._probe is not None:
            self._probe[1].close()


_READS = ("list_collections", "collection_exists", "vector_sizes", "search", "search_lexical", "search_hybrid",
          "has_lexical", "lexical_version", "count", "retrieve", "_scroll")
for _name in (*_READS, "ensure_collection", "drop_collection", "upsert", "update_vectors", "delete",
              "delete_documents"):
    setattr(QdrantClientStore, _name, _translated(getattr(QdrantClientStore, _name),
                                                  retry_dropped=_name in _READS))


def open_store(backend: str, *, data_dir: Path, url: str | None = None,
               api_key: str | None = None, lock_wait_s: float = 3.0,
               layout: Mapping[str, int] | None = None) -> VectorStore:
    """Build the store the settings ask for.

    Args:
        backend: ``edge`` (default embedded), ``local`` (qdrant-client local mode) or
            ``server`` (qdrant-client against ``url``). A URL alone implies ``server``.
        data_dir: where embedded stores keep their folders.
        lock_wait_s: how long an embedded store waits for a collection another process has
            open before it raises ``StoreBusyError``.
        layout: a server's ``shard_number`` / ``replication_factor`` /
            ``write_consistency_factor`` for the collections it creates (None or empty:
            Qdrant's defaults); the embedded stores have none and ignore it.
    """
    if url and backend in ("edge", "server"):
        return QdrantClientStore(url=url, api_key=api_key, layout=layout)
    if backend == "edge":
        return EdgeStore(data_dir / "qdrant-edge", lock_wait_s=lock_wait_s)
    if backend == "local":
        return QdrantClientStore(path=data_dir / "qdrant-local")
    if backend == "server":
        raise StoreError("FACET_VECTOR_BACKEND=server needs FACET_QDRANT_URL (e.g. http://localhost:6333)")
    raise StoreError(f"unknown vector backend {backend!r}; use edge, local or server")
