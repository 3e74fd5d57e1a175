"""The search service: query + instruction -> vector search -> optional rerank -> snippets.

Modes: ``dense`` (the embedder's nearest neighbours), ``lexical`` (BM25 over the chunks' words, no
embedder), ``hybrid`` (both lists fused by reciprocal rank, ``HYBRID_FUSION``; the instruction
reaches only the dense side) and ``auto``, the default: ``hybrid`` for a query without an
instruction on a collection that keeps term vectors (``indexer.lexical``; every collection indexed
since they exist), else ``dense``: the words cannot read an instruction and would outvote it, and a
``score_threshold`` without rerank is on the cosine scale, which fused scores are not. The response
names the mode that ran. Measured on dev data only (docs/indexing.md).

Rerank: the rerank embedder scores (instruction, query) against (instruction, chunk):
``encode([query], role=query, instruction)`` against ``encode(chunks, role=document,
instruction)``, cosine (dot product of normalised vectors). It reorders the top
``rerank_depth`` candidates of the vector search. The query's vector, and the chunks' stored
vectors where the reranker wrote them, are reused rather than encoded again (``_rerank``).
"""

from __future__ import annotations

import bisect
import contextlib
import datetime
import functools
import json
import logging
import math
import numbers
import os
import re
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from sqlalchemy import String, cast, func, or_, select
from sqlalchemy.exc import SQLAlchemyError

from app.encoding import (
    QueryEncoder,
    RecentVectors,
    instruction_refusal,
    loaded_model,
    local_model_key,
    texts_digest,
)
from app.errors import (
    BusyError,
    ConflictError,
    DataError,
    InvalidRequestError,
    NotFoundError,
    TooLargeError,
    UnknownModelError,
)
from app.services import leases
from app.services.collections import (
    being_deleted,
    default_match,
    default_vector,
    effective_state,
    is_text,
    points_missing_text,
    stopped_removal_text,
)
from app.services.context import ServiceContext
from app.text import check_text_encodable, plural, shell_word
from embedders import scripts
from embedders.contract import EncodesFromPlain, Role, identity_changes, validate_instruction
from embedders.errors import UnknownEmbedderError
from indexer import lexical as lex
from indexer import metadata as md
from indexer.errors import (
    CollectionNotFoundError,
    StoreBusyError,
    StoreDamagedError,
    StoreError,
    StoreUnavailableError,
)
from indexer.lexical import LEXICAL_LABEL
from indexer.store import Filters, Fusion, Hit, VectorStore, validate_name

logger = logging.getLogger(__name__)

# Payload fields written by the indexer; any other filter key is user metadata.
TOP_LEVEL_FIELDS = {"doc_id", "source", "title", "chunk_no"}
# A word with its combining marks ("café" written as "e" + U+0301 was cut at the accent).
_STOP = {"the", "a", "an", "of", "to", "in", "and", "or", "is", "are", "for", "on", "with", "my",
         "i", "it", "do", "does", "what", "how", "can", "be", "this", "that", "me", "you"}


@dataclass(frozen=True)
class SearchRequest:
    """A search.

    Attributes:
        query: the text to search for (must not be empty).
        collection: where to search.
        instruction: what the query means ("find the customer's intent"); optional.
        top_k: results to return.
        filters: payload filters, ``{key: value}``; see ``parse_filters`` for the CLI form. A
            ``datetime.date`` or ``datetime.datetime`` value matches its ISO text
            (``isoformat()``: ``2024-05-01``), as dates from front matter and records are stored.
        rerank: an embedder name/path to rerank the candidates with; ``None`` for none.
        rerank_depth: candidates taken from the vector search before reranking.
        embedder: which named vector to search; default the collection's only/first one.
        exact: exact (brute force) search instead of HNSW.
        score_threshold: drop results scoring below this (the rerank score when reranked).
        group_by_document: one result per document (its best chunk; the numbers of its other
            matching chunks in ``more_chunks``): ``top_k`` documents, not ``top_k`` chunks.
        mode: ``auto`` (hybrid without an instruction where the collection keeps term vectors,
            else dense), ``dense`` (embedder), ``lexical`` (BM25 over the words) or ``hybrid``
            (both, fused by rank); see the module docstring. Scores are cosines, BM25 scores or
            fused scores.
    """

    query: str
    collection: str
    instruction: str | None = None
    top_k: int = 10
    filters: Mapping[str, Any] = field(default_factory=dict)
    rerank: str | None = None
    rerank_depth: int | None = None
    embedder: str | None = None
    exact: bool = False
    score_threshold: float | None = None
    group_by_document: bool = False
    mode: str = "auto"

    def __post_init__(self) -> None:
        # numpy scalars (a notebook's np.int64(3), np.float32(0.1), a DataFrame cell as a
        # filter value) as the plain numbers they are: they were refused as no whole number,
        # no finite number, nothing a filter matches (``plain_number``).
        for name in ("top_k", "rerank_depth", "score_threshold"):
            object.__setattr__(self, name, plain_number(getattr(self, name)))
        object.__setattr__(self, "filters", plain_filters(self.filters))


def plain_number(value: Any) -> Any:
    """``value`` as a plain Python number where it is another kind of one: a numpy integer
    (``np.int64(3)``, what pandas and numpy hand around) or any ``numbers.Integral`` as an int,
    a numpy float (``np.float32``) or any other ``numbers.Real`` as a float; anything else (a
    bool, a str, None, an int or a float already) as it is, for the checks to judge. A numpy
    integer passed the int check and SQLite stored it as an 8-byte BLOB (a collection's chunk
    size), while other checks refused it as no whole number."""
    if value is None or isinstance(value, bool) or type(value) in (int, float):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def plain_filters(filters: Any) -> Any:
    """``filters`` with numpy scalar values as plain ones and dates as their ISO text
    (``_plain_value``): a new dict where any changed, else ``filters`` itself (not a mapping,
    too: ``check_filters`` refuses it)."""
    if not isinstance(filters, Mapping):
        return filters
    plain = {k: _plain_value(v) for k, v in filters.items()}
    return plain if any(plain[k] is not v for k, v in filters.items()) else filters


def _plain_value(value: Any) -> Any:
    """A filter value with numpy scalars as plain ones (``plain_number``; a numpy bool as a
    bool), a ``datetime.date`` or ``datetime.datetime`` as its ISO text (``2024-05-01``,
    ``2024-05-01T09:30:00``: ``isoformat()``, as front matter's and records' dates are stored;
    it was refused as no string or number), a list or tuple value by value; ``value`` itself
    where nothing changes."""
    if isinstance(value, list | tuple):
        plain = [_plain_value(v) for v in value]
        if all(a is b for a, b in zip(plain, value, strict=True)):
            return value
        return plain if isinstance(value, list) else tuple(plain)
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"):
        return bool(value)
    if isinstance(value, datetime.date):  # (a datetime is a date)
        return value.isoformat()
    return plain_number(value)


def _got(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.60}"


def _check_type(value: Any, name: str, fits: bool, expected: str, optional: bool,
                param: str | None) -> None:
    """Refuse ``value`` unless it ``fits`` (or is None where ``optional``), naming the field
    (``param``: as the HTTP API names it, if not ``name``) and ``expected``.

    Raises:
        InvalidRequestError: naming the field and the type expected.
    """
    if fits or (value is None and optional):
        return
    raise InvalidRequestError(f"{name} must be {expected}{' or None' if optional else ''}, got "
                              f"{_got(value)}", param=param or name)


def check_bool(value: Any, name: str, *, optional: bool = False, param: str | None = None) -> None:
    """Refuse a ``name`` that is not a real bool (``None`` too where ``optional``): a string
    "no" was accepted and acted as True."""
    _check_type(value, name, isinstance(value, bool), "a bool (True or False)", optional, param)


def check_int(value: Any, name: str, *, optional: bool = False, param: str | None = None) -> Any:
    """Refuse a ``name`` that is not a whole number (``None`` too where ``optional``): not a
    bool, a float or a string ("100" failed deep inside with a TypeError). Returns it as a
    plain int (a numpy integer, any ``numbers.Integral``: ``plain_number``), or None."""
    _check_type(value, name, isinstance(value, numbers.Integral) and not isinstance(value, bool),
                "an int", optional, param)
    return plain_number(value)


def check_str(value: Any, name: str, *, optional: bool = False, param: str | None = None) -> None:
    """Refuse a ``name`` that is not a string (``None`` too where ``optional``): an instruction
    of 5 failed with an AttributeError."""
    _check_type(value, name, isinstance(value, str), "a str", optional, param)



def check_spec(value: Any, name: str, *, default: str, empty_is_none: bool = False) -> None:
    """Refuse an empty or blank model spec ``name`` (``""`` allowed where ``empty_is_none``),
    naming the field, as the API refuses it: an empty embedder was read as the current folder
    (a ValueError from ``Path("")``), or silently as the default by `facet index` and ``embed``,
    and the registry's "embedder must be..." named the embedder for a blank rerank. ``default``:
    what leaving it out gives."""
    if isinstance(value, str) and not value.strip() and (value or not empty_is_none):
        leave = "leave it out, or give ''," if empty_is_none else "leave it out"
        raise UnknownModelError(f"{name} must be a non-empty embedder name or path, got {value!r}; "
                                f"{leave} for {default} (`facet embedders` lists the names)",
                                param=name)

# Why a registered name may be unknown in one process and not in another (a search's refusal,
# a worker's): said after "unknown embedder".
PLUGIN_LOADS_WHERE_REGISTERED = ("an embedder from a plugin loads only where the plugin is "
                                 "registered: its package's `facet.embedders` entry point, or "
                                 "FACET_PLUGINS")

MAX_TOP_K = 1000
SearchMode = Literal["auto", "dense", "hybrid", "lexical"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
# Fusion's defaults (k=30, the words weighted 1.5, 100 candidates a list), chosen on dev data only
# through this service: the best mean nDCG@10 over k in {2, 10, 30, 60} x lexical weight in
# {0.5, 1, 1.5} of minilm and causal2vec on SciFact dev (held-out train queries) and on an intent
# retrieval set built from BANKING77 *train* (docs/indexing.md).
HYBRID_FUSION = Fusion()
# Whether the reranker reads each candidate chunk under the query's instruction (the design card's
# (instruction, chunk)) or bare, as every embedder reads documents when indexing and in `facet eval`.
RERANK_DOCUMENTS_INSTRUCTED = True
# Grouping fetches candidates for this many chunks per wanted document, deepening up to
# GROUP_MAX_DEPTH when a few documents hold most of the matching chunks.
GROUP_FETCH_FACTOR = 4
GROUP_MAX_DEPTH = 4 * MAX_TOP_K

# How long a search service trusts its comparison of a collection's points with its chunks
# (``SearchService._gaps_note``): counting both takes 20 ms or more per search on a
# 200,000-point collection. This process's own writes forget it at once (``forget``).
POINTS_CHECK_S = 30.0


@dataclass
class SearchResult:
    """One result of a search: a chunk (with ``group_by_document``, a document's best chunk).

    Attributes:
        rank: its place in the results, from 1.
        score: what the results are ranked by: ``rerank_score`` when reranked, else
            ``vector_score``.
        doc_id: the document's id: a jsonl/csv record's ``_id``/``id``, else the file's
            absolute path.
        title: the document's title where its format has one, else None.
        source: the file the document was read from.
        chunk_no: the chunk's number within its document, from 0.
        text: the chunk's text.
        snippet: a window of ``text`` (240 characters at most) holding most query terms.
        highlights: ``(start, end)`` character offsets of the query's terms in ``snippet``.
        start: the chunk's first character's offset in the document's text.
        end: the offset just past the chunk's last character in the document's text.
        metadata: the document's own metadata (a record's extra jsonl/csv fields), what
            filters match besides ``doc_id``, ``source``, ``title`` and ``chunk_no``.
        vector_score: the search's own score: cosine (dense), BM25 (lexical) or the fused
            rank score (hybrid).
        rerank_score: the reranker's cosine, None without a rerank.
        more_chunks: with ``group_by_document``, the numbers of the document's other matching
            chunks among the candidates (those scoring ``score_threshold`` or more, where one is
            given); else empty.
    """

    rank: int
    score: float
    doc_id: str
    title: str | None
    source: str
    chunk_no: int
    text: str
    snippet: str
    highlights: list[tuple[int, int]]
    start: int
    end: int
    metadata: dict[str, Any]
    vector_score: float
    rerank_score: float | None = None
    more_chunks: list[int] = field(default_factory=list)  # group_by_document: other matches


@dataclass
class SearchResponse:
    """What a search found, and how it ran.

    Attributes:
        query: the query, as given.
        instruction: the instruction, stripped; None where none (or a blank one) was given.
        collection: the collection searched.
        embedder: the named vector searched (an embedder's name); ``bm25`` for a lexical search.
        reranker: the reranker's model name, None without a rerank (or with nothing to rerank).
        results: the results, best first.
        timings_ms: milliseconds per stage (``encode_query``, ``vector_search``, ``rerank``,
            ``results``, ``total``; ``load_model``, ``load_reranker`` where a model was loaded
            by the call).
        mode: the mode that ran: ``dense``, ``lexical`` or ``hybrid`` (never ``auto``).
        instruction_read: whether anything read the instruction (False for a lexical search
            without a reranker, or an embedder that reads none); derived from the other fields
            when not given.
        note: what the results cannot show (filters matching nothing, older term vectors, an
            instruction not read), else None.
        embedder_spec: what encoded the query, options included (``minilm[instruction_weight=1]``);
            None where nothing did (lexical).
        reranker_spec: the reranker as asked for, None without a rerank.
    """

    query: str
    instruction: str | None
    collection: str
    embedder: str
    reranker: str | None
    results: list[SearchResult]
    timings_ms: dict[str, float]
    mode: str = "dense"
    # Whether anything read ``instruction``: not a lexical search without a reranker (BM25
    # matches the words only), whose response echoed the instruction as if it had been used.
    # Worked out from the fields above unless given.
    instruction_read: bool | None = None
    # What the results cannot show: a word search (lexical, hybrid) of a collection whose term
    # vectors are of an older definition, and what rewrites them (``VectorStore.older_lexical``).
    note: str | None = None
    # The specs that ran, options included: ``embedder`` names the vector searched and
    # ``reranker`` the reranker's model, so a query read at ``minilm[instruction_weight=1]`` (the
    # collection's recorded spec, or one asked for) read as plain minilm on every edge.
    # ``embedder_spec``: what encoded the query (``_query_spec``), None where nothing did
    # (lexical); ``reranker_spec``: the rerank embedder as asked for, None without a rerank.
    embedder_spec: str | None = None
    reranker_spec: str | None = None

    def __post_init__(self) -> None:
        if self.instruction_read is None:
            self.instruction_read = self.instruction is not None and (
                self.mode != "lexical" or self.reranker is not None)

    @property
    def words_alone(self) -> bool:
        """An instruction was given and only BM25 ran (lexical, no reranker): why it was not
        read, as the edges say it; an embedder that reads none says so in ``note`` instead."""
        return self.instruction is not None and self.mode == "lexical" and self.reranker is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reads_instruction(spec: str) -> bool:
    """Whether the embedder ``spec`` loads reads an instruction (``reads_instructions``: False
    only for one registered so)."""
    from embedders.registry import reads_instructions

    return reads_instructions(spec)


# How a search's or clustering's note begins where its instruction was read only at a weak
# blend (``weak_instruction_note``).
WEAK_INSTRUCTION_NOTE = "the instruction barely steers: "


# The most texts of an embed whose query vectors are kept (``kept_embed``): a larger call is bulk
# work (more than the encoder's batch), and would push out the vectors searches keep.
KEPT_EMBED_MAX_TEXTS = 32


def kept_embed(role: Role, texts: Sequence[str]) -> bool:
    """Whether an embed of ``texts`` as ``role`` keeps and reuses query vectors: queries, at
    most ``KEPT_EMBED_MAX_TEXTS`` of them (hashed on an async caller's event loop)."""
    return role is Role.QUERY and 0 < len(texts) <= KEPT_EMBED_MAX_TEXTS


def read_as_none(model: object, instruction: str | None) -> bool:
    """Whether ``model`` (None: not loaded in this process, so not known) reads ``instruction``
    exactly as no instruction (InBedder's own default: ``reads_bare``): nothing said of an
    instruction applies to its vectors then (a search or clustering under InBedder's default
    said it "barely steers", advising a reading at full weight that gives the same vectors)."""
    bare = getattr(model, "reads_bare", None)
    given = validate_instruction(instruction)
    return given is not None and callable(bare) and bare(given) is True


def weak_instruction_note(specs: list[str]) -> str | None:
    """What to say where every embedder in ``specs`` that read an instruction barely follows it
    (minilm at its default blend of 0.25: with and without a domain instruction it shared 9-10
    of its top 10 on CLINC val; emotion clusters at V 9-11 against InstEmb's 22-23; and the
    response said nothing), else None."""
    from embedders.registry import weak_instruction

    weights = {spec: weak_instruction(spec) for spec in dict.fromkeys(specs) if reads_instruction(spec)}
    if not weights or any(weight is None for weight in weights.values()):
        return None
    spec, weight = next(iter(weights.items()))
    # (It said "instemb and inbedder are trained to follow instructions": read as a promise that
    # they steer, where on CLINC's intent and domain views no embedder's clustering does, and the
    # served inbedder blends too; what is measured to steer a search is docs/indexing.md's probe.)
    return (f"{WEAK_INSTRUCTION_NOTE}{spec}{WEAK_MIXES}{weight:g} (instemb, or the same vectors "
            f"at instruction_weight=1, read it in full{WEAK_NOTE_END}")


# What follows the model's name in the weak-instruction note (``served_note`` reads the name).
WEAK_MIXES = " mixes it in at "

# How the weak-instruction note ends (an edge that serves fewer names adds which: ``served_note``).
WEAK_NOTE_END = ": docs/indexing.md)"


def served_note(note: str | None, embedder: str, served: Callable[[str], bool]) -> str | None:
    """``note`` with its weak-instruction part saying which of the embedders it offers
    (``instemb``, ``EMBEDDER[instruction_weight=1]``) ``served`` refuses: an HTTP client was
    offered a name the server answers 404 (``FACET_API_MODELS`` sets what it serves)."""
    if not note or WEAK_INSTRUCTION_NOTE not in note:
        return note
    from embedders.registry import findable

    # The model the note is about, as it names it: a reranker's where the reranker orders the
    # results (it named the first stage's: "does not serve instemb[instruction_weight=1]" for a
    # minilm reranker; the verification round of the fourth session of 2026-12-07).
    named = note.split(WEAK_INSTRUCTION_NOTE, 1)[1].split(WEAK_MIXES, 1)[0]
    base = (named if WEAK_MIXES in note else embedder).split("[", 1)[0]
    refused = [name for name in ("instemb", f"{base}[instruction_weight=1]") if not served(name)]
    if not refused:
        return note
    # A name no embedder loads as (no instemb checkpoint in FACET_CHECKPOINT_DIR) is not one
    # FACET_API_MODELS could serve: that advice sent the user to list it, for a 404 again.
    # Installed: a registered name, or a checkpoint folder that is there (its path, as a note
    # about a reranker given by path names it), found as any spec is found.
    absent = [name for name in refused if not findable(name)]
    unserved = [name for name in refused if name not in absent]
    why = ([f"this server does not serve {' or '.join(unserved)}: FACET_API_MODELS sets what it "
            "serves"] if unserved else []) + \
        ([f"{' or '.join(absent)} {'is' if len(absent) == 1 else 'are'} not installed here (no "
          f"such checkpoint in FACET_CHECKPOINT_DIR)"] if absent else [])
    return note.replace(WEAK_NOTE_END, f": docs/indexing.md; {'; '.join(why)})", 1)


def _unknown_rerank(error: Exception, spec: str | None) -> UnknownModelError:
    """The refusal of a rerank ``spec`` no embedder loads as, naming the rerank option first (in
    process it said only "unknown embedder 'nope'", as if the search's embedder were wrong; the
    HTTP API says "rerank 'nope' is not served here"), then the registry's own words (why, and
    its valid names)."""
    return UnknownModelError(f"rerank {spec!r}: {error}", param="rerank")


def why_no_results(response: SearchResponse, filters: Mapping[str, Any] | bool | None) -> str:
    """What to check when a search found nothing, for every edge to show (the UI said only
    "loosen the filters" where the CLI named the `key:=2020` a field of numbers needs).

    "check the filters" was said with no filter too (an empty collection, a lexical query of
    stop words only). The rest is the response's note (``SearchService._nothing_note``): the
    older term vectors, the keys no document holds and a filter value of the wrong type
    (``filter_type_hint``). The type hint was guessed here from the filters alone, so the API
    and LangChain, which show the note, said nothing of it; the core makes it, knowing what the
    fields hold, and every edge says the same once.
    """
    if response.note and response.note.startswith(_BELOW_THRESHOLD):
        # The search found results and the threshold dropped them all: neither the collection
        # nor the filters are what to check ("holds nothing searchable" for 7 chunks).
        return response.note
    if response.note and response.note.startswith((NOTHING_SEARCHABLE, NO_INDEXED_WORD,
                                                   NO_QUERY_WORD)):
        return response.note  # the service said it, with why (not twice)
    if not filters:
        why = NO_INDEXED_WORD if response.mode == "lexical" else NOTHING_SEARCHABLE
    else:
        why = "check the filters"
    # An older term definition found nothing for words today's finds (熊猫 inside 大熊猫): said,
    # with what rewrites them, rather than only "no indexed word of the query is in it".
    return f"{why}; {response.note}" if response.note else why


# How the note begins when the collection holds no indexed document (``nothing_searchable_note``).
NOTHING_SEARCHABLE = "the collection holds nothing searchable"

# Why a word search found nothing when no word of the query is indexed in the collection: said
# before the filters (a filtered `zzzqqq` was told "check the filters", which matched 2 records).
NO_INDEXED_WORD = "no indexed word of the query is in it"
# Why, when the query has no term at all (an emoji, punctuation, stopwords only): "no indexed
# word of the query is in it" was said of `facet search 🍕 -m lexical` on a text holding 🍕.
NO_QUERY_WORD = "the query has no word the word index reads (symbols and stopwords are not indexed)"
# How a hybrid search's note starts where its word side found nothing and the results are the
# dense side's alone (what a paraphrase of the corpus meets: the LangChain retriever logs it at
# INFO, every other note as a warning).
DENSE_ONLY_NOTE = "the word side found nothing"

# How the note begins when ``score_threshold`` dropped every result (``why_no_results`` reads it).
_BELOW_THRESHOLD = "no result scored "

# Where the ``key:=2020`` / ``key=5`` form is written; the JSON form follows it for the API.
_EDGE_FORMS = "in the CLI and the UI's filter box"


def filter_type_hint(filters: Mapping[str, Any], held: Mapping[str, Any] | None = None,
                     twins: TypeTwins | None = None, shadowed: Collection[str] = ()) -> str | None:
    """Why ``filters`` may match nothing for the type of a value, worded for every edge: the
    CLI's and the UI's form, then the JSON to send. A number written ``key=2020`` (or sent as
    ``"2020"``) is the string "2020", which a field of numbers never holds; a csv column holds
    text, so the number 5 never matches its "5"; a record's ``id`` is its document id, matched
    as ``doc_id``. ``held``: a value a document holds in a metadata key's field, None where
    none holds one (that key gets no hint: no value would match); a key with a value of the
    filter's type is left out too. A key not in it is guessed at. None where no value looks
    mistyped.

    ``twins`` (``SearchService._type_twins``), where the documents were asked: a metadata value
    is hinted at only where some document holds its other-typed twin (the number 4 for "4", the
    string "4" for 4). One stored value per field decided it, so a field holding numbers in a
    jsonl and strings in a csv got no hint, or one that sent the user to the wrong type.

    ``shadowed``: the built-in keys (``chunk_no``, ``source``...) that records of the
    collection also hold as a field of their own (``SearchService._builtin_twins``): they get
    no type hint, ``builtin_twin_note`` says to filter on ``meta.<name>`` instead (a csv column
    ``chunk_no`` filtered ``chunk_no=3`` was told to send ``chunk_no:=3``, which matched the
    chunks numbered 3). A built-in key's hint names what the key is, and claims no csv.
    """
    held = {**_TOP_LEVEL_VALUES, **(held or {})}
    given = [(k, v) for k, value in filters.items() if (k not in held or held[k] is not None)
             and k not in shadowed
             for v in (value if isinstance(value, list | tuple) else [value])]
    if twins is not None:  # asked: what the documents hold decides, not one value's type
        given = [(k, v) for k, v in given if k in _TOP_LEVEL_VALUES or k in ("id", "_id")
                 or (k, v) in twins.found or (k, v) in twins.booleans]

    def holds(k: str, number: bool) -> bool:  # the other type is held (found, or guessed)
        if twins is not None and k not in _TOP_LEVEL_VALUES:
            return True  # its twin was found
        return _is_number(held.get(k, 0)) if number else isinstance(held.get(k, ""), str)

    hints = []
    ids = [(k, str(v)) for k, v in given if k in ("id", "_id")]
    if ids:  # a record's id field is its document id, not metadata (`id:=3` found nothing too)
        hints.append(f"a record's id is matched with {', '.join(f'doc_id={v}' for _, v in ids)} "
                     f"{_EDGE_FORMS}, in JSON with {_as_json('doc_id', ids)}")
    # A point's own field (doc_id, source, title, chunk_no): said what it is, with no csv
    # clause (`{"doc_id": 5}` on a jsonl collection was told "as every csv column is").
    for k in dict.fromkeys(k for k, _ in given if k in _TOP_LEVEL_VALUES):
        number = _is_number(_TOP_LEVEL_VALUES[k])
        wrong = [v for kk, v in given if kk == k and (
            isinstance(v, str) and _NUMBER.fullmatch(v.strip()) if number else _is_number(v))]
        if not wrong:
            continue
        fixed = [(k, _number(v)) if number else (k, json.dumps(v)) for v in wrong]
        cli = ", ".join(f"{k}:={json.dumps(v)}" if number else f"{k}={v}" for _, v in fixed)
        hints.append(f"{k} (the {_BUILT_IN[k]}) is {'a number' if number else 'text'}, matched "
                     f"with {cli} {_EDGE_FORMS}, in JSON with "
                     f"{_plural('the number' if number else 'the string', fixed)}: "
                     f"{_as_json(None, fixed)}")
    given = [(k, v) for k, v in given if k not in _TOP_LEVEL_VALUES]
    strings = [(k, v) for k, v in given if k not in ("id", "_id") and isinstance(v, str)
               and _NUMBER.fullmatch(v.strip()) and holds(k, number=True)
               and (twins is None or (k, v) not in twins.booleans)]  # ("1" of true: below)
    if strings:
        numbers = [(k, _number(v)) for k, v in strings]
        # "not a csv column" only where no document holds the field as text.
        mixed = twins is not None and any(_field_name(k) in twins.texts for k, _ in strings)
        hints.append(f"a field of numbers{'' if mixed else ' (not a csv column)'} is matched with "
                     f"{', '.join(f'{k}:={json.dumps(v)}' for k, v in numbers)} {_EDGE_FORMS}, in "
                     f"JSON with {_plural('the number', numbers)}: {_as_json(None, numbers)}, not "
                     f"{_plural('the string', strings)} "
                     f"{', '.join(json.dumps(v, ensure_ascii=False) for _, v in strings)}"
                     + (" (some documents hold it as text, others as numbers)" if mixed else ""))
    # The other way round: a csv column holds text, so `stars:=5` (the number) never matches
    # its "5" (the UI said only "check the filters").
    texts = [(k, json.dumps(v)) for k, v in given if k not in ("id", "_id")
             and _is_number(v) and holds(k, number=False)]
    if texts:
        hints.append(f"a field of text (as every csv column is) is matched with "
                     f"{', '.join(f'{k}={v}' for k, v in texts)} {_EDGE_FORMS}, in JSON with "
                     f"{_plural('the string', texts)}: {_as_json(None, texts)}; a field of "
                     "numbers with key:=N, in JSON with the number")
    # A field of true/false filtered with the string "true" (`published=true`): the boolean
    # matches where the store matches booleans; the edge store matches neither.
    flags = [(k, v) for k, v in given if twins is not None and (k, v) in twins.booleans]
    if flags:
        as_bools = [(k, _as_boolean(v)) for k, v in flags]
        forms = ", ".join(f"{k}:={json.dumps(b)}" for k, b in as_bools)
        strings_given = ", ".join(json.dumps(v, ensure_ascii=False) for _, v in flags)
        if twins is not None and twins.booleans_matched:
            hints.append(f"a field of true/false is matched with {forms} {_EDGE_FORMS}, in JSON "
                         f"with {_plural('the boolean', flags)}: {_as_json(None, as_bools)}, not "
                         f"{_plural('the string', flags)} {strings_given}")
        else:
            fields = list(dict.fromkeys(k for k, _ in flags))
            hints.append(
                f"{_plural('the field', fields)} {', '.join(map(repr, fields))} "
                f"{'holds' if len(fields) == 1 else 'hold'} true/false, not "
                f"{_plural('the string', flags)} {strings_given}, and the edge store (the "
                "default backend) cannot match true/false (qdrant-edge 0.9 reads them as the "
                "integers 1/0): store such a field as a string or an integer, or use "
                f"FACET_VECTOR_BACKEND=local or a Qdrant server, where {forms} (in JSON "
                f"{_as_json(None, as_bools)}) matches it (local mode: one process at a time; "
                "a switch indexes every source again)")
    return "; ".join(hints) or None


@dataclass(frozen=True)
class TypeTwins:
    """What ``SearchService._type_twins`` found: ``found``, the (key, value) pairs of a filter
    whose other-typed twin some document holds (and not the value itself); ``texts``, the
    fields of the number-twins that some document holds as text too."""

    found: frozenset[tuple[str, Any]] = frozenset()
    texts: frozenset[str] = frozenset()
    # The pairs of ``found`` whose twin is a boolean (the string "true" for a field of true),
    # and whether the store matches booleans at all (the edge store refuses them).
    booleans: frozenset[tuple[str, Any]] = frozenset()
    booleans_matched: bool = True


# Filter values whose other-typed twin a search that found nothing asks after, at most.
MAX_TWIN_CHECKS = 10

# What the point's own fields hold, as a document's metadata value would say it.
_TOP_LEVEL_VALUES: dict[str, Any] = {"doc_id": "", "source": "", "title": "", "chunk_no": 0}
# What each of them is, for the notes.
_BUILT_IN = {"doc_id": "document's id", "source": "file the document was read from",
             "title": "document's title", "chunk_no": "chunk's number in its document"}


def builtin_twin_note(filters: Mapping[str, Any], twins: Mapping[str, Any],
                      found: bool = False) -> str | None:
    """That a filter key naming a point's own field (``chunk_no``, ``source``, ``doc_id``,
    ``title``) matches that field, not the records' own field of the same name, which
    ``twins`` holds: filter that one as ``meta.<name>``, in the form its value is held (a csv's
    "3" with ``=``, a number with ``:=``). ``twins``, by key: a list, the values to name as
    some document holds them (``SearchService._builtin_twins``: the number 1 and the string
    "1" where some documents hold each); else a value some document holds, whose type each
    filter value is given in. ``found``: the search found results (the chunks of that number,
    not the records). None where no such key is filtered."""
    notes = []
    for key, held in twins.items():
        if key not in filters or key not in _BUILT_IN or held == []:
            continue
        value = filters[key]
        given = value if isinstance(value, list | tuple) else [value]
        fixed = (list(held) if isinstance(held, list)
                 else list(dict.fromkeys(_held_as(v, held) for v in given)))
        cli = ", ".join(f"meta.{key}={v}" if isinstance(v, str) else f"meta.{key}:={json.dumps(v)}"
                        for v in fixed)
        notes.append(f"{key!r} is the {_BUILT_IN[key]} (a field of every chunk), "
                     + ("which the results matched, " if found else "")
                     + f"not the records' own field {key!r}, which some documents hold: that "
                     f"one is matched with {cli} {_EDGE_FORMS}, in JSON with "
                     f"{_as_json(f'meta.{key}', [(key, v) for v in fixed])}")
    return "; ".join(notes) or None


def _held_as(value: Any, held: Any) -> Any:
    """``value`` in the type of ``held`` where it reads as one ("3" for a field of text holding
    "5"; 3 for "3" on a field of numbers), else as given."""
    if isinstance(held, str) and _is_number(value):
        return json.dumps(value)
    if _is_number(held) and isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return _number(value)
    return value


def _typed_forms(value: Any) -> list[Any]:
    """``value`` and its other-typed twin, where it has one: "1" and 1, 1 and "1" (6.0 also
    "6")."""
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return [value, _number(value)]
    if _is_number(value):
        twins = [value, json.dumps(value)]
        if isinstance(value, float) and abs(value) < _EXACT_FLOAT and value.is_integer():
            twins.append(str(int(value)))
        return twins
    return [value]


def _either(names: Sequence[str]) -> str:
    """``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``."""
    return _or_list([repr(n) for n in names])


def _or_list(words: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``: ``words`` as written (numbers unquoted)."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


# Relative source/doc_id values a note speaks of, and absolute paths it names for each, at most.
_PATH_NOTES = 3
# A source or doc_id value that is no relative path though it holds "/": a URL's scheme
# (``https://``, ``file:///``, ``s3://``) or a drive (``C:\\``, ``C:/``).
_NOT_A_PATH = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[\\/]")
# Documents read to find a key differing from a filter's only in case.
_CASE_ROWS = 50
# Documents whose field names a filter key no document holds is compared with for a close
# spelling (``_close_names``), and how close (difflib's ratio, case folded): 'tag' to 'tags' is
# 0.86, 'intnet' to 'intent' 0.83, 'colour' to 'color' 0.91; 'name' to 'game' (0.75) is not.
_NAME_ROWS = 200
_CLOSE_CUTOFF = 0.78
_CLOSE_NAMES = 3
# Documents whose values of a filtered field are read to tell a string filter value no document
# holds (``_unheld_values``), and the values of one filter said so, at most.
_VALUE_ROWS = 5000
_VALUE_NOTES = 3


def _reads_as_number(text: str) -> bool:
    """Whether a filter's string value reads as a number or a boolean ("2", "4.5", "true"): in a
    field that holds numbers too, the type hint speaks of it (``filter_type_hint``)."""
    if text.strip().lower() in _BOOLEAN_TEXTS:
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _close_names(name: str, held: Collection[str]) -> list[str]:
    """The names of ``held`` spelt close to ``name`` (difflib's ``get_close_matches``, case
    folded, ``_CLOSE_CUTOFF``), closest first, at most ``_CLOSE_NAMES``; ``name`` itself not."""
    import difflib

    folded: dict[str, list[str]] = {}
    for k in sorted(held):
        if k != name:
            folded.setdefault(k.casefold(), []).append(k)
    found: list[str] = []
    for match in difflib.get_close_matches(name.casefold(), list(folded), n=_CLOSE_NAMES,
                                           cutoff=_CLOSE_CUTOFF):
        found += folded[match]
    return found[:_CLOSE_NAMES]


# A string filter value that reads as a boolean, and the JSON texts a field holding that
# boolean reads as in SQL (SQLite's JSON functions give true as 1; PostgreSQL's as true).
_BOOLEAN_TEXTS = {"true": ("true", "1"), "false": ("false", "0")}


def _as_boolean(text: str) -> bool:
    """The boolean a filter's text stands for on a field of true/false: "true", "1" (SQLite
    reads a JSON true as 1) and their like are true."""
    text = text.strip().lower()
    return text == "true" if text in _BOOLEAN_TEXTS else _number(text) == 1


# Documents read to tell a field of true from one of the integer 1 (SQLite reads both as 1).
_BOOLEAN_ROWS = 20


def _number_texts(value: int | float) -> tuple[str, ...]:
    """The JSON texts a field holding the number ``value`` reads as in SQL: a whole number as
    an integer and as a float ("6" and "6.0"; a record's ``"price": 6.0`` is "6.0", which a
    filter's "6" was compared with as text, and the type hint went missing)."""
    texts = [json.dumps(value)]
    if abs(value) < _EXACT_FLOAT and float(value).is_integer():
        texts += [json.dumps(int(value)), json.dumps(float(value))]
    return tuple(dict.fromkeys(texts))


# Whole numbers up to this size are exact as floats (and SQLite writes them as "6.0").
_EXACT_FLOAT = 2**53


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(text: str) -> int | float:
    text = text.strip()
    return float(text) if "." in text else int(text)


def _plural(words: str, items: Sequence[Any]) -> str:
    return words if len(items) == 1 else f"{words}s"


def _as_json(key: str | None, pairs: Sequence[tuple[str, Any]]) -> str:
    """``{"year": 2020}`` from the pairs (under ``key`` where given), a repeated key as a list
    of its values (any of)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        k = key or k
        if k not in out:
            out[k] = v
        elif isinstance(out[k], list):
            out[k].append(v)
        else:
            out[k] = [out[k], v]
    return json.dumps(out, ensure_ascii=False)


_NUMBER = re.compile(r"-?\d+(\.\d+)?")


# Why a comparison (`year>=2019` typed, `{"year": {"$gt": 2019}}` sent) is refused: a key ending
# in ">", "<" or "!" ran as the field 'year>' ("no document has a field 'year>'"), and an
# operator object got the generic "cannot be matched".
COMPARISON_REFUSAL = (
    "comparison filters (>=, <=, !=, $gt...) are not supported: a filter matches values; list "
    "them, a repeated key matching any of its values: year:=2020 and year:=2021 "
    f'{_EDGE_FORMS}, {{"year": [2020, 2021]}} in JSON (docs/indexing.md)')
_COMPARISON = re.compile(r"[<>]")
# A key's ending that makes it a comparison: the CLI splits at the first "=", so `year>=2019`
# arrives as 'year>'; a JSON key keeps its "=" ({"year>=": 2019} ran as the field 'year>=').
# No key parse_filters yields holds an "=", so none of these endings is a field a filter names.
_COMPARISON_KEY = ("<", ">", "!", "<=", ">=", "!=")


def parse_filters(items: Sequence[str]) -> dict[str, Any]:
    """CLI filters: ``key=value`` matches a string value, ``key:=JSON`` a typed one
    (``year:=2020``, ``flag:=true``); a repeated key matches any of its values. Spaces around
    the key and a ``key=value`` value are dropped (``key:=" x "`` keeps them). The separator
    is the item's first ``=``, the JSON form where a ``:`` comes just before it: the value may
    hold ``=`` and ``:=`` (``formula=x:=1`` is the text "x:=1").

    Raises:
        InvalidRequestError: an item without ``=`` or with bad JSON after ``:=``; a comparison
            (``year>=2019``, ``year!=2019``, ``year>2019``), which no filter is.
    """
    filters: dict[str, Any] = {}
    for item in items:
        equals = item.find("=")
        if equals > 0 and item[equals - 1] == ":":
            # The separator is the item's first "=" (`formula=x:=1` is the text "x:=1" under
            # "formula", not the JSON 1 under "formula=x"); a ":" before it makes the JSON form.
            key, raw = item[:equals - 1], item[equals + 1:]
            try:
                value: Any = json.loads(raw)
            except json.JSONDecodeError as e:
                raise InvalidRequestError(f"filter {item!r}: {raw!r} is not JSON; write "
                                          "key:=2020 or key:=true, or key=text for strings",
                                          param="filters") from e
            except RecursionError as e:  # key:=[[[[... thousands deep: was a traceback
                raise InvalidRequestError(f"filter {key.strip()!r}: its JSON value is nested too "
                                          "deeply to read; only strings, numbers and booleans "
                                          "can be matched", param="filters") from e
            if isinstance(value, dict) and any(k.startswith("$") for k in value):
                raise InvalidRequestError(f"filter {item!r}: {COMPARISON_REFUSAL}",
                                          param="filters")
            if not isinstance(value, str | int | float | bool):
                raise InvalidRequestError(f"filter {item!r}: only strings, numbers and booleans "
                                          "can be matched", param="filters")
        elif equals >= 0:
            key, value = item[:equals], item[equals + 1:]
            # "intent = card_arrival" matched nothing: the value was " card_arrival". (A value
            # whose spaces matter is written as JSON: key:=" padded ".)
            value = value.strip()
        elif _COMPARISON.search(item):  # `year>2019`: no range syntax, said so
            raise InvalidRequestError(f"filter {item!r}: {COMPARISON_REFUSAL}", param="filters")
        else:
            # Worded for every edge (the UI's filter box too): no CLI flag in it.
            raise InvalidRequestError(f"filter {item!r} has no '='; write key=value, e.g. "
                                      "label=refund or source=/data/a.txt (key:=2020 for a number)",
                                      param="filters")
        key = key.strip()
        if not key:
            raise InvalidRequestError(f"filter {item!r} has an empty key", param="filters")
        if key.endswith(_COMPARISON_KEY):  # `year>=2019` read as the field 'year>'
            raise InvalidRequestError(f"filter {item!r}: {COMPARISON_REFUSAL}", param="filters")
        if key in filters:
            previous = filters[key]
            filters[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            filters[key] = value
    return filters


# Payload integers are 64-bit in Qdrant: a larger filter value cannot match and broke the
# store's request (an HTTP 500).
_INT64 = (-(2**63), 2**63 - 1)


# Characters of a query or an instruction a search takes (the UI cuts them to
# FACET_UI_MAX_QUERY_CHARS, 2,000, first).
MAX_QUERY_CHARS = 200_000
# Values one filter key may list (any of). The store checks a list value by value: 60,000
# integers took 33 s and 60,000 strings under hybrid 155 s on a 5-document collection, and a
# 16 MB request body holds about 40 times that.
MAX_FILTER_VALUES = 1000
# Keys one search's filters may hold (all must match). Uncapped, 50,000 keys took 43 s of a
# server's CPU for one request (the checks and the notes are per key: the security exploration
# of the sixth session of 2026-12-02); a document's metadata has a few.
MAX_FILTER_KEYS = 100


def check_filters(filters: Any) -> None:
    """Refuse filters a store cannot run (the search's and the clustering's).

    Raises:
        InvalidRequestError: not a mapping, or one of over ``MAX_FILTER_KEYS`` keys; a value
            that is not a string, a 64-bit integer, a
            finite number, a boolean or a non-empty list of them; a list of more than
            ``MAX_FILTER_VALUES``; an empty or blank key; a comparison (a key ending in ``>``,
            ``<`` or ``!``, as ``year>=2019`` typed reads, or in ``>=``, ``<=`` or ``!=``, as
            ``{"year>=": 2019}`` sends it; an operator object, ``{"$gt": 2019}``), as
            ``parse_filters`` refuses them.
    """
    if not isinstance(filters, Mapping):
        raise InvalidRequestError(
            f"filters must map payload fields to values ({{'intent': 'refund'}}), got "
            f"{type(filters).__name__} {filters!r:.80}", param="filters")
    if len(filters) > MAX_FILTER_KEYS:
        raise InvalidRequestError(
            f"filters name {len(filters):,} fields; at most {MAX_FILTER_KEYS} can be matched in one "
            "search (every one must match)", param="filters")
    for key, value in filters.items():
        if not isinstance(key, str) or '"' in key:
            raise InvalidRequestError(
                f"filter key {key!r} cannot be matched: a key is the name of a metadata field "
                "(a string without double quotes)", param="filters")
        if not key.strip():  # {"": "t1"} ran as the field '' (parse_filters refuses `=t1`)
            raise InvalidRequestError(f"filter {key!r} has an empty key", param="filters")
        if key.rstrip().endswith(_COMPARISON_KEY) or (isinstance(value, Mapping) and any(
                isinstance(k, str) and k.startswith("$") for k in value)):
            raise InvalidRequestError(f"filter {key!r}: {COMPARISON_REFUSAL}", param="filters")
        values = value if isinstance(value, list | tuple) else [value]
        if not values or not all(isinstance(v, str | int | float | bool) for v in values):
            raise InvalidRequestError(
                f"filter {key!r}: {value!r} cannot be matched; use a string, a number, a "
                "boolean or a non-empty list of them (any of)", param="filters")
        if len(values) > MAX_FILTER_VALUES:
            raise InvalidRequestError(
                f"filter {key!r} lists {len(values):,} values; at most {MAX_FILTER_VALUES:,} can "
                "be matched in one search (store a shared value, e.g. a group field, and filter "
                "on that)", param="filters")
        if not is_text(key):  # (the store's client raised a TypeError: a traceback)
            raise InvalidRequestError(
                f"filter key {key!r} is not valid UTF-8 text, so no field is named so",
                param="filters")
        for v in values:
            if isinstance(v, str) and not is_text(v):
                raise InvalidRequestError(
                    f"filter {key!r}: {v!r} is not valid UTF-8 text, so it matches nothing",
                    param="filters")
            if isinstance(v, float) and not math.isfinite(v):
                raise InvalidRequestError(f"filter {key!r}: {v} matches nothing; use a finite number",
                                          param="filters")
            if isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
                raise InvalidRequestError(f"filter {key!r}: {v} is outside the 64-bit integers "
                                          "that payloads hold, so it matches nothing",
                                          param="filters")
    # Two keys of one field (``year`` and ``meta.year``; a name typed composed and decomposed):
    # the payload filters are a mapping by field, so the second silently replaced the first
    # (``year:=2020`` with ``meta.year:=2021`` found the 2021 document).
    named: dict[str, str] = {}
    for key in filters:
        path = _filter_path(key)
        if path in named:
            forms = (" (one of them spelled with a combining accent)"
                     if named[path].removeprefix("meta.") != key.removeprefix("meta.") else "")
            raise InvalidRequestError(
                f"filters {named[path]!r} and {key!r} both name the field "
                f"{key if key in TOP_LEVEL_FIELDS else _field_name(key)!r}{forms}: give it once (a "
                "list of values matches any of them)",
                param="filters")
        named[path] = key


_PLAIN_KEY = re.compile(r"[\w-]+")


def payload_filters(filters: Mapping[str, Any]) -> Filters:
    """Map user filter keys onto payload paths: ``doc_id``, ``source``, ``title`` and
    ``chunk_no`` are the point's own fields; any other key, or what follows ``meta.``, is a
    metadata field (``meta.source`` is a metadata column named ``source``). Metadata is flat
    (nested objects are not kept), so a key is one field even with a space, dot or bracket in
    it: such a key is quoted in Qdrant's path syntax (unquoted, ``a b`` was an invalid path and
    ``a.b`` read as a nested field that no payload holds)."""
    return {_filter_path(key): _either_form(value) for key, value in filters.items()}


def _filter_path(key: str) -> str:
    """The payload path a filter key names (``payload_filters``)."""
    if key in TOP_LEVEL_FIELDS:
        return key
    field = _field_name(key)  # (composed: keys are stored so, however typed)
    return "meta." + (field if _PLAIN_KEY.fullmatch(field) else f'"{field}"')


def user_filter_words(message: str, filters: Mapping[str, Any]) -> str:
    """A store's refusal of a filter, ``filter 'meta.published': ...``, with the key as the
    user gave it (``filter 'published': ...``): the store sees the payload paths of
    ``payload_filters``, which the user never typed."""
    for key in filters:
        for path in payload_filters({key: ""}):
            said = f"filter {path!r}"
            if path != key and message.startswith(said):
                return f"filter {key!r}" + message[len(said):]
    return message


def _field_name(key: str) -> str:
    """The metadata field a filter key names: ``meta.source`` is the field ``source``; in
    composed Unicode form (NFC), as indexing stores metadata keys (a csv header written
    decomposed by macOS, ``catégorie``, is the field typed composed)."""
    return unicodedata.normalize("NFC", key[len("meta."):] if key.startswith("meta.") else key)


def _key_spellings(session: Any, name: str) -> tuple[str, ...]:
    """The spellings of metadata key ``name`` to look up in SQL: as given, and on SQLite also
    JSON-escaped as the stored metadata text has it ("\\u0433..." for "г": the JSON column is
    written with ``json.dumps``'s ASCII escapes, and SQLite 3.40 matches a path's key against the
    raw text, so a Cyrillic or accented key was "held by no document"). PostgreSQL parses the
    JSON, so the key as given finds it and only that is asked."""
    escaped = json.dumps(name)[1:-1]
    if escaped == name or session.get_bind().dialect.name != "sqlite":
        return (name,)
    return (name, escaped)


def _either_form(value: Any) -> Any:
    """A string filter value (or each string of a list) as any of its composed and decomposed
    Unicode forms: "é" is one code point or "e" plus a combining accent (file names from macOS,
    text from some editors), and payloads are stored as written, so ``lang=français`` typed one
    way matched nothing stored the other way. A tuple is a list (``check_filters`` takes both):
    a Python caller's ``("français",)`` matched only the form typed."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    forms = [item for item in items if not isinstance(item, str)]  # numbers and booleans as given
    for item in items:
        if isinstance(item, str):
            forms += [f for f in dict.fromkeys([item, unicodedata.normalize("NFC", item),
                                                unicodedata.normalize("NFD", item)])
                      if f not in forms]
    return value if len(forms) == len(items) else forms


_SPACE = re.compile(r"\s+")


def _fold(word: str) -> str:
    """How a query word and a text word are compared for highlighting: folded as lexical search
    folds them (``scripts.fold``: "Café" typed and "Cafe" + U+0301 stored, "İstanbul" and
    "istanbul", "Straße" and "strasse", full-width and ASCII letters are one word), then
    case-folded."""
    return scripts.fold(word).casefold()


def _unspaced_matches(text: str, query: str) -> list[tuple[int, int]]:
    """Where the character pairs of the query's Chinese, Japanese, Thai... runs occur in
    ``text``'s runs, overlapping spans merged: those scripts have no spaces, so a word is not a
    ``\\w+`` run (a whole clause is) and "北京" was never highlighted in "北京是中国的首都"."""
    # As lexical search reads a query: its runs' pairs, or a run's one character (猫).
    grams = {g for run in scripts.UNSPACED_RUN.findall(query)
             for g in (scripts.pairs(run) or scripts.singles(run))}
    singles = any(len(scripts.singles(g)) == 1 for g in grams)
    spans: list[tuple[int, int]] = []
    for m in scripts.UNSPACED_RUN.finditer(text) if grams else ():
        units = [u for seg in scripts.segments(m.group()) for u in seg] if singles else []
        for a, b in sorted(scripts.pair_spans(m.group()) + units):
            if m.group()[a:b] not in grams:
                continue
            a, b = a + m.start(), b + m.start()
            if spans and spans[-1][1] > a:  # overlaps the last span: extend it
                spans[-1] = (spans[-1][0], max(b, spans[-1][1]))
            else:
                spans.append((a, b))
    return spans


@functools.lru_cache(maxsize=1 << 16)
def _cached_word_terms(word: str, version: str) -> frozenset[int]:
    return frozenset(lex.query_terms(word, version)[0])


# Words longer than this are not kept by ``_word_terms``' cache: counted by entries, it held
# 65,536 of any length (an unspaced run of 1 KB is one word: 64 MB; the verification round of
# the seventh session of 2026-12-06). Words are short; such a run is rare and read again.
_WORD_CACHED_CHARS = 64


def _word_terms(word: str, version: str) -> frozenset[int]:
    """The BM25 term ids of one word of a text under lexical definition ``version`` (none for a
    stopword): what a word search compared with the query's."""
    if len(word) > _WORD_CACHED_CHARS:
        return frozenset(lex.query_terms(word, version)[0])
    return _cached_word_terms(word, version)


def _lexical_matches(text: str, query: str, version: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a term of ``query`` as lexical search under definition ``version``
    reads both (Qdrant's tokenizer, English stemmer and stopwords: "bitter" matches
    "bitterness", "3" matches "3"; "the" nothing). Each word of the text is compared by its
    terms; an unspaced script's runs by their character pairs where the definition reads them
    so, else as whole runs (the word tokenizer's terms)."""
    wanted = set(lex.query_terms(query, version)[0])
    if not wanted:
        return []
    spans = {(m.start(), m.end()) for m in scripts.word_pattern().finditer(text)
             if wanted & _word_terms(m.group(), version)}
    if lex.DEFINITIONS[version][2]:
        spans |= set(_unspaced_matches(text, query))
    else:
        spans |= {(m.start(), m.end()) for m in scripts.UNSPACED_RUN.finditer(text)
                  if wanted & _word_terms(m.group(), version)}
    return sorted(spans)


def make_snippet(text: str, query: str, width: int = 240, *,
                 lexical: str | None = None) -> tuple[str, list[tuple[int, int]]]:
    """The ``width``-character window of ``text`` holding most query terms, and where the
    terms are in it (``(start, end)`` offsets into the snippet).

    ``lexical``: the lexical definition (``indexer.lexical.DEFINITIONS``) a word search of the
    text ran under; its terms are then what is highlighted, as that search matched them
    (``_lexical_matches``: a lexical hit on "bitterness" for "bitter", or on "3" of
    "Paragraph 3", showed no highlight). Without it, the query's words (not one letter, not a
    common stopword) are matched as written, case and Unicode form aside."""
    word = scripts.word_pattern()
    if lexical is not None and lexical in lex.DEFINITIONS and not lex.folds(lexical):
        spans = set(_lexical_matches(text, query, lexical))  # an older definition's, as it read
    else:
        # Matched in the folded text (half-width "ﾊﾟﾝﾀﾞ" is "パンダ", "ﬁ" is "fi"), each span then
        # put back where its characters are in ``text``.
        folded, where = scripts.fold_with_offsets(text)
        query = scripts.fold(query)
        if lexical is not None and lexical in lex.DEFINITIONS:
            in_folded = _lexical_matches(folded, query, lexical)
        else:
            terms = {_fold(t) for t in word.findall(query) if t.lower() not in _STOP and len(t) > 1}
            seen: dict[str, str] = {}  # each word of the text folded once (a chunk repeats its words)
            in_folded = sorted({(m.start(), m.end()) for m in word.finditer(folded)
                                if (seen.get(m.group()) or seen.setdefault(m.group(), _fold(m.group())))
                                in terms} | set(_unspaced_matches(folded, query)))
        spans = {(where[a][0], where[b - 1][1]) for a, b in in_folded}
    matches: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if matches and a < matches[-1][1]:  # a word of the query inside a highlighted run
            matches[-1] = (matches[-1][0], max(b, matches[-1][1]))
        else:
            matches.append((a, b))
    if len(text) <= width or not matches:
        start = 0
    else:
        # The matches are apart and in order, their ends too: those a window holds are the ones
        # from the first starting in it to the last ending in it (counted one by one for each
        # window, 54 matches took a third of a millisecond).
        starts, ends = [a for a, _ in matches], [b for _, b in matches]
        best, start = -1, 0
        for s in starts:
            window_start = max(0, min(s - width // 4, len(text) - width))
            n = max(0, bisect.bisect_right(ends, window_start + width) - bisect.bisect_left(starts, window_start))
            if n > best:
                best, start = n, window_start
    end = min(len(text), start + width)
    # Do not cut words in half (at any whitespace: lines of a table or a PDF have no spaces),
    # nor cut off a match the window was chosen for: one within 20 characters of an edge was
    # lost with the word cut (0.6% of random snippets lost a highlight so).
    inside = [(a, b) for a, b in matches if a >= start and b <= end]
    if start > 0:
        found = _SPACE.search(text, start, min(start + 20, inside[0][0]) if inside else start + 20)
        if found:
            start = found.end()
    if end < len(text):
        space = max(text.rfind(c, start, end) for c in " \n\t")
        if space > end - 20 and (not inside or space >= inside[-1][1]):
            end = space
    # Nor inside a character: a letter and its marks, an emoji sequence, a flag (a snippet began
    # "…\u200d👨🏼", the rest of a family; the second verification of 2026-12-06): its start
    # after the character it is in, its end before it, never past each other (moving the end
    # to the character's end made a snippet of 100,000 combining marks).
    first, last = start, end
    while first < last and 0 < first < len(text) and scripts.joins_previous(text, first, floor=0):
        first += 1
    while last > first and last < len(text) and scripts.joins_previous(text, last, floor=0):
        last -= 1
    if first < last:
        start, end = first, last
    snippet = text[start:end]
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    shift = len(prefix) - start
    highlights = [(a + shift, b + shift) for a, b in matches if a >= start and b <= end]
    return prefix + snippet + suffix, highlights


def with_recorded_options(model: Any, source: str, recorded: str, current: str,
                           changes: Sequence[str]) -> str | None:
    """``source`` with the served options (``model.OPTIONS``: GIRCSE's ``soft_tokens``) set to
    the values the recorded identity holds, when those are all that differ and setting them
    gives the recorded identity back; else None. A collection indexed with
    ``gircse[soft_tokens=4]`` before Facet recorded the spec keeps only the name, and a search
    loading ``gircse`` (5 soft tokens) was told to delete it and index it again."""
    served = set(getattr(model, "OPTIONS", ())) - {"max_length"}  # max_length: no conflict here
    if not changes or not set(changes) <= served:
        return None
    try:
        old, new = json.loads(recorded), json.loads(current)
    except ValueError:
        return None
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    values: dict[str, Any] = {}
    for key in changes:
        for fields, target in ((old.get("config"), new.get("config")), (old, new)):
            if isinstance(fields, dict) and isinstance(target, dict) and key in fields and key in target:
                values[key] = target[key] = fields[key]
                break
        else:
            # An option added after the collection was indexed (InstEmb's ``text_quotes``, which
            # its checkpoint now sets to ``drop``): it was read then as its default reads, as
            # ``identity_changes`` compares it.
            default = _option_default(old, new, key)
            if default is _NO_DEFAULT:
                return None
            values[key] = new["config"][key] = default
    if identity_changes(recorded, json.dumps(new, sort_keys=True), ignore=frozenset({"max_length"})):
        return None
    from embedders.registry import join_options, split_options  # a model is loaded here: torch is too

    base, options = split_options(source)
    options.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()})
    return join_options(base, options)


_NO_DEFAULT = object()

# Said where a conflict names a spec with options to send instead: a server takes one only where
# FACET_API_MODELS lists it (or the collection records it), so the advice alone was a 404.
_API_OPTIONS_NOTE = ("a server takes a name with options only where FACET_API_MODELS lists it or "
                     "the collection records it")


def added_options(recorded: str, changes: Sequence[str]) -> list[str]:
    """Which of ``changes`` the recorded identity of a trained method does not hold at all (an
    option added since it was indexed)."""
    try:
        old = json.loads(recorded)
    except ValueError:
        return []
    config = old.get("config") if isinstance(old, dict) else None
    return [k for k in changes if isinstance(config, dict) and k not in config and k not in old]


def _option_default(old: dict[str, Any], new: dict[str, Any], key: str) -> Any:
    """The default of trained-method config field ``key`` where identity ``new`` has it under
    ``config`` and the older identity ``old`` of the same method does not; else ``_NO_DEFAULT``."""
    method = new.get("method")
    if not isinstance(method, str) or old.get("method") != method:
        return _NO_DEFAULT
    if not isinstance(old.get("config"), dict) or not isinstance(new.get("config"), dict) \
            or key not in new["config"] or key in old["config"]:
        return _NO_DEFAULT
    from embedders.registry import config_defaults  # (a model is loaded here: torch is too)

    return config_defaults(method).get(key, _NO_DEFAULT)


def _same_vectors(recorded: str, current: str) -> bool:
    """Whether an embedder of identity ``current`` computes exactly the bare document vectors
    that one of identity ``recorded`` stored: the same identity but for ``instruction_weight``
    (read only under an instruction). Stricter than ``identity_changes``, which lets a dtype or
    ``max_length`` pass for a query; nothing recorded is not the same."""
    if not recorded:
        return False
    if recorded == current:
        return True

    def bare(identity: str) -> Any:
        fields = json.loads(identity)
        for part in (fields, fields.get("config")):
            if isinstance(part, dict):
                part.pop("instruction_weight", None)
        return fields

    try:
        old, new = bare(recorded), bare(current)
    except (ValueError, AttributeError):
        return False
    return isinstance(old, dict) and old == new


def stored_vectors(store: VectorStore, collection: str, name: str, ids: Sequence[str],
                   texts: Sequence[str], *, recorded: str, current: str,
                   read: Sequence[tuple[Hit, Mapping[str, list[float]]]] | None = None) -> np.ndarray | None:
    """The vectors ``name`` of points ``ids`` as the collection stores them (rows in ``ids``'
    order, unit length), where they are what an embedder of identity ``current`` would compute
    for ``texts`` read bare, else None (encode them): the vectors were written by the same
    version of it (``recorded``, the collection's identity of ``name``: ``_same_vectors``) and
    every point is still there, holding that vector and the text expected (a point rewritten or
    deleted since its text was read fails this). Rerank (``SearchService._rerank``) and
    clustering (``ClusterService._from_stored``) read their chunks' vectors here rather than
    encoding what the collection holds.

    ``read``: the points already read with their vectors (``retrieve``'s (hit, vectors) pairs,
    as ``scroll_with_vectors(collection, name)`` gives them: clustering a collection reads its chunks so),
    checked the same way, in place of retrieving them again."""
    if not _same_vectors(recorded, current):
        return None
    try:
        pairs = read if read is not None else store.retrieve(collection, list(ids), with_vectors=True)
        found = {hit.id: (hit.payload.get("text"), vectors.get(name)) for hit, vectors in pairs}
    except StoreError:  # gone meanwhile, or busy: encoding says what is wrong
        return None
    if any(found.get(i, (None, None))[0] != text or found[i][1] is None
           for i, text in zip(ids, texts, strict=True)):
        return None
    plain = np.asarray([found[i][1] for i in ids], dtype=np.float32)
    plain /= np.maximum(np.linalg.norm(plain, axis=1, keepdims=True), 1e-12)
    return plain


def refuse_if_busy(store: VectorStore, collection: str) -> None:
    """Raise ``StoreBusyError`` now where another process holds ``collection``'s embedded folder
    (a `facet serve`, another process's index job), before a model is loaded for it: a search
    loaded the embedder and encoded the query (15-20 s, minutes for an LLM embedder) and only
    then met the folder's lock, with the same refusal. The lock is taken as opening the shard
    first takes it (waiting ``FACET_STORE_WAIT_S``) and let go at once, the shard not loaded:
    a reader holds it no longer than before, so a writer starting during the load is not
    refused for it. Nothing for a collection this process has open (a server's
    own searches) or a store without folder locks (Qdrant's server; its local mode locks the
    whole folder when it opens: ``VectorStore.check_free``); other store errors are left to the
    search to say. A Qdrant server out of reach is said here too (``StoreUnavailableError``, in
    ``REACH_TIMEOUT_S``), not after the model's load and the client's 30 s."""
    try:
        store.check_free(collection)
    except (StoreBusyError, StoreUnavailableError):
        raise
    except StoreError:  # a name no folder can have: said later (a lock file that cannot be
        # written is StoreUnavailableError, raised above)
        return


def _with_more_documents(hits: list[Any], head: int, documents: int) -> list[Any]:
    """The first ``head`` hits, then the first hit of each document not among them, until
    ``documents`` documents are covered (hits are best first)."""
    kept = list(hits[:head])
    seen = {h.payload.get("doc_id") for h in kept}
    for h in hits[head:]:
        if len(seen) >= documents:
            break
        if h.payload.get("doc_id") not in seen:
            seen.add(h.payload.get("doc_id"))
            kept.append(h)
    return kept


class _Vanished(NotFoundError):
    """The collection's row, read by a search, was gone (or another collection's) when its
    vectors were looked for: deleted meanwhile; or it was not there, and then was: created
    meanwhile. ``search`` runs once more, as for a ``_replaced`` collection."""


# A collection with no job this young is one whose first job is being queued (``prepare``
# commits the collection, then the job): its search says so, not "no job has written to it".
JUST_CREATED_S = 60.0


class _NothingWrittenYet(NotFoundError):
    """A collection whose first job (queued or running) has not written to the vector store
    yet. ``search`` answers it with no results and ``note``, as it answers a search once the
    job has begun writing ("is being indexed (job N)"): the first search of a job's collection
    raised "nothing searchable yet", the next ones returned an empty list, so a LangChain chain
    crashed or got an empty context depending on timing. Other callers (``vector_names``: a
    clustering) get the ``NotFoundError``, ``note`` as its message."""

    def __init__(self, note: str, names: list[str]) -> None:
        super().__init__(note, param="collection")
        self.note = note
        self.names = names  # the embedders recorded for it (its job's)


class _RegistryImport:
    """Times the first import of ``embedders.registry`` (torch with it) in this process: what
    ``took`` says is the milliseconds since the start (or ``restart``) where the registry was
    imported meanwhile, once; else 0."""

    def __init__(self) -> None:
        self.cold = True
        self.restart()

    def restart(self) -> None:
        """Time from now; an import before now (outside the timed spans) is not counted."""
        self.cold = self.cold and "embedders.registry" not in sys.modules
        self.since = time.perf_counter()

    def took(self) -> float:
        if not self.cold or "embedders.registry" not in sys.modules:
            return 0.0
        self.cold = False
        return (time.perf_counter() - self.since) * 1000


class SearchService:
    """Instruction-aware search over a collection.

    Which named vectors a collection has is looked up in the metadata once and kept (a
    search is a few milliseconds; three SQL round trips were a visible part of it). The
    entry is dropped by ``forget`` (the facade calls it after indexing or deleting), and
    refreshed whenever the store disagrees with it, or the collection's row and embedder rows
    differ from those it was read from (``_stamp``, one query a search): a collection another
    process deleted and created again, or whose recorded embedder changed, kept its old spec
    here (same vector name and size: the store never disagreed) and was searched with it.
    """

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.encoder: QueryEncoder = ctx.encoder
        self._vectors: dict[str, list[str]] = {}
        self._lost_warned: set[tuple[str, int]] = set()  # (collection, job): vectors lost, warned
        self._identities: dict[str, dict[str, str]] = {}  # collection -> vector name -> identity
        self._sources: dict[str, dict[str, str]] = {}  # collection -> vector name -> what loads it
        self._dims: dict[str, dict[str, int]] = {}  # collection -> vector name -> its width
        self._stamps: dict[str, tuple[Any, ...]] = {}  # collection -> _stamp the above were read at
        self._comparable: set[tuple[str, str, int]] = set()  # (collection, vector, id(model)) checked
        # collection -> (when counted, its store's points, its chunks, a stopped removal's
        # ``stopped_removal_text``, its pending documents): ``_gaps_note``
        self._point_counts: dict[str, tuple[float, int, int, str | None, int]] = {}
        self.fusion = HYBRID_FUSION
        self.rerank_documents_instructed = RERANK_DOCUMENTS_INSTRUCTED
        # Recent queries' vectors, and the chunks a reranker read (``_kept_vectors``): the same
        # query searched again (another page, filter or top_k in the UI, a RAG pipeline asking
        # again) encoded it again, 150 of 155 ms with causal2vec on one CPU thread (`facet bench
        # --parts search`: docs/indexing.md).
        self.query_vectors = RecentVectors(int(ctx.settings.query_cache_mb * 2**20))
        self._keeping = threading.local()  # ``keeping_nothing``'s depth in each thread

    def forget(self, collection: str | None = None) -> None:
        """Drop what is known about ``collection`` (every collection when None), its reranker
        vectors kept included (a collection deleted and indexed again on another device may
        store vectors that differ by rounding)."""
        self.query_vectors.drop(lambda key: isinstance(key, tuple) and len(key) > 3 and key[3] is not None
                                and (collection is None or key[3] == collection))
        if collection is None:
            self._vectors.clear()
            self._identities.clear()
            self._sources.clear()
            self._dims.clear()
            self._stamps.clear()
            self._comparable.clear()
            self._point_counts.clear()
        else:
            self._vectors.pop(collection, None)
            self._identities.pop(collection, None)
            self._sources.pop(collection, None)
            self._dims.pop(collection, None)
            self._stamps.pop(collection, None)
            self._point_counts.pop(collection, None)
            self._comparable = {k for k in list(self._comparable) if k[0] != collection}  # a copy: other threads add

    def vector_names(self, collection: str) -> list[str]:
        """The named vectors (embedders) of ``collection``.

        Raises:
            NotFoundError: an unknown collection (naming the known ones), or one with nothing
                searchable yet (naming its job).
        """
        return self._vector_names(collection)

    @staticmethod
    def _stamp(session: Any, collection: str) -> tuple[Any, ...]:
        """What the cached entry of ``collection`` is valid for: its row's id and creation time
        (SQLite may give a deleted row's id to the next one), the store it was indexed into
        (another process's index run under another store records it anew: a server kept
        serving its old, stale copy) and its embedders' names, specs and identities, in one
        query; empty where no such collection is recorded."""
        if "\x00" in collection:  # as get_collection: no collection is named so
            return ()
        C, E = md.Collection, md.CollectionEmbedder
        rows = session.execute(select(C.id, C.created_at, C.backend, E.name, E.source, E.identity)
                               .outerjoin(E, E.collection_id == C.id)
                               .where(C.name == collection)).all()
        return tuple(sorted((tuple(r) for r in rows), key=lambda r: str(r[3])))

    def _vector_names(self, collection: str, refresh: bool = False) -> list[str]:
        names = None if refresh else self._vectors.get(collection)
        with self.ctx.sessions() as session:
            # Read first: a change made while the entry is read is seen at the next search.
            stamp = self._stamp(session, collection)
            if names is not None and stamp == self._stamps.get(collection):
                return names
            # Changed by another process (deleted and created again, an embedder's spec
            # recorded anew): the models checked against its old identities are checked again.
            self._comparable = {k for k in list(self._comparable) if k[0] != collection}
            coll = md.get_collection(session, collection)
            if coll is not None and coll.backend != self.store.backend:
                # Indexed into another store (FACET_VECTOR_BACKEND or FACET_QDRANT_URL switched
                # since): this store's copy, where it holds one, may be stale (switched back
                # after an index run under the other, searches served it without a word).
                from app.services.collections import backend_mismatch

                self._vectors.pop(collection, None)
                raise ConflictError(
                    f"collection {collection!r} is not in the vector store in use: "
                    + backend_mismatch(collection, coll.backend, self.store.backend),
                    param="collection")
            if coll is not None and not self.store.collection_exists(collection):
                # Recorded (a job was submitted) but nothing written yet: not "unknown", which
                # the list of known collections beside it contradicted.
                self._vectors.pop(collection, None)
                # Asked before the fresh read: a delete of this process drops the vectors before
                # its commit, so either it is still in flight now, or it committed and the read
                # below finds no row. Asked after it, a delete committing in between left the
                # row read and the flag down: "has nothing searchable yet: job N (completed)
                # ended before it wrote any document" of a collection being deleted.
                deleting = being_deleted(collection)
                with self.ctx.sessions() as fresh:  # (not this session's reads: they may be old)
                    now = md.get_collection(fresh, collection)
                if deleting or now is None or now.id != coll.id:
                    # Deleted (and perhaps created anew) since its row was read, the delete over
                    # before anything else told this search: not "holds none of it although job
                    # N completed" nor "no job has written to it" (``search`` runs it again).
                    raise _Vanished(f"collection {collection!r} was deleted while it was read",
                                    param="collection")
                latest = md.list_jobs(session, coll.id, 1)
                if not latest and (md.utcnow() - coll.created_at).total_seconds() < JUST_CREATED_S:
                    # A first `facet index` / POST /jobs commits the collection, then its job: a
                    # search between was told "no job has written to it (index into it, or
                    # delete it)" of a collection whose job was being queued.
                    raise _NothingWrittenYet(
                        f"collection {collection!r} was created a moment ago and its first job is "
                        "being queued: nothing searchable yet", [e.name for e in coll.embedders])
                if not latest:
                    why = "no job has written to it (index into it, or delete it)"
                else:
                    job, state = latest[0], effective_state(latest[0])[0]
                    if state in md.UNENDED_STATES:  # (a killed writer's row: its lease tells)
                        raise _NothingWrittenYet(
                            f"collection {collection!r} is being indexed (job {job.id}"
                            f"{', queued' if state == 'queued' else ''}): nothing searchable "
                            "yet; a search finds only what it has written so far",
                            [e.name for e in coll.embedders])
                    written = state in ("completed", "failed", "interrupted", "cancelled") \
                        and md.count_documents(session, coll.id, status="indexed")
                    # A database shared by data folders, this one not the collection's: its
                    # indexing is refused ("FACET_DATA_DIR may not be ..."), which the advice to
                    # index it again sent the user to (the PostgreSQL review of the fourth
                    # session of 2026-12-06).
                    from app.services.collections import wrong_data_folder

                    elsewhere = wrong_data_folder(session, self.ctx.settings, self.store, coll) \
                        if written else None
                    if elsewhere is not None:
                        why = (f"{elsewhere}; set FACET_DATA_DIR to the data folder it was "
                               "indexed into")
                    elif written:
                        why = (f"the vector store holds none of it although job {job.id} "
                               f"{state} (its store folder removed, or the metadata restored "
                               "apart from it?); index its sources again to write it anew")
                        # Data lost, not a person's mistake: the API logs a 404 at INFO, and
                        # `--log-level warning` hid it (the logs review of the seventh session
                        # of 2026-12-06). Once a collection and job, a process.
                        if (collection, job.id) not in self._lost_warned:
                            self._lost_warned.add((collection, job.id))
                            logger.warning("collection %r: %s", collection, why)
                    else:
                        # (An ended job: "has not written its first documents" read as if it
                        # would; a job cancelled before it started leaves such a collection.)
                        why = (f"job {job.id} ({state}) ended before it wrote any document: "
                               f"index into it again, or delete it (`facet delete {collection}`)")
                raise NotFoundError(f"collection {collection!r} has nothing searchable yet: {why}",
                                    param="collection")
            if coll is None:
                known = [c.name for c in md.list_collections(session)]
                self._vectors.pop(collection, None)
                if collection in known:
                    # Created between the two reads: "unknown collection 'c' (known: c)" (the
                    # verification round); ``search`` runs once more and finds it.
                    raise _Vanished(f"collection {collection!r} was created while it was read",
                                    param="collection")
                # Vectors under that name that this database does not know (its own lost, or
                # another database's): indexing into it is refused, so do not suggest it.
                try:
                    stray = self.store.collection_exists(collection)
                except StoreUnavailableError:
                    raise  # not "unknown collection (known: none)": the server is out of reach
                except StoreError:  # a name no store collection can have ("n\x001")
                    stray = False
                from app.services.collections import owned_advice

                owned = owned_advice(self.ctx.settings, collection) if stray else None
                raise NotFoundError(
                    f"unknown collection {collection!r} (known: {', '.join(known) or 'none'}); "
                    + (f"the vector store holds vectors under that name that this metadata "
                       f"database does not know: {owned}" if owned is not None else
                       f"the vector store holds vectors under that name that this metadata "
                       f"database does not know (a lost or another database?): delete "
                       f"{collection!r} to remove them, or point FACET_DATABASE_URL at the "
                       f"database that indexed them" if stray else
                       "indexing into a new name creates it"), param="collection")
            names = [e.name for e in coll.embedders]
            self._identities[collection] = {e.name: e.identity for e in coll.embedders}
            self._sources[collection] = {e.name: e.spec for e in coll.embedders}
            self._dims[collection] = {e.name: e.dim for e in coll.embedders}
        self._vectors[collection] = names
        self._stamps[collection] = stamp  # last: another thread matching it finds all the above
        return names

    def _check_width(self, collection: str, vector_name: str, query_spec: str, width: int) -> None:
        """Refuse a query vector of another width than the collection's ``vector_name`` vectors:
        a plugin whose ``dim`` changed (a setting it reads) while its identity did not got the
        store's "Vector dimension error: expected dim: 64, got 96", naming neither the embedder
        nor the widths' meaning (the plugin exploration of the sixth session of 2026-12-02).

        Raises:
            ConflictError: both widths, and what to do.
        """
        recorded = self._dims.get(collection, {}).get(vector_name)
        if recorded and width != recorded:
            raise ConflictError(
                f"{query_spec!r} now gives {width}-d vectors, and collection {collection!r} holds "
                f"{recorded}-d {vector_name!r} vectors: its width changed while its identity did "
                "not (a plugin reading its width from a setting?); search with the embedder as it "
                "was when the collection was indexed, or index the sources into a new collection")

    def _check_comparable(self, collection: str, vector_name: str, query_spec: str) -> None:
        """Refuse a query embedded (by ``query_spec``: a name, path or ``name[options]``) with a
        different version of the embedder that wrote the collection's ``vector_name`` vectors
        (retrained under the same name, a served option changed, or an option the request set
        that changes the vectors): its ranking against the stored vectors would be meaningless,
        and nothing else would say so. Options in ``COMPARABLE_ACROSS`` (minilm's
        ``instruction_weight``) pass.

        Checked once per collection, vector and loaded model where the model runs in this
        process; where workers encode the queries, against the identity the answering worker
        reported (``CeleryQueryEncoder.reported_identity``), on every query. A different
        ``max_length`` alone is no conflict here: it cuts long texts, not a query, so documents
        indexed at 256 tokens are searched by the same weights serving 96 (indexing refuses it).

        Raises:
            ConflictError: what changed, and how to rebuild the collection.
        """
        reported = getattr(self.encoder, "reported_identity", None)
        model = None if callable(reported) else self.ctx.embedders.peek(query_spec)
        if model is None:
            # Where workers encode the queries, their answer is what the query was encoded
            # with, even where this process has the model loaded too (`facet serve` loads it
            # for /v1/embeddings and to prepare index jobs): the local model was checked then,
            # and a worker of another version went unnoticed.
            current = reported(query_spec) if callable(reported) else None
            if current is None:
                return
            key = None  # a worker's answer: each query may come from another worker
        else:
            key = (collection, vector_name, id(model))
            if key in self._comparable:
                return
            current = model.identity
        recorded = self._identities.get(collection, {}).get(vector_name, "")
        changes = identity_changes(recorded, current, ignore=frozenset({"max_length"}))
        if changes:
            source = self._source(collection, vector_name)
            # The same weights under the options the collection was made with, where only
            # served options differ (one added since, set otherwise now: InstEmb's text_quotes).
            same = None if model is None else with_recorded_options(model, source, recorded, current, changes)
            if query_spec != source:
                by_default = query_spec == self.ctx.settings.default_embedder
                advice = (f"search with the embedder {same!r}, which reads as they were made "
                          f"({_API_OPTIONS_NOTE})" if same is not None and same != query_spec else
                          # (the default itself: "or name none" was what the user had done)
                          f"search with the embedder {vector_name!r}, or set FACET_DEFAULT_EMBEDDER "
                          "to it" if by_default else
                          f"search with the embedder {vector_name!r} (or name none)")
                raise ConflictError(
                    f"{query_spec!r} embeds differently from {source!r}, which wrote the {vector_name!r} "
                    f"vectors of collection {collection!r} ({', '.join(changes)} differ), so its query "
                    f"vectors are not comparable with the stored ones; {advice}, or index the sources "
                    f"into a new collection with the embedder {query_spec!r}")
            if key is None:  # the query was encoded by a worker: its copy may be what differs
                raise ConflictError(
                    f"the worker that encoded this query loads a different version of "
                    f"{vector_name!r} than the one that indexed collection {collection!r} "
                    f"({', '.join(changes)} differ): give every worker the same checkpoint files "
                    f"as the process that indexed it (or, if the checkpoint was retrained since, "
                    f"index the sources into a new collection)")
            spec = same
            if spec is not None:
                # Indexed with served options by a Facet that did not record them (only the name),
                # or before an option existed: the same weights, loaded with the options the
                # stored identity names (or their defaults then).
                added = added_options(recorded, changes)
                what = (f"collection {collection!r} was indexed by {source!r} before its option "
                        f"{', '.join(added)} existed, so as {spec!r} reads it; this search loads "
                        f"{source!r}, which now sets it otherwise" if added else
                        f"collection {collection!r} was indexed by {spec!r}, with options that this "
                        f"search, loading {source!r} (all the collection records: an older Facet kept "
                        f"no options), does not set")
                raise ConflictError(
                    f"{what} ({', '.join(changes)} differ); search it with --embedder {shell_word(spec)} "
                    f"(the API's embedder field: {_API_OPTIONS_NOTE}; `facet cluster --query` takes "
                    f"it as --search-embedder), or record it once: run `facet index` on its sources "
                    f"with --embedder {shell_word(spec)} (unchanged documents are not embedded "
                    f"again), and searches that name no embedder load it"
                    + ("; or index them into a new collection to read them as it does now" if added else ""))
            raise ConflictError(
                f"collection {collection!r} was indexed by a different version of {vector_name!r} "
                f"({', '.join(changes)} changed since), so this query's vector is not comparable with "
                f"the stored ones; index its sources into a new collection, or delete it and "
                f"index them again"
                + ("" if source != vector_name else
                   " (a collection indexed from a checkpoint directory before Facet recorded where "
                   "from: search with the checkpoint directory as the embedder)"))
        if key is not None:
            self._comparable.add(key)

    def _missing_embedder_hints(self, collection: str, spec: str) -> str:
        """What the refusal of a search whose embedder cannot be loaded adds after "put it
        back": that a plugin's name loads only where the plugin is registered, the copy of the
        weights, and, where the collection keeps term vectors, that a word search needs no
        embedder (it was left to be guessed that the collection was still searchable)."""
        hints = ""
        if "/" not in spec and "\\" not in spec:  # a name, not a checkpoint directory's path
            hints += f" ({PLUGIN_LOADS_WHERE_REGISTERED})"
        hints += ", or search with an embedder naming a copy of the same weights"
        try:
            lexical = self.store.has_lexical(collection)
        except StoreError:  # the search said what it could; the hint is not worth a second error
            lexical = False
        if lexical:
            hints += ("; a word search needs no embedder: mode lexical (`--mode lexical`) "
                      "searches this collection's term vectors (BM25)")
        return hints

    def _missing_counts(self, collection: str) -> tuple[int, dict[str, int]] | None:
        """The indexed documents of ``collection`` and, per embedder, how many lack its vectors
        (``md.vectors_missing``), read once per search: which embedder a search naming none
        uses (``_collection_embedder``) and the note on missing vectors
        (``_missing_vectors_note``) both read them. None for a collection of one embedder (the
        one that writes a document always writes its own vectors) or where the database cannot
        say."""
        names = self._vectors.get(collection) or []
        if len(names) < 2:
            return None
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None:
                    return None
                indexed = md.count_documents(session, coll.id, "indexed")
                return indexed, md.vectors_missing(session, coll.id, names, indexed)
        except SQLAlchemyError:  # a note only: the search's answer stands without it
            return None

    def _collection_embedder(self, request: SearchRequest
                             ) -> tuple[str, str | None, tuple[int, dict[str, int]] | None]:
        """The vector ``request`` searches; where it names no embedder and the default's
        vectors are incomplete, why another was used (``default_vector``: a newly added
        embedder took over searches from its job's first batch, the others' documents unfound);
        and ``_missing_counts`` (for the note), read once. The default embedder is read as
        indexing reads it (``named_default``): a checkpoint's path or a spec with options named
        the vector for indexing and not for searches."""
        names = self._vector_names(request.collection)
        counts = self._missing_counts(request.collection) if request.mode != "lexical" else None
        name, why = self._vector_choice(request, names, counts)
        return name, why, counts

    def _vector_choice(self, request: SearchRequest, names: list[str],
                       counts: tuple[int, dict[str, int]] | None) -> tuple[str, str | None]:
        """``_collection_embedder``'s vector and why, of ``names`` (the collection's)."""
        if not names:  # (read while a delete took them away: names[0] was an IndexError, a 500)
            raise _Vanished(f"unknown collection {request.collection!r}: it was deleted while it was "
                            "searched", param="collection")
        if request.embedder is None:
            sources = self._sources.get(request.collection, {})
            name, why = default_vector(self.ctx.settings.default_embedder,
                                       [(n, sources.get(n, n)) for n in names],
                                       counts[1] if counts is not None else None)
            return name or names[0], why
        if request.embedder in names:
            return request.embedder, None
        model_name = self.ctx.embedders.name_of(request.embedder)
        if model_name not in names:
            names = self._vector_names(request.collection, refresh=True)
        if model_name not in names:
            raise InvalidRequestError(
                f"collection {request.collection!r} has no vectors from {model_name!r} "
                f"(it has: {', '.join(names)}); pick one of those, or index the collection "
                f"with the embedder {model_name!r} first", param="embedder")
        return model_name, None

    @staticmethod
    def _bm25_as_lexical(request: SearchRequest) -> SearchRequest:
        """``embedder="bm25"``, the name a lexical search's response gives its ranking, as a
        lexical search (it was refused as "unknown embedder 'bm25'"); refused beside a mode that
        encodes the query, which needs a real embedder."""
        if not isinstance(request.embedder, str) or request.embedder.strip().lower() != LEXICAL_LABEL:
            return request
        if request.mode not in ("lexical", "auto"):
            raise InvalidRequestError(
                f"{LEXICAL_LABEL} is the word index, not an embedder: a {request.mode} search "
                "needs an embedder; for words alone use --mode lexical (mode \"lexical\")",
                param="embedder")
        return replace(request, embedder=None, mode="lexical")

    def _source(self, collection: str, vector_name: str) -> str:
        """What the collection recorded as loading the embedder of ``vector_name`` (its name when
        nothing was recorded)."""
        return self._sources.get(collection, {}).get(vector_name, vector_name)

    def _query_spec(self, request: SearchRequest, vector_name: str) -> str:
        """What encodes the query. Naming no embedder, or the vector itself: what wrote the
        vector, as the collection recorded it, options included (a checkpoint indexed from its
        directory is loaded from there, not as the registered model of the same name; a
        collection indexed with ``inbedder[instruction_weight=1]`` is searched at that weight
        when ``inbedder`` is named: naming the vector picks one of a collection's embedders, as
        the UI and the API do). Naming another spec: that, options included
        (``minilm[instruction_weight=0.25]`` overrides the recorded weight), so long as its
        vectors compare with the stored ones (_check_comparable)."""
        source = self._source(request.collection, vector_name)
        if request.embedder is None:
            # A default that names this vector only by the name it loads as (a checkpoint's
            # path, a spec with options the collection did not record): read as `-e DEFAULT`
            # reads it, options and all, and compared with the stored vectors; its options were
            # dropped without a word.
            matched = default_match(self.ctx.settings.default_embedder, [(vector_name, source)])
            return self.ctx.settings.default_embedder if matched is not None and matched[1] else source
        if request.embedder == vector_name:
            return source
        return request.embedder

    @staticmethod
    def validate(request: SearchRequest) -> None:
        """Check a request without running it.

        Raises:
            UnknownModelError: an embedder that is empty or blank, a rerank that is blank
                (an empty one is no rerank).
            InvalidRequestError: a query that is empty, not a string or not text, an
                instruction that is not text; an instruction, rerank or embedder that is not a
                string (or None), a rerank_depth that is not an int (or None), an exact or
                group_by_document that is not a bool; a score_threshold that is not a finite number,
                ``top_k`` or
                ``rerank_depth`` out of range, filters that are not a mapping, a filter value
                that is not a string, integer, boolean or list of them, a collection name no
                collection can have.
        """
        if not isinstance(request.query, str):
            raise InvalidRequestError(f"the query must be a string, got "
                                      f"{type(request.query).__name__} {request.query!r:.80}",
                                      param="query")
        if scripts.blank(request.query):
            raise InvalidRequestError("the query is empty: give the text to search for",
                                      param="query")
        for name in ("instruction", "rerank", "embedder"):
            check_str(getattr(request, name), name, optional=True)
        # An empty rerank is none, as `facet search --rerank ''` and POST /search read it.
        check_spec(request.embedder, "embedder", default="the collection's default")
        check_spec(request.rerank, "rerank", default="no reranking", empty_is_none=True)
        check_int(request.rerank_depth, "rerank_depth", optional=True)
        check_bool(request.exact, "exact")
        check_bool(request.group_by_document, "group_by_document")
        for what, text in (("query", request.query), ("instruction", request.instruction)):
            if isinstance(text, str) and len(text) > MAX_QUERY_CHARS:
                # A 5 MB query took 18 s (its words, its highlights), though an embedder reads
                # its first few hundred tokens only; a pasted page (108,000 characters) is served.
                raise TooLargeError(f"the {what} has {len(text):,} characters, more than the "
                                    f"{MAX_QUERY_CHARS:,} a search takes; an embedder reads only "
                                    "its first few hundred tokens: shorten it", param=what)
        try:  # not "unknown collection ...; indexing into a new name creates it": it is refused
            validate_name(request.collection)
        except StoreError as e:
            raise InvalidRequestError(str(e), param="collection") from e
        check_text_encodable(request.query, "the query", param="query")
        if isinstance(request.instruction, str):
            check_text_encodable(request.instruction, "the instruction", param="instruction")
        threshold = request.score_threshold
        if threshold is not None and (isinstance(threshold, bool)
                                      or not isinstance(threshold, int | float)
                                      or not math.isfinite(threshold)):
            raise InvalidRequestError(f"score_threshold must be a finite number, got {threshold!r}",
                                      param="score_threshold")
        if isinstance(request.top_k, bool) or not isinstance(request.top_k, int) or \
                not 1 <= request.top_k <= MAX_TOP_K:
            raise InvalidRequestError(f"k (the number of results) must be a whole number from 1 "
                                      f"to {MAX_TOP_K}, got {request.top_k!r}", param="k")
        if request.mode not in SEARCH_MODES:
            raise InvalidRequestError(f"mode must be one of {', '.join(SEARCH_MODES)}, got "
                                      f"{request.mode!r}", param="mode")
        if request.rerank_depth is not None and not 1 <= request.rerank_depth <= MAX_TOP_K:
            raise InvalidRequestError(f"rerank_depth must be from 1 to {MAX_TOP_K}, got "
                                      f"{request.rerank_depth}", param="rerank_depth")
        check_filters(request.filters)

    def search(self, request: SearchRequest) -> SearchResponse:
        """Run one search.

        A search whose collection another thread deleted, or deleted and created again, while
        it ran (``_replaced``) and that failed for it runs once more, on the collection the name
        stands for now: one step read the old collection and the next the new one, or none,
        and a soak test's searches said "keeps no term vectors", "has no vectors from ..." (400s
        blaming the request) or "the vector store holds none of it although job N completed" (a
        404 blaming lost files) of a collection being deleted and indexed again. Where that run
        fails the same way and no delete is in flight any more, a third run answers for the
        name as it is now ("unknown collection", or the collection indexed anew).

        Raises:
            InvalidRequestError: see ``validate``; an embedder the collection has no vectors of.
            NotFoundError: unknown collection (one whose first job, queued or running, has
                written nothing yet: no results, and a note saying so).
            BusyError: the collection was deleted or replaced while the search ran, three times,
                or twice and is being deleted now: search again.
        """
        started = time.perf_counter()
        self.validate(request)
        if request.instruction is not None and scripts.blank(request.instruction):
            # No instruction, as the embedders read one of invisible characters alone: it turned
            # an auto search dense and was echoed as read.
            request = replace(request, instruction=None)
        name = request.collection
        error: Exception | None = None
        for attempt in range(3):
            seen = self.store.generation(name)  # (before the name is looked up)
            try:
                return self._search(request, started if attempt == 0 else time.perf_counter())
            except Exception as e:
                if not (isinstance(e, _Vanished) or self._replaced(name, seen)):
                    raise
                error = e
            if attempt == 0:
                logger.info("collection %r was deleted or created anew while a search of it ran "
                            "(%s: %s); searching it once more", name, type(error).__name__, error)
            self.forget(name)
            # A third run only where the delete is over by now: the name answers as it is
            # (unknown, or indexed anew), not with a 429 for a collection simply gone.
            if attempt == 1 and being_deleted(name):
                break
        raise BusyError(f"collection {name!r} was deleted, or deleted and indexed again, "
                        "while this search ran (it may be being deleted now); search again "
                        "in a moment: the collection under that name answers then, or none "
                        "is found", param="collection") from error

    def _replaced(self, collection: str, seen: int) -> bool:
        """Whether ``collection`` was dropped or created anew in the store since its
        ``VectorStore.generation`` was ``seen``, or a delete of this process is removing it now
        (its rows, still there to a reader until the delete commits, and its vectors gone)."""
        return self.store.generation(collection) != seen or being_deleted(collection)

    def _search(self, request: SearchRequest, started: float) -> SearchResponse:
        """``search``'s one run, over a validated request."""
        request = self._bm25_as_lexical(request)
        instruction = (request.instruction or "").strip() or None
        timings: dict[str, float] = {}
        # The registry's first import (torch, ~1.5 s) is the first part of loading the model,
        # not of the query: "1405 ms, after 0.2 s loading minilm", and "1403 ms, after 0.2 s
        # loading minilm[instruction_weight=1]" where naming a spec with options imported it.
        registry = _RegistryImport()
        try:
            vector_name, chosen, counts = self._collection_embedder(request)  # (a spec's name)
        except _NothingWrittenYet as e:
            return self._nothing_written_yet(request, instruction, e, started)
        by_name = registry.took()
        query_spec = self._query_spec(request, vector_name)
        registry.restart()
        mode = self.resolve_mode(request, query_spec)  # (whether it reads the instruction)
        by_mode = registry.took()
        if by_mode:
            timings["load_model"] = by_mode
        if by_name and mode != "lexical":
            timings["load_model"] = timings.get("load_model", 0.0) + by_name

        query_vec: np.ndarray | None = None
        if mode != "lexical":
            refuse_if_busy(self.store, request.collection)  # before the model loads, not after
            t0 = time.perf_counter()
            try:
                if getattr(self.encoder, "embedders", None) is self.ctx.embedders and \
                        self.ctx.embedders.peek(query_spec) is None:
                    # Loaded here, in this process: timed apart (a one-off `facet search`
                    # reported a 5 s "query" that was 5 s of loading the model).
                    self.ctx.embedders.get(query_spec)
                    timings["load_model"] = timings.get("load_model", 0.0) + (time.perf_counter() - t0) * 1000
                    t0 = time.perf_counter()
                query_vec = self._query_vector(query_spec, request.query, instruction)
            except UnknownModelError as e:
                if query_spec == request.embedder:  # the request's embedder: that field
                    e.param = "embedder"
                    raise
                raise UnknownModelError(
                    f"the {vector_name!r} vectors of collection {request.collection!r} were written by "
                    f"{query_spec!r}, which cannot be loaded now ({e}); put it back"
                    + self._missing_embedder_hints(request.collection, query_spec)) from e
            timings["encode_query"] = (time.perf_counter() - t0) * 1000
            self._check_comparable(request.collection, vector_name, query_spec)
            self._check_width(request.collection, vector_name, query_spec, len(query_vec))

        depth = request.top_k
        if request.rerank:
            depth = max(request.rerank_depth or 5 * request.top_k, request.top_k)
        # Hybrid fuses lists as long as the request asks for, not as grouping over-fetches: longer
        # lists let other chunks into the fused top, so grouped and chunk results disagreed.
        lists = depth
        # What the reranker reads: --rerank-depth chunks, however far grouping fetches (it was
        # the grouped fetch's 4 x k, so --rerank-depth 3 with k=3 reranked 12 chunks).
        candidates = depth
        if request.group_by_document:
            depth = min(GROUP_MAX_DEPTH, max(depth, GROUP_FETCH_FACTOR * request.top_k))
        t0 = time.perf_counter()
        hits = self._vector_search(request, mode, vector_name, query_vec, depth, lists)
        while (request.group_by_document and len({h.payload.get("doc_id") for h in hits}) < request.top_k
               and (len(hits) == depth < GROUP_MAX_DEPTH or (mode == "hybrid" and lists < depth))):
            if len(hits) == depth:
                depth = min(GROUP_MAX_DEPTH, depth * 4)  # a few documents hold most matches
            lists = depth
            hits = self._vector_search(request, mode, vector_name, query_vec, depth, lists)
        if request.rerank and len(hits) > candidates:
            # The reranker reads the first `candidates` chunks and the best chunk of each further
            # document until top_k documents are among them: a long document's chunks filled the
            # candidates and a grouped rerank returned fewer documents than asked.
            hits = _with_more_documents(hits, candidates, request.top_k)
        timings["vector_search"] = (time.perf_counter() - t0) * 1000

        rerank_scores: list[float] | None = None
        reranker_name: str | None = None
        if request.rerank and hits:
            t0 = time.perf_counter()
            try:
                if getattr(self.encoder, "embedders", None) is self.ctx.embedders and \
                        self.ctx.embedders.peek(request.rerank) is None:
                    # Loaded here: timed apart, as the query's embedder is (a first rerank with
                    # InBedder read "rerank 16.9 s" for 12 chunks, nearly all of it the load).
                    self.ctx.embedders.get(request.rerank)
                    # Its own key: the CLI said "after 4.2 s loading bm25" of a reranker's load.
                    timings["load_reranker"] = (time.perf_counter() - t0) * 1000
                    t0 = time.perf_counter()
                reranker_name = self.ctx.embedders.name_of(request.rerank)
                rerank_scores = self._rerank(request, instruction, hits, query_spec, query_vec)
            except (UnknownModelError, UnknownEmbedderError) as e:
                raise _unknown_rerank(e, request.rerank) from e
            except InvalidRequestError as e:
                # "too long for this embedder" sent the user to the embedder, whose limit the
                # instruction kept (InBedder reranks at 43 tokens, minilm searches at 127).
                if e.param != "instruction" or request.rerank == query_spec:
                    raise
                raise instruction_refusal(e, f"the reranker {request.rerank}") from e
            order = np.argsort(-np.asarray(rerank_scores), kind="stable")
            hits = [hits[i] for i in order]
            rerank_scores = [rerank_scores[i] for i in order]
            timings["rerank"] = (time.perf_counter() - t0) * 1000

        t0 = time.perf_counter()
        scores: list[float | None] = (list(rerank_scores) if rerank_scores is not None
                                      else [None] * len(hits))
        more: list[list[int]] = [[] for _ in hits]
        if request.group_by_document:
            hits, scores, more = self._group(hits, scores, request.score_threshold)
        lexical = self._lexical_definition(request.collection) if mode != "dense" and hits else None
        results = [self._result(i, h, request.query, scores[i], more[i], lexical)
                   for i, h in enumerate(hits[:request.top_k])]
        best = max((r.score for r in results), default=None)
        if request.score_threshold is not None:
            results = [r for r in results if r.score >= request.score_threshold]
        timings["results"] = (time.perf_counter() - t0) * 1000
        timings["total"] = (time.perf_counter() - started) * 1000
        note = self._nothing_note(request, mode, results, best, vector_name, counts)
        if mode == "hybrid" and results and not any(r.highlights for r in results) and \
                not self._words_found(request, filtered=True):
            # Quietly dense-only before, its fused scores half the usual scale.
            why = (NO_QUERY_WORD if self._no_query_terms(request) else
                   f"{NO_INDEXED_WORD}{' within the filters' if request.filters else ''}")
            dense_only = f"{DENSE_ONLY_NOTE} ({why}): the results are the dense side's alone"
            note = f"{note}; {dense_only}" if note else dense_only
        if chosen is not None and mode != "lexical":
            # Without results, why there are none comes first: ``why_no_results`` reads the
            # note's start, and with the embedder's choice there it added "the collection
            # holds nothing searchable" to a threshold that had dropped every result.
            note = (chosen if not note else f"{note}; {chosen}" if not results else f"{chosen}; {note}")
        read = None
        if instruction is not None and (mode != "lexical" or reranker_name is not None):
            # An embedder registered as reading none (a hashing plugin): its vectors are the
            # same under any instruction, and the response said it was read.
            readers = [spec for spec, used in ((query_spec, mode != "lexical"),
                                               (request.rerank, reranker_name is not None)) if used and spec]
            read = any(reads_instruction(spec) for spec in readers)
            if not read:
                unread = (f"the instruction was not read: {', '.join(dict.fromkeys(readers))} "
                          "reads no instruction (its vectors are the same under any)")
                note = f"{note}; {unread}" if note else unread
            # A reranker that reads it orders the results: judged alone (a strong first stage
            # hid a reranker that barely follows it, the order its own: the quality exploration
            # of the fourth session of 2026-12-07).
            elif weak := weak_instruction_note([
                    spec for spec in ([request.rerank] if reranker_name is not None and request.rerank
                                      and reads_instruction(request.rerank) else readers)
                    if not read_as_none(loaded_model(self.encoder, spec), instruction)]):
                note = f"{note}; {weak}" if note else weak
        return SearchResponse(request.query, instruction, request.collection,
                              LEXICAL_LABEL if mode == "lexical" else vector_name,
                              reranker_name, results, timings, mode, instruction_read=read,
                              note=note,
                              embedder_spec=query_spec if query_vec is not None else None,
                              reranker_spec=request.rerank if reranker_name is not None else None)

    def _nothing_written_yet(self, request: SearchRequest, instruction: str | None,
                             pending: _NothingWrittenYet, started: float) -> SearchResponse:
        """No results and why, for a collection whose first job has written nothing yet: what
        a search answers once that job has begun writing, rather than "nothing searchable yet"
        raised (a 404) for the searches that came before its first batch. Nothing is encoded."""
        mode = "dense" if request.mode == "auto" else request.mode  # (no term vectors yet)
        names = pending.names or [self.ctx.settings.default_embedder]
        embedder = request.embedder or names[0]
        return SearchResponse(request.query, instruction, request.collection,
                              LEXICAL_LABEL if mode == "lexical" else embedder, None, [],
                              {"total": (time.perf_counter() - started) * 1000}, mode,
                              note=pending.note)

    def _nothing_note(self, request: SearchRequest, mode: str, results: list[SearchResult],
                      best: float | None = None, vector_name: str | None = None,
                      counts: tuple[int, dict[str, int]] | None = None) -> str | None:
        """The response's note: ``_older_terms`` once words were searched, and, when a filtered
        search found nothing, the filter keys no document holds (``_field_values``) and a
        value of the wrong type on the others (``filter_type_hint``): only the CLI and the UI
        said that one, the API and LangChain returned nothing with a null note.

        ``best``: the best score before ``score_threshold``; a search whose threshold dropped
        every result says so (the CLI blamed the collection, "holds nothing searchable"). An
        unfiltered word search that found nothing says ``NO_INDEXED_WORD`` first, as
        ``why_no_results`` does (which then says the note alone, not twice)."""
        if not results and best is not None and request.score_threshold is not None:
            # A threshold is a cosine: a hybrid search's fused ranks (about 0.03) and BM25's
            # unbounded scores are not (a RAG chain's 0.3 on hybrid found nothing, and the note
            # gave only the best score: the RAG exploration of the sixth session of 2026-12-02).
            scale = ("" if request.rerank or mode == "dense" else
                     "; a hybrid search's scores are fused ranks (about 0.03), not cosines: for a "
                     "cosine threshold search with mode dense" if mode == "hybrid" else
                     "; a lexical search's scores are BM25's, which grow with the words matched, "
                     "not cosines: for a cosine threshold search with mode dense")
            return (f"{_BELOW_THRESHOLD}{request.score_threshold:g} or more (score_threshold); "
                    f"the best scored {best:.3f}{scale}")
        if mode == "lexical" and not results and self._no_query_terms(request):
            # Not that the collection lacks the query's words: the query has none (🍕, "the").
            notes_ = [NO_QUERY_WORD, self._older_terms(request.collection)]
            return "; ".join(n for n in notes_ if n)
        if mode == "lexical" and not results and request.filters and \
                not self._words_found(request, filtered=False):
            # No word of the query is indexed anywhere: the filters are not what to check.
            notes_ = [NO_INDEXED_WORD, self._older_terms(request.collection)]
            return "; ".join(n for n in notes_ if n)
        older = self._older_terms(request.collection) if mode != "dense" else None
        notes = [older]
        if mode != "lexical" and vector_name is not None:
            notes.append(self._missing_vectors_note(request.collection, vector_name, counts))
        notes.append(self._gaps_note(request.collection))
        if request.filters and not results:
            notes += self.filter_notes(request.collection, request.filters)
        elif request.filters and "chunk_no" in request.filters:
            # `chunk_no:=3` found the chunks numbered 3, where the records' own chunk_no field
            # was meant (asked of chunk_no only: a search on source or doc_id is common, and
            # finds what it names).
            notes.append(builtin_twin_note(
                request.filters, self._builtin_twins(request.collection,
                                                     {"chunk_no": request.filters["chunk_no"]},
                                                     values=False),
                found=True))
        if not results:
            being_indexed = self.being_indexed_note(request.collection)
            notes.append(being_indexed)
            if being_indexed is None:
                # First: what the CLI said ("holds nothing searchable") the API and LangChain
                # did not, answering an empty list with a null note.
                notes.insert(0, self.nothing_searchable_note(request.collection))
            if mode == "lexical" and not request.filters and older is None and \
                    being_indexed is None and not any(
                        n and n.startswith(NOTHING_SEARCHABLE) for n in notes):
                # Nor "no indexed word of the query is in it" (`cafe` over "café"): the CLI and
                # the UI said it (``why_no_results``), the API and LangChain had a null note. Not
                # where the collection holds nothing searchable, nor while a job writes it (its
                # words may not be in yet: that note says so), nor beside the older term
                # vectors' note, which says why (``why_no_results`` adds it there).
                notes.insert(0, NO_INDEXED_WORD)
        return "; ".join(n for n in notes if n) or None

    def _no_query_terms(self, request: SearchRequest) -> bool:
        """Whether the query has no term under the collection's definition of one (symbols,
        emoji, stopwords only); False where the store cannot say."""
        version = self._lexical_definition(request.collection)
        return version in lex.DEFINITIONS and not lex.query_terms(request.query, version)[0]

    def _words_found(self, request: SearchRequest, *, filtered: bool) -> bool:
        """Whether a word search for the query finds anything in the collection (within the
        filters where ``filtered``); True where the store cannot say (a note only)."""
        try:
            return bool(self.store.search_lexical(
                request.collection, request.query, limit=1,
                filters=payload_filters(request.filters) if filtered else None))
        except StoreError:
            return True

    def nothing_searchable_note(self, collection: str) -> str | None:
        """That ``collection`` exists but holds no indexed document (every document failed, an
        empty folder indexed), with its latest job and that job's message; None where some
        document is indexed, or the database cannot say."""
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None or md.count_documents(session, coll.id, "indexed"):
                    return None
                total = md.count_documents(session, coll.id)
                latest = md.list_jobs(session, coll.id, 1)
                job = ""
                if latest:
                    # Its state and message as `facet jobs` shows them: a killed job's row kept
                    # its last progress text ("job 11: encoding chunk 0/124 of this batch").
                    state, said = effective_state(latest[0])
                    job = (f" (job {latest[0].id}: {said})" if said and state == "completed"
                           else f" (job {latest[0].id} {state}: {said})" if said
                           else f" (job {latest[0].id}: {state})")
        except SQLAlchemyError:  # a note only
            return None
        return (f"{NOTHING_SEARCHABLE}: {total:,} document{'' if total == 1 else 's'}, none "
                f"indexed{job}")

    def being_indexed_note(self, collection: str, reader: str = "a search finds") -> str | None:
        """That a job is writing ``collection`` now, for a search that found nothing: a
        server's search during its own job's first batch returned no results and no note. (On
        the embedded store another process's job refuses the search, naming it; with a Qdrant
        server, whose collections any process may read, the note says it of that job too.)
        ``reader``: who reads only what the job wrote (a clustering of too few chunks says it:
        "a clustering reads")."""
        from app.services.collections import effective_state

        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                # (A killed writer's row still says running: its lease tells.)
                jobs = [] if coll is None else [j for j in md.list_jobs(session, coll.id, limit=5)
                                                if j.state == "running" and effective_state(j)[0] == "running"]
        except SQLAlchemyError:  # a note only
            return None
        if not jobs:
            return None
        return (f"collection {collection!r} is being indexed (job {jobs[0].id}): {reader} "
                "only what it has written so far")

    def filter_notes(self, collection: str, filters: Mapping[str, Any]) -> list[str]:
        """Why ``filters`` matched nothing in ``collection``: each key no document holds ("no
        document has a field 'topik'") and a value of the wrong type (``filter_type_hint``).
        A search's note and a clustering's refusal both say it."""
        held = self._field_values(collection, filters)
        missing = list(dict.fromkeys(_field_name(key) for key, value in held.items()
                                     if value is None))
        dropped = self._dropped_fields(collection, missing) if missing else {}
        cases = self._other_cases(collection, missing) if missing else {}
        notes: list[str | None] = [
            f"no document has a field {name!r}"
            + (f" (it was not kept when indexed: {dropped[name]}; the indexing job's warnings "
               "say so)" if name in dropped else "")
            + (f" (did you mean {_either(cases[name])}?)" if cases.get(name) else "")
            for name in missing]
        notes += self._unheld_values(collection, filters, held)
        builtins = self._builtin_twins(collection, filters)
        notes.append(builtin_twin_note(filters, builtins))
        notes.append(self._relative_path_note(collection, filters))
        notes.append(self._title_note(collection, filters))
        notes.append(filter_type_hint(filters, held, self._type_twins(collection, filters, held),
                                      shadowed=builtins))
        return [n for n in notes if n]

    def _unheld_values(self, collection: str, filters: Mapping[str, Any], held: Mapping[str, Any]) -> list[str]:
        """For a field of strings some document holds, each string the filter asks for that no
        document holds there, with the held values spelt close to it: "no document has
        'refund_not_showing_up' in field 'intent' (did you mean 'Refund_not_showing_up'?)". A
        misspelt key was told "did you mean", a misspelt or wrongly cased value nothing: an
        empty result and, in a RAG chain, an empty context (the RAG exploration of the sixth
        session of 2026-12-02). Read from up to ``_VALUE_ROWS`` documents' values of the field in
        SQL; where there are more, a value is said unheld only if an exact SQL match finds none
        and no value read was a list (a list field's element cannot be matched so)."""
        D = md.Document
        notes: list[str] = []
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None:
                    return []
                for key, value in filters.items():
                    name = _field_name(key)
                    values = value if isinstance(value, list | tuple) else [value]
                    wanted = [v for v in values if isinstance(v, str)]
                    numbers = [v for v in values if _is_number(v)]
                    # (held: one value read of the field, a list or a number too: None where no
                    # document holds the field, which its own note says)
                    if held.get(key) is None or not (wanted or numbers) or '"' in name \
                            or "\\" in name:
                        continue
                    seen: set[str] = set()
                    held_numbers: set[float] = set()
                    rows = others = bools = 0
                    for spelling in _key_spellings(session, name):
                        for stored in session.scalars(select(D.meta[spelling]).where(
                                D.collection_id == coll.id, D.meta[spelling].as_string().is_not(None))
                                .limit(_VALUE_ROWS)):
                            rows += 1
                            items = stored if isinstance(stored, list) else [stored]
                            seen.update(item for item in items if isinstance(item, str))
                            held_numbers.update(float(item) for item in items if _is_number(item))
                            bools += any(isinstance(item, bool) for item in items)
                            others += any(not isinstance(item, str) for item in items)
                    # A field of true/false: PostgreSQL gives them as such; SQLite reads them as
                    # 1/0, so there they are told from the documents' metadata itself.
                    flags = bool(numbers and ((bools and not held_numbers) or (
                        held_numbers and held_numbers <= {0.0, 1.0}
                        and self._holds_booleans(session, coll.id, name))))
                    if flags:
                        held_numbers = set()
                    if others:  # numbers too: a "2" for a 2 is the type hint's (``filter_type_hint``)
                        wanted = [item for item in wanted if not _reads_as_number(item)]
                        if numbers and rows < _VALUE_ROWS:
                            # Every value read: a number no document holds, as a number or as
                            # text (that twin is the type hint's), got no word, nor did 1 on a
                            # field of true/false (what the edge store's refusal of booleans
                            # invites: qdrant-edge reads them as 1/0, but Facet's never match).
                            absent = [forms[-1] for forms in map(_typed_forms, numbers)
                                      if float(forms[0]) not in held_numbers
                                      and not any(text in seen for text in forms[1:])]
                            if absent and not held_numbers and flags and not seen:
                                notes.append(f"field {name!r} holds true/false, which no number "
                                             f"matches ({_or_list(absent)} matched none)")
                            elif absent:
                                notes.append(f"no document has the number {_or_list(absent)} in "
                                             f"field {name!r}")
                    elif numbers and rows < _VALUE_ROWS:
                        # Every value read, and text only: a number never matches here. Where its
                        # text twin is held ("5" for 5) the type hint says so; else it got no
                        # word at all (`{"category": 5}` found nothing, `"5"` was said unheld).
                        # Each number's text forms (``_typed_forms``: 5 as "5", 2.0 as "2.0"
                        # and "2"), the last the one said.
                        strays = [forms[-1] for forms in map(_typed_forms, numbers)
                                  if not any(text in seen for text in forms[1:])]
                        if strays and seen:
                            notes.append(
                                f"no document has the number {_or_list(strays)} in field {name!r}: it "
                                f"holds text (such as {sorted(seen)[0]!r}), and a number matches "
                                "only a number")
                    said = 0
                    for item in wanted:
                        forms = _either_form(item)
                        forms = forms if isinstance(forms, list) else [forms]
                        if any(form in seen for form in forms):
                            continue
                        if rows >= _VALUE_ROWS and self._value_held(session, coll.id, name, forms):
                            continue
                        said += 1
                        if said <= _VALUE_NOTES:
                            close = _close_names(item, seen)
                            notes.append(f"no document has {item!r} in field {name!r}"
                                         + (f" (did you mean {_either(close)}?)" if close else ""))
                    if said > _VALUE_NOTES:  # (the others were dropped without a word)
                        notes.append(f"no document has {plural(said - _VALUE_NOTES, 'other value')} of "
                                     f"the filter on {name!r} either")
        except SQLAlchemyError:  # a hint only: the search's answer stands without it
            logger.debug("could not read which filter values exist", exc_info=True)
            return []
        return notes

    @staticmethod
    def _holds_booleans(session: Any, collection_id: int, name: str) -> bool:
        """Whether the documents holding field ``name`` (the first ``_BOOLEAN_ROWS``) hold only
        true/false there, read from their metadata itself (SQLite's JSON path gives 1/0)."""
        D = md.Document
        values = [(meta or {}).get(spelling) for spelling in _key_spellings(session, name)
                  for meta in session.scalars(select(D.meta).where(
                      D.collection_id == collection_id,
                      D.meta[spelling].as_string().is_not(None)).limit(_BOOLEAN_ROWS))]
        items = [item for v in values if v is not None
                 for item in (v if isinstance(v, list) else [v])]
        return bool(items) and all(isinstance(item, bool) for item in items)

    @staticmethod
    def _value_held(session: Any, collection_id: int, name: str, forms: list[str]) -> bool:
        """Whether a document of the collection holds one of ``forms`` in field ``name``: as its
        value, or, read generously, inside its JSON text (a list's element: ``["a", "b"]``)."""
        D = md.Document
        for spelling in _key_spellings(session, name):
            text = D.meta[spelling].as_string()
            for form in forms:
                quoted = {json.dumps(form), json.dumps(form, ensure_ascii=False)}
                found = session.scalar(select(D.id).where(
                    D.collection_id == collection_id,
                    or_(text == form, *(text.contains(q, autoescape=True) for q in quoted))).limit(1))
                if found is not None:
                    return True
        return False

    def _dropped_fields(self, collection: str, names: Sequence[str]) -> dict[str, str]:
        """Why each of the metadata fields ``names``, which no document holds, was left out at
        indexing (an object, a list holding null: ``indexer.parsing._scalar_metadata``'s
        warning, recorded on the first document of a file that had it), by name; a field not
        so left out is not in it. Asked only of the keys of a filtered search that found
        nothing, one LIMIT 1 query each."""
        D = md.Document
        out: dict[str, str] = {}
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None:
                    return {}
                for name in names:
                    said = f"metadata field {name!r} not kept: "
                    warning = session.scalar(select(D.warning).where(
                        D.collection_id == coll.id,
                        D.warning.contains(said, autoescape=True)).limit(1))
                    if warning:
                        why = warning[warning.index(said) + len(said):]
                        out[name] = re.split(r" \(|; ", why, maxsplit=1)[0]
        except SQLAlchemyError:  # a note only
            logger.debug("could not read the fields left out at indexing", exc_info=True)
            return {}
        return out

    def _builtin_twins(self, collection: str, filters: Mapping[str, Any], *,
                       values: bool = True) -> dict[str, list[Any]]:
        """The values to name as ``meta.<name>`` for each filter key naming a point's own field
        (``builtin_twin_note``), by key: such a filter matches the point's field, never the
        record's of that name (a csv column ``chunk_no`` or ``source``; ``meta.chunk_no``
        does). The filter's values as some document's own field holds them, in each type held
        (the number 1 and the string "1" where a jsonl holds numbers and a csv text), a key
        none of whose values is held left out (``meta.source=x`` was advised where no record's
        ``source`` is x: it matched nothing too); one LIMIT query per key. ``values=False``
        (a search that found results): the filter's values in each type the field holds at
        all, two LIMIT 1 queries per key."""
        keys = [k for k in filters if k in TOP_LEVEL_FIELDS]
        if not keys:
            return {}
        D = md.Document
        out: dict[str, list[Any]] = {}
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None:
                    return {}
                for key in keys:
                    given = filters[key] if isinstance(filters[key], list | tuple) else [filters[key]]
                    path = cast(D.meta[key], String)  # the JSON text: "3" for 3, "\"3\"" for "3"
                    if not values:
                        held = [session.scalar(select(D.meta[key]).where(
                            D.collection_id == coll.id, D.meta[key].as_string().is_not(None),
                            path.like('"%') if text else path.not_like('"%')).limit(1))
                            for text in (True, False)]
                        forms = [_held_as(v, h) for h in held if h is not None for v in given]
                    else:
                        texts: dict[str, Any] = {}  # a JSON text a document may hold: its value
                        for v in given:
                            for form in _typed_forms(v):
                                # (SQLite quotes a text's non-ASCII characters as they
                                # are; PostgreSQL keeps the stored \u escapes)
                                for text in (_number_texts(form) if _is_number(form) else
                                             (json.dumps(form), json.dumps(form, ensure_ascii=False))):
                                    texts.setdefault(text, form)
                        found = set(session.scalars(select(path).where(
                            D.collection_id == coll.id, path.in_(list(texts))).distinct()
                            .limit(len(texts))))
                        forms = [form for text, form in texts.items() if text in found]
                    forms = list({(type(f), f): f for f in forms}.values())
                    if forms:
                        out[key] = forms
        except SQLAlchemyError:  # a note only
            logger.debug("could not read the fields named like a point's own", exc_info=True)
            return {}
        return out

    def _title_note(self, collection: str, filters: Mapping[str, Any]) -> str | None:
        """Why a ``title`` filter matched nothing: no document of the collection has a title
        (`title=x` came back empty with no note: a title is a document's own field, not
        metadata, so the missing-field note never looked), or none has the ones asked for, with
        the held titles spelt close to them."""
        value = filters.get("title")
        wanted = [v for v in (value if isinstance(value, list | tuple) else [value])
                  if isinstance(v, str)]
        if not wanted:
            return None
        D = md.Document
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None:
                    return None
                titles = {str(t) for t in session.scalars(select(D.title).where(
                    D.collection_id == coll.id, D.title.is_not(None)).distinct()
                    .limit(_VALUE_ROWS))}
                # A file of no title of its own is titled by its name where it is searched
                # (``IndexService``: a record is not): `title=notes.txt` found it, and a near
                # miss was told "no document has a title" (the filters review of the seventh
                # session of 2026-12-06).
                titles |= {Path(str(source)).name for source in session.scalars(
                    select(D.source).where(D.collection_id == coll.id, D.title.is_(None),
                                           D.key == D.source).distinct().limit(_VALUE_ROWS))}
        except SQLAlchemyError:  # a hint only
            logger.debug("could not read the collection's titles", exc_info=True)
            return None
        if not titles:
            return ("no document has a title (a Markdown file's front-matter title or first "
                    "heading, an HTML page's <title>, a PDF's or Word file's title property, a "
                    "jsonl/csv record's title field)")
        unheld = [v for v in wanted if v not in titles]
        if len(titles) >= _VALUE_ROWS or len(unheld) < len(wanted) or not unheld:
            return None
        close = _close_names(unheld[0], titles)
        return (f"no document is titled {_either(unheld)}"
                + (f" (did you mean {_either(close)}?)" if close else ""))

    def _relative_path_note(self, collection: str, filters: Mapping[str, Any]) -> str | None:
        """That a ``source`` or ``doc_id`` filter value which no document holds is a relative
        path, where sources and file keys are stored as absolute paths, naming the ones that
        end in it (`source=corpus/md/note1.md` found nothing, and the only note sent the user
        to ``meta.source``). One query per such value to tell none holds it, one for the paths
        ending in it; None where no such value is given. A value with a URL scheme or a drive
        (``https://blog.example.com/p7``, a front matter's ``source:``; ``C:\\notes``) is no
        relative path: it was told so, shown as 'https:/blog.example.com/p7'. A value is shown
        as given, never normalised."""
        D = md.Document
        notes: list[str] = []
        try:
            with self.ctx.sessions() as session:
                coll = None
                for key, column in (("source", D.source), ("doc_id", D.key)):
                    value = filters.get(key)
                    for v in (value if isinstance(value, list | tuple) else [value]):
                        if not isinstance(v, str) or not v.strip() or os.path.isabs(v) \
                                or v.startswith("~") or _NOT_A_PATH.match(v) \
                                or len(notes) >= _PATH_NOTES:
                            continue  # (a URL, a drive's path: not relative)
                        coll = coll or md.get_collection(session, collection)
                        if coll is None:
                            return None
                        if session.scalar(select(D.id).where(D.collection_id == coll.id,
                                                             column == v).limit(1)):
                            continue  # a record's id, or a key stored so
                        tail = os.path.normpath(v)
                        # In any case, on every database: SQLite's LIKE ignores the case of ASCII
                        # letters, PostgreSQL's does not, and `source=md/NOTE1.md` was told of
                        # note1.md on one only (the PostgreSQL review of 2026-12-06).
                        ends = list(session.scalars(select(column).where(
                            D.collection_id == coll.id,
                            column.iendswith(os.sep + tail, autoescape=True)).distinct()
                            .limit(_PATH_NOTES)))
                        if ends:
                            notes.append(
                                f"{key} {v!r} is a relative path, and sources and file keys are "
                                f"stored as absolute paths: "
                                f"{' or '.join(f'{key}={e}' for e in ends)} {_EDGE_FORMS}, in "
                                f"JSON {_as_json(key, [(key, e) for e in ends])}")
                        elif os.sep in v or "/" in v:
                            notes.append(
                                f"{key} {v!r} is a relative path, and sources and file keys are "
                                f"stored as absolute paths ({key}=/abs/...), none ending in "
                                f"{v!r} here: `facet documents {shell_word(collection)} "
                                "--prefix FOLDER` (GET /collections/NAME/documents?prefix=) "
                                "lists them")
        except SQLAlchemyError:  # a note only
            logger.debug("could not read the documents' paths", exc_info=True)
            return None
        return "; ".join(notes) or None

    def _other_cases(self, collection: str, names: Sequence[str]) -> dict[str, list[str]]:
        """The fields the documents of ``collection`` hold whose names differ from each of
        ``names`` (keys no document holds) only in case (``COLOR`` for ``color``, ``Color``),
        and a point's own field so named (``SOURCE``), by name. One query, of at most
        ``_CASE_ROWS`` documents whose metadata text holds such a key (ASCII case folded by SQL).

        A name with none so: the close spellings of it among the fields of at most
        ``_NAME_ROWS`` documents and a point's own (``tag`` for ``tags``, ``intnet`` for
        ``intent``: ``_close_names``), which were told only "no document has a field 'tag'"."""
        out: dict[str, list[str]] = {
            name: [name.lower()] for name in names if name.lower() in TOP_LEVEL_FIELDS}
        wanted = [name for name in names if '"' not in name and "\\" not in name]
        D = md.Document
        text = func.lower(cast(D.meta, String))
        close: dict[str, list[str]] = {}
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None:
                    return out
                metas: Iterable[Any] = session.scalars(select(D.meta).where(
                    D.collection_id == coll.id, or_(*[
                        text.contains(json.dumps(name.lower()) + ":", autoescape=True)
                        for name in wanted])).limit(_CASE_ROWS)) if wanted else ()
                for meta in metas:
                    for k in meta or {}:
                        for name in wanted:
                            if k != name and k.casefold() == name.casefold() \
                                    and k not in out.setdefault(name, []):
                                out[name].append(k)
                unmatched = [name for name in names if not out.get(name)]
                if unmatched:  # (closest first, not sorted as the case spellings are)
                    held = set(TOP_LEVEL_FIELDS)
                    for meta in session.scalars(select(D.meta).where(
                            D.collection_id == coll.id).limit(_NAME_ROWS)):
                        held.update(k for k in (meta if isinstance(meta, dict) else {})
                                    if isinstance(k, str))
                    for name in unmatched:
                        close[name] = _close_names(name, held)
        except SQLAlchemyError:  # a note only
            logger.debug("could not read the fields' names", exc_info=True)
        cases = {name: sorted(found) for name, found in out.items() if found}
        return cases | {name: found for name, found in close.items()
                        if found and name not in cases}

    def _missing_vectors_note(self, collection: str, vector_name: str,
                              counts: tuple[int, dict[str, int]] | None = None) -> str | None:
        """That some documents have no ``vector_name`` vectors (an embedder added to the
        collection part-way, or left out of a rewrite: ``CollectionInfo.vectors_missing``), so
        a search with it cannot find them: it returned the others as if they were all. Asked
        only of a collection of two or more embedders (the one that writes a document always
        writes its own vectors). ``counts``: ``_missing_counts``, read for this search already."""
        counts = counts if counts is not None else self._missing_counts(collection)
        if counts is None:
            return None
        indexed, missing = counts[0], counts[1].get(vector_name)
        if not missing:
            return None
        spec = self._sources.get(collection, {}).get(vector_name, vector_name)
        return (f"{missing:,} of the {indexed:,} documents have no {vector_name!r} vectors yet, so "
                f"this search cannot find them: `facet index` of their sources with --embedder "
                f"{spec} (the API's POST /jobs) fills them in")

    def _gaps_note(self, collection: str) -> str | None:
        """That the store holds fewer points than ``collection`` has chunks
        (``CollectionInfo.points_missing``: a store restored from an older copy than the
        database), so a search cannot find the chunks without one: it answered from the
        others without a word; and that documents are pending, left by a job that stopped
        before finishing them. Counted at most once per ``POINTS_CHECK_S`` per collection, and
        not while a job writes it (its chunks and points are then in between)."""
        now = time.monotonic()
        kept = self._point_counts.get(collection)
        if kept is None or now - kept[0] > POINTS_CHECK_S:
            try:
                with self.ctx.sessions() as session:
                    coll = md.get_collection(session, collection)
                    if coll is None or coll.backend != self.store.backend:
                        return None
                    current = leases.holder(coll)
                    if current is not None and current.alive():
                        return None
                    chunks = md.count_chunks(session, coll.id)
                    points = self.store.count(collection)
                    # A removal stopped part-way deleted them: finishing it is the advice (the
                    # general one, `facet index`, added back the documents being removed).
                    removal = stopped_removal_text(session, coll.id) if points < chunks else None
                    pending = md.count_documents(session, coll.id, "pending")
            except (SQLAlchemyError, StoreError):  # a note only: the search's answer stands
                return None
            kept = (now, points, chunks, removal, pending)
            self._point_counts[collection] = kept
        _, points, chunks, removal, pending = kept
        notes = []
        if points < chunks:
            notes.append(f"collection {collection!r}: "
                         f"{points_missing_text(points, chunks, removal)}")
        if pending:
            # A job stopped (Ctrl-C, a kill, a cancel) before finishing them, and no job writes
            # the collection now: searches answered from the rest without a word (only `facet
            # collections` counted them). A changed document keeps its earlier chunks until
            # it is written again.
            notes.append(f"collection {collection!r}: a job stopped before finishing "
                         f"{plural(pending, 'document')} (and any it had not reached yet), "
                         "which this search may miss or find as they were: `facet jobs` says "
                         "how to resume it (GET /jobs)")
        return "; ".join(notes) or None

    def _field_values(self, collection: str, filters: Mapping[str, Any]) -> dict[str, Any]:
        """A value some document of ``collection`` holds in each metadata field that ``filters``
        names, by key as given (``meta.colour`` too); None where no document holds the field: a
        typo in a key said only "check the filters", and whether the field holds numbers or
        strings tells which type hint fits (``filter_type_hint``). Read from the documents'
        metadata recorded in SQL (the store cannot ask whether a field exists), one LIMIT 1
        query per field, and only once a search found nothing."""
        fields: dict[str, list[str]] = {}
        for key in filters:
            if key not in TOP_LEVEL_FIELDS and key not in ("id", "_id"):  # an id has its own hint
                fields.setdefault(_field_name(key), []).append(key)
        D = md.Document
        values: dict[str, Any] = {}
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None:
                    return {}
                for name, keys in fields.items():
                    if '"' in name or "\\" in name:  # not expressible in SQLite's JSON path
                        continue
                    value = None
                    for spelling in _key_spellings(session, name):
                        value = session.scalar(select(D.meta[spelling]).where(
                            D.collection_id == coll.id,
                            D.meta[spelling].as_string().is_not(None)).limit(1))
                        if value is not None:
                            break
                    values.update(dict.fromkeys(keys, value))
        except SQLAlchemyError:  # a hint only: the search's answer stands without it
            logger.debug("could not read which filter fields exist", exc_info=True)
            return {}
        return values

    def _type_twins(self, collection: str, filters: Mapping[str, Any],
                    held: Mapping[str, Any]) -> TypeTwins | None:
        """Which filter values some document of ``collection`` holds as the other type only: the
        number 4 for a filter's "4", the string "4" for its 4 (``filter_type_hint``). Compared
        as JSON text (SQLite's ``json_quote(json_extract())``, PostgreSQL's ``json -> key``
        cast to text: ``4`` against ``"4"``), one LIMIT query per value, for the first
        ``MAX_TWIN_CHECKS`` numeric values of fields some document holds, and only once a
        search found nothing. None where SQL could not say (the hint is then guessed)."""
        # key, value, its JSON texts, its twin's
        asks: list[tuple[str, Any, tuple[str, ...], tuple[str, ...]]] = []
        for key, value in filters.items():
            name = _field_name(key)
            if key not in held or held[key] is None or '"' in name or "\\" in name:
                continue  # top-level, an id, a field none holds: not asked
            for v in (value if isinstance(value, list | tuple) else [value]):
                if _is_number(v):
                    asks.append((key, v, _number_texts(v), (json.dumps(json.dumps(v)),)))
                elif isinstance(v, str) and _NUMBER.fullmatch(v.strip()):
                    # (PostgreSQL reads a true as "true", SQLite as 1: "1" is asked after both)
                    flag: tuple[str, ...] = ("false",) if _number(v) == 0 else \
                        ("true",) if _number(v) == 1 else ()
                    asks.append((key, v, (json.dumps(v),), _number_texts(_number(v)) + flag))
                elif isinstance(v, str) and v.strip().lower() in _BOOLEAN_TEXTS:
                    asks.append((key, v, (json.dumps(v),), _BOOLEAN_TEXTS[v.strip().lower()]))
        D = md.Document
        found: set[tuple[str, Any]] = set()
        texts: set[str] = set()
        booleans: set[tuple[str, Any]] = set()
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None:
                    return None
                for key, v, own, twin in asks[:MAX_TWIN_CHECKS]:
                    name = _field_name(key)
                    # the spelling of the key that documents hold (both, if some hold each)
                    held_as: set[str] = set()
                    as_json = cast(D.meta[name], String)
                    for spelling in _key_spellings(session, name):
                        path = cast(D.meta[spelling], String)
                        spelled = set(session.scalars(select(path).where(
                            D.collection_id == coll.id, path.in_([*own, *twin])).distinct()
                            .limit(len(own) + len(twin))))
                        if spelled:
                            held_as, as_json = held_as | spelled, path
                    if not held_as or not held_as <= set(twin):
                        continue
                    if isinstance(v, str) and _NUMBER.fullmatch(v.strip()) and (
                            held_as <= {"true", "false"} or (held_as <= {"0", "1"}
                            and self._holds_booleans(session, coll.id, name))):
                        # SQLite's 1/0 of true/false: "send the number 1" matched none, and no
                        # hint at all left `vip=1` where `vip=true` was told `vip:=true`.
                        booleans.add((key, v))
                        continue
                    if isinstance(v, str) and not _NUMBER.fullmatch(v.strip()):
                        # "true": SQLite reads a JSON true as the integer 1, so whether a
                        # document holds the boolean is read from its metadata itself.
                        metas = session.scalars(select(D.meta).where(
                            D.collection_id == coll.id, as_json.in_(twin)).limit(_BOOLEAN_ROWS))
                        if not any(isinstance((m or {}).get(name), bool) for m in metas):
                            continue
                        booleans.add((key, v))
                    found.add((key, v))
                    if isinstance(v, str) and (key, v) not in booleans and session.scalar(
                            select(D.id).where(D.collection_id == coll.id,
                                               as_json.like('"%')).limit(1)):
                        texts.add(name)
        except SQLAlchemyError:  # a hint only: the search's answer stands without it
            logger.debug("could not read the filter values' types", exc_info=True)
            return None
        return TypeTwins(frozenset(found), frozenset(texts), frozenset(booleans),
                         booleans_matched=self.store.backend != "edge")

    def _older_terms(self, collection: str) -> str | None:
        """``VectorStore.older_lexical``: read once the words were searched (cached by the store)."""
        try:
            return self.store.older_lexical(collection)
        except StoreError:  # gone since, or a definition this Facet does not know: the search said
            return None

    def resolve_mode(self, request: SearchRequest, query_spec: str | None = None) -> str:
        """The mode a request runs in: its own, or for ``auto`` hybrid where the query has no
        instruction (or one its embedder ``query_spec`` does not read), the collection keeps
        term vectors and no cosine ``score_threshold`` is set (without rerank), else dense.

        Raises:
            NotFoundError: unknown collection (``auto`` only; the others find out when searching).
        """
        if request.mode != "auto":
            return request.mode
        if (request.instruction or "").strip() and (query_spec is None or reads_instruction(query_spec)):
            return "dense"  # only the embedder reads the instruction; BM25 would outvote it
        if request.score_threshold is not None and not request.rerank:
            return "dense"
        try:
            return "hybrid" if self.store.has_lexical(request.collection) else "dense"
        except CollectionNotFoundError as e:
            raise self._store_lost(request.collection, e) from e
        except (StoreBusyError, StoreUnavailableError):
            raise
        except StoreError as e:  # term vectors of another definition: the embedder still works
            logger.warning("%s; auto search falls back to dense", e)
            return "dense"

    def _store_lost(self, collection: str, error: CollectionNotFoundError) -> NotFoundError:
        """A collection the store no longer holds mid-search: deleted meanwhile (its row gone
        too), said so; else the store's words. A search racing a delete said "no collection 'c'
        in the edge store (collections: ...); create it with `facet index ...`", CLI advice
        naming the store's other collections, in an API answer."""
        self.forget(collection)
        # Asked before the row is read (as ``_vector_names`` asks): a delete in flight then, its
        # row still there to the read (not committed), is run past once more by ``search``; the
        # store's words ("create it with `facet index ...`") reached an API answer in the
        # verification round's delete race, a delete committing between the read and the ask.
        deleting = being_deleted(collection)
        try:
            with self.ctx.sessions() as session:
                gone = md.get_collection(session, collection) is None
        except SQLAlchemyError:
            gone = False
        if gone:
            return NotFoundError(f"unknown collection {collection!r}: it was deleted while it was "
                                 "searched", param="collection")
        if deleting:
            return _Vanished(f"collection {collection!r} is being deleted", param="collection")
        return NotFoundError(str(error), param="collection")

    @staticmethod
    def rerank_scores(encoder: QueryEncoder, reranker: str, query: str, instruction: str | None,
                      texts: Sequence[str], *, doc_instruction: str | None = None) -> list[float]:
        """Cosine of (instruction, query) against each (doc_instruction, text) under ``reranker``."""
        q = encoder.encode([query], embedder=reranker, role=Role.QUERY,
                           instruction=instruction)[0]  # (dim,)
        d = encoder.encode(list(texts), embedder=reranker, role=Role.DOCUMENT,
                           instruction=doc_instruction)  # (n, dim)
        return [float(x) for x in d @ q]

    def _rerank(self, request: SearchRequest, instruction: str | None, hits: Sequence[Hit],
                query_spec: str, query_vec: np.ndarray | None) -> list[float]:
        """``rerank_scores`` of the hits' chunks, without encoding what is at hand: the query's
        vector when the reranker is the model that encoded it (the same spec or the same loaded
        model, the same instruction), and the chunks' stored vectors when the reranker is the
        embedder that wrote them (``_stored_rerank_vectors``). Reranking with minilm took 3.5-5 s
        a search on a 2-core CPU, nearly all of it encoding chunks the collection holds."""
        texts = [str(h.payload.get("text", "")) for h in hits]
        doc_instruction = instruction if self.rerank_documents_instructed else None
        reranker = request.rerank or ""
        # Only a model this process encodes with can be compared with what wrote the vectors
        # (where workers encode, theirs may be another version).
        model = (self.ctx.embedders.get(reranker)
                 if getattr(self.encoder, "embedders", None) is self.ctx.embedders else None)
        same_query = query_vec is not None and (
            reranker == query_spec or (model is not None and model is self.ctx.embedders.peek(query_spec)))
        q = (query_vec if same_query and query_vec is not None else
             self._query_vector(reranker, request.query, instruction))
        # Bare, the stored vectors are read as they are (none kept: reading them is cheap); where
        # they cannot be, the chunks are encoded and kept.
        d = None if model is None or doc_instruction is not None else self._stored_rerank_vectors(
            request.collection, reranker, model, hits, texts, doc_instruction)
        if d is None:
            def made(rows: list[int]) -> np.ndarray:
                some = [texts[i] for i in rows]
                blended = None if model is None or doc_instruction is None else self._stored_rerank_vectors(
                    request.collection, reranker, model, [hits[i] for i in rows], some, doc_instruction)
                return blended if blended is not None else self.encoder.encode(
                    some, embedder=reranker, role=Role.DOCUMENT, instruction=doc_instruction)

            # Kept by collection: a blend is of this collection's stored vectors, which another
            # collection's may differ from by float rounding (written on another device).
            d = self._kept_vectors(reranker, Role.DOCUMENT, texts, doc_instruction, made,
                                   scope=request.collection)
        return [float(x) for x in d @ q]

    @contextlib.contextmanager
    def keeping_nothing(self) -> Iterator[None]:
        """Within it, every search of this thread encodes what it reads and keeps none of it
        (what is kept stays for after, and for other threads): a measurement of searches' cost
        (``facet eval --collection``'s ms/query) timed kept vectors where it repeated a query."""
        self._keeping.off = getattr(self._keeping, "off", 0) + 1
        try:
            yield
        finally:
            self._keeping.off -= 1

    def _query_vector(self, spec: str, query: str, instruction: str | None) -> np.ndarray:
        """``query``'s vector under ``instruction`` from ``spec`` (``_kept_vectors``)."""
        return self._kept_vectors(spec, Role.QUERY, [query], instruction)[0]

    def _kept_vectors(self, spec: str, role: Role, texts: Sequence[str], instruction: str | None,
                      made: Callable[[list[int]], np.ndarray] | None = None,
                      scope: str | None = None) -> np.ndarray:
        """``texts``' vectors from ``spec`` as ``role`` under ``instruction``, each kept in
        ``query_vectors`` by the model that made it (``local_model_key``: only where it runs in
        this process), so what was encoded for an earlier search is not encoded again: a query
        searched again, and a reranker's chunks (a reranked search asked again, for another
        page, filter or top_k, encoded every candidate again: 397 of 560 ms at depth 30 with
        minilm over causal2vec's results). The texts not kept (their positions) are given to
        ``made`` (default: encoded in one call), which must return what encoding them gives;
        ``scope`` keeps them apart from others' (a collection's blends of its stored vectors)."""
        if not texts:
            return self.encoder.encode(list(texts), embedder=spec, role=role, instruction=instruction)
        before = self._vector_keys(spec, role, texts, instruction, scope)
        rows: list[np.ndarray | None] = ([None] * len(texts) if before is None else
                                         [self.query_vectors.get(key) for key in before])
        missing = [i for i, row in enumerate(rows) if row is None]
        if missing:
            fresh = made(missing) if made is not None else self.encoder.encode(
                [texts[i] for i in missing], embedder=spec, role=role, instruction=instruction)
            # (Loaded by the encode where it was not before.)
            after = before or self._vector_keys(spec, role, texts, instruction, scope)
            for i, vector in zip(missing, fresh, strict=True):
                rows[i] = vector
                if after is not None:
                    self.query_vectors.put(after[i], vector)
        return np.stack([row for row in rows if row is not None])

    def _vector_keys(self, spec: str, role: Role, texts: Sequence[str], instruction: str | None,
                     scope: str | None = None) -> list[Hashable] | None:
        """The ``query_vectors`` key of each of ``texts`` (``_kept_vectors``), None where
        ``spec`` is not loaded in this process."""
        # (Kept nothing: neither looked up nor counted, FACET_QUERY_CACHE_MB=0 or keeping_nothing.)
        off = self.query_vectors.max_bytes <= 0 or getattr(self._keeping, "off", 0) > 0
        model = None if off else local_model_key(self.encoder, spec)
        return None if model is None else [
            (*model, role.value, scope, texts_digest([instruction or "", text])) for text in texts]

    def kept_query_vectors(self, spec: str, texts: Sequence[str],
                           instruction: str | None) -> np.ndarray | None:
        """The vectors of ``texts`` as queries under ``instruction`` where every one is kept
        (``_kept_vectors``), else None: an async caller (``Facet.aembed``) encodes without
        holding a thread, so it asks first and keeps what it encodes (``keep_query_vectors``)."""
        keys = self._vector_keys(spec, Role.QUERY, texts, instruction) if texts else None
        rows = None if keys is None else self.query_vectors.get_all(keys)
        return None if rows is None else np.stack(rows)

    def keep_query_vectors(self, spec: str, texts: Sequence[str], instruction: str | None,
                           vectors: np.ndarray) -> None:
        """Keep ``vectors``, the query vectors of ``texts`` under ``instruction`` (``kept_query_vectors``)."""
        keys = self._vector_keys(spec, Role.QUERY, texts, instruction)
        for key, vector in zip(keys or [], vectors if keys else [], strict=True):
            self.query_vectors.put(key, vector)

    def query_vectors_of(self, spec: str, texts: Sequence[str], instruction: str | None) -> np.ndarray:
        """``texts``' vectors as queries under ``instruction`` from ``spec``, those kept from
        earlier searches or embeds reused and the others encoded and kept (``_kept_vectors``):
        ``Facet.embed`` of queries (LangChain's ``embed_query``, ``/v1/embeddings`` with
        ``role: query``), as a search's."""
        return self._kept_vectors(spec, Role.QUERY, texts, instruction)

    def _stored_rerank_vectors(self, collection: str, reranker: str, model: Any, hits: Sequence[Hit],
                               texts: Sequence[str], doc_instruction: str | None) -> np.ndarray | None:
        """The reranker's document vectors of the hits' chunks from the store, where they are
        what it would compute (``stored_vectors``), else None (encode them). Under an
        instruction, an embedder that blends its bare vectors in (``EncodesFromPlain``: minilm,
        inbedder) computes them from the stored ones, encoding only the instructed half (through
        the query encoder: on a server's model thread, as every forward pass there); others
        read an instructed document whole."""
        from_plain = (getattr(self.encoder, "encode_from_plain", None)
                      if doc_instruction is not None and isinstance(model, EncodesFromPlain) else None)
        if doc_instruction is not None and not callable(from_plain):
            return None
        plain = stored_vectors(self.store, collection, model.name, [h.id for h in hits], texts,
                               recorded=self._identities.get(collection, {}).get(model.name, ""),
                               current=self.ctx.embedders.identity(model))
        if plain is None or not callable(from_plain):
            return plain
        # Refusals (an instruction over the application's limit) in the encoder's words, as
        # encoding the chunks would give them.
        vectors: np.ndarray = from_plain(plain, list(texts), embedder=reranker, role=Role.DOCUMENT,
                                         instruction=doc_instruction)
        return vectors

    def _vector_search(self, request: SearchRequest, mode: str, vector_name: str,
                       query_vec: np.ndarray | None, depth: int, lists: int | None = None) -> list[Hit]:
        where = payload_filters(request.filters)
        try:
            if query_vec is None:
                return self.store.search_lexical(request.collection, request.query, limit=depth,
                                                 filters=where)
            if mode == "hybrid":
                return self.store.search_hybrid(request.collection, vector_name, query_vec,
                                                request.query, limit=depth, filters=where,
                                                exact=request.exact, fusion=self.fusion,
                                                candidates=lists)
            return self.store.search(request.collection, vector_name, query_vec, limit=depth,
                                     filters=where, exact=request.exact)
        except CollectionNotFoundError as e:
            raise self._store_lost(request.collection, e) from e
        except (StoreBusyError, StoreUnavailableError):
            raise  # the facade names the writer / the server to start
        except StoreDamagedError as e:  # its files cannot be read: a data error, not the request's
            self.forget(request.collection)
            raise DataError(str(e)) from e
        except StoreError as e:
            self.forget(request.collection)
            # A filter it cannot match, named as the user gave it (`published`, not the payload
            # path `meta.published`).
            raise InvalidRequestError(user_filter_words(str(e), request.filters),
                                      param=e.param) from e

    @staticmethod
    def _group(hits: Sequence[Hit], scores: Sequence[float | None], threshold: float | None = None
               ) -> tuple[list[Hit], list[float | None], list[list[int]]]:
        """The best-ranked hit of each document, in rank order, with the chunk numbers of
        that document's other hits: those scoring ``threshold`` or more where one is given (a
        result's score: the rerank score, else the search's). They were all counted, so a
        thresholded search said "+6 more chunks" of a document with one other chunk above it.
        (A document whose best hit is below ``threshold`` is dropped with the results.)"""
        first: dict[str, int] = {}
        out_hits: list[Hit] = []
        out_scores: list[float | None] = []
        more: list[list[int]] = []
        for hit, score in zip(hits, scores, strict=True):
            doc = str(hit.payload.get("doc_id", ""))
            if doc in first:
                if threshold is None or (score if score is not None else hit.score) >= threshold:
                    more[first[doc]].append(int(hit.payload.get("chunk_no", 0)))
                continue
            first[doc] = len(out_hits)
            out_hits.append(hit)
            out_scores.append(score)
            more.append([])
        return out_hits, out_scores, more

    def _lexical_definition(self, collection: str) -> str | None:
        """The definition of a term ``collection``'s term vectors were written with, which a
        word search (lexical, hybrid) matched under and its highlights follow; None where the
        store cannot say now (the highlights are then the query's words as written)."""
        try:
            return self.store.lexical_version(collection)
        except StoreError:
            return None

    @staticmethod
    def _result(i: int, hit: Hit, query: str, rerank_score: float | None,
                more_chunks: list[int] | None = None, lexical: str | None = None) -> SearchResult:
        """``lexical``: the term definition a word search ran under (``make_snippet``)."""
        p = hit.payload
        text = str(p.get("text", ""))
        snippet, highlights = make_snippet(text, query, lexical=lexical)
        return SearchResult(
            rank=i + 1, score=rerank_score if rerank_score is not None else hit.score,
            doc_id=str(p.get("doc_id", "")), title=p.get("title"), source=str(p.get("source", "")),
            chunk_no=int(p.get("chunk_no", 0)), text=text, snippet=snippet, highlights=highlights,
            start=int(p.get("start", 0)), end=int(p.get("end", 0)),
            metadata=dict(p.get("meta") or {}),
            vector_score=hit.score, rerank_score=rerank_score,
            more_chunks=list(more_chunks or []))
