"""Score a collection already indexed (``facet eval --collection NAME --task beir:FOLDER``).

The queries of a BEIR folder go through the product's own search path, ``Facet.search`` with
a ``SearchRequest`` (what ``facet search``, ``POST /search`` and the UI run): nothing is embedded
again and no index of the evaluation's own is built, so the figure is the one a user of that
collection gets, with its chunking, its store and its search modes. ``facet eval --task
beir:FOLDER`` instead embeds the folder's corpus afresh, one vector per document.

Per query and mode: one search at ``top_k=ndcg_k`` (10; exactly what ``facet search`` shows)
for nDCG@10, and one at ``top_k=recall_k`` (100) for Recall@100: a hybrid search's first ten
of a hundred need not be its ten, so the two are not read off one list. Results are grouped by
document by default (``facet search``'s and ``POST /search``'s default: ten documents);
``group_by_document=False`` scores the chunks as ranked (a document twice earns once, and
takes a place).

The embedder searched is the one the search names in its response (``SearchResponse.embedder``,
``embedder_spec``); where some documents lack its vectors (an embedder added part-way), the
report says how many, the coverage counts only the judged documents it can find, and the
search's notes are kept (``CollectionReport.notes``): such a score is not comparable with a
complete embedder's.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import DataError, InvalidRequestError
from app.evaluation.loaders import BeirData
from app.evaluation.metrics import ndcg_at_k, recall_at_k
from app.files import expand_user
from app.services.search import SEARCH_MODES, SearchRequest
from app.text import plural

if TYPE_CHECKING:
    from app.core import Facet

NDCG_K = 10
RECALL_K = 100
MAX_NOTES = 10  # distinct search notes kept (one that changes per query would grow without end)
NOT_IN_COLLECTION = ("none of the judged documents is in the collection — indexed from another "
                     "corpus?")


# Of the documents an embedder has no vectors of: only its dense searches miss them.
DENSE_ONLY = ("dense searches cannot find them (hybrid ones find them by their words only, lexical "
              "ones as any other)")


def parse_modes(values: Sequence[str] | None) -> list[str]:
    """``--mode`` values (repeatable, each possibly comma-separated) as a list of distinct
    search modes in the order given; ``["auto"]`` for none.

    Raises:
        InvalidRequestError: a mode that is not one of ``SEARCH_MODES``.
    """
    modes: list[str] = []
    for value in values or []:
        for part in value.split(","):
            mode = part.strip().lower()
            if not mode:
                continue
            if mode not in SEARCH_MODES:
                raise InvalidRequestError(f"--mode {part.strip()!r}: use one of {', '.join(SEARCH_MODES)} "
                                          "(repeat --mode or separate them by commas to compare)")
            if mode not in modes:
                modes.append(mode)
    return modes or ["auto"]


def parse_beir_task(items: Sequence[str], split: str | None) -> tuple[Path, str]:
    """The BEIR folder and qrels split of ``--task`` with ``--collection``: exactly one
    ``beir:FOLDER`` (``beir:FOLDER@SPLIT`` too, or ``--split``).

    Raises:
        InvalidRequestError: no item, several, another kind than beir, a folder without the BEIR
            files, a split without its qrels file or two splits given.
    """
    from app.evaluation.suites import _beir_split, _check_layout, _task_items

    parts = [i.strip() for spec in items for i in _task_items(spec) if i.strip()]
    if len(parts) != 1:
        raise InvalidRequestError("--collection takes one --task beir:FOLDER (the queries and qrels to "
                                  f"score it with), got {len(parts)}: {', '.join(parts) or 'none'}")
    item = parts[0]
    kind, sep, raw = item.partition(":")
    if not sep or kind.strip().lower() != "beir":
        raise InvalidRequestError(f"--task {item!r}: --collection scores a collection with BEIR queries "
                                  "and qrels; give --task beir:FOLDER (sts and goalex tasks evaluate an "
                                  "embedder, not a collection)")
    raw = raw.strip()
    given = ""
    if "@" in raw and not expand_user(raw).exists():
        raw, _, given = raw.rpartition("@")
        given = given.strip()
    if given and split and given != split:
        raise InvalidRequestError(f"--task {item!r} reads split {given!r} and --split {split!r}; give one")
    folder = expand_user(raw)
    _check_layout(item, "beir", folder)
    return folder, _beir_split(item, folder, given or split or "")


def judged_in_collection(facet: Facet, collection: str, doc_ids: Sequence[str],
                         embedder: str | None = None) -> set[str]:
    """Which of ``doc_ids`` are indexed documents of ``collection`` (a jsonl record's ``_id`` is
    its document's id, as the search results' ``doc_id`` give it); with ``embedder`` (a vector
    name), only those with its vectors of their current content: the others a search with it
    cannot find."""
    from indexer import metadata as md

    with facet.context.sessions() as session:
        coll = md.get_collection(session, collection)
        if coll is None:
            return set()
        found = {key: doc for key, doc in md.documents_by_key(session, coll.id, doc_ids).items()
                 if doc.status == "indexed"}
        if embedder is None:
            return set(found)
        hashes = md.vector_hashes(session, [doc.id for doc in found.values()], embedder)
        return {key for key, doc in found.items() if hashes.get(doc.id) == doc.content_hash}


def searched_embedder(facet: Facet, collection: str, data: BeirData, modes: Sequence[str],
                      embedder: str | None = None,
                      instruction: str | None = None) -> tuple[str | None, str | None]:
    """The embedder a search of ``collection`` in ``modes`` uses, as the search itself names it:
    (its vector's name, what encodes the query, options included), from one search of the
    first judged query in the first mode that is not ``lexical``; (None, None) where every mode
    is ``lexical`` (BM25, no embedder). The collection's first embedder was reported instead of
    the one the search ran (the default embedder where the collection has it).

    Raises:
        NotFoundError: no collection ``collection``.
        InvalidRequestError: an ``embedder`` the collection has no vectors of.
    """
    mode = next((m for m in modes if m != "lexical"), None)
    if mode is None or not data.qrels:
        return None, None
    qid = sorted(data.qrels)[0]
    response = facet.search(SearchRequest(query=data.queries[qid], collection=collection,
                                          instruction=instruction, top_k=1, embedder=embedder,
                                          mode=mode))
    if response.mode == "lexical":
        return None, None
    return response.embedder, response.embedder_spec


def folder_name(collection: str, embedder: str | None) -> str:
    """The default report folder's name under results/: ``<collection>-collection-<embedder>``
    (``-lexical`` where no embedder is searched), so that the reports of two embedders of one
    collection are kept apart (one folder for all of them moved the first to .bak, and a third
    run lost it)."""
    def safe(text: str) -> str:
        return re.sub(r"[^\w.+=-]+", "_", text).strip("._") or "x"

    return f"{safe(collection)}-collection-{safe(embedder) if embedder else 'lexical'}"


@dataclass
class ModeResult:
    """One search mode's scores over the queries (fractions; reports multiply by 100).

    ``ran``: the modes the service ran (``auto`` runs dense or hybrid); ``distinct_docs``:
    the mean number of distinct documents in a query's top ``ndcg_k`` (below it per chunk);
    ``ms_per_query``: the mean time of the top-``ndcg_k`` search, loading a model left out;
    ``searched``: what its searches searched, as they named it (an embedder's vector, ``bm25``).
    """

    mode: str
    ran: list[str]
    ndcg: float
    recall: float
    distinct_docs: float
    ms_per_query: float
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)
    searched: list[str] = field(default_factory=list)

    def to_dict(self, ndcg_k: int, recall_k: int) -> dict[str, Any]:
        return {"mode": self.mode, "ran": self.ran, "searched": self.searched, f"ndcg@{ndcg_k}": self.ndcg,
                f"recall@{recall_k}": self.recall, f"distinct_docs@{ndcg_k}": self.distinct_docs,
                "ms_per_query": round(self.ms_per_query, 1), "per_query": self.per_query}


@dataclass
class CollectionReport:
    """What ``evaluate_collection`` measured, with what it read.

    ``embedder``: the vector the searches searched, as they named it (None where every mode was
    lexical); ``judged_present``: the judged documents those searches can find (indexed, with
    its vectors); ``judged_indexed``: the judged documents indexed, with or without them;
    ``vectors_missing``: the collection's indexed documents without its vectors; ``notes``: what
    the searches said their results cannot show (``SearchResponse.note``), each once.
    """

    collection: str
    folder: str
    split: str
    instruction: str | None
    grouped: bool
    embedder: str | None
    chunk_size: int
    documents: int
    queries: int
    judged_documents: int
    judged_present: int
    skipped_judgements: int
    results: list[ModeResult]
    ndcg_k: int = NDCG_K
    recall_k: int = RECALL_K
    seconds: float = 0.0
    embedder_spec: str | None = None
    judged_indexed: int | None = None
    vectors_missing: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return self.judged_present / self.judged_documents if self.judged_documents else 0.0

    @property
    def comparable(self) -> bool:
        """Whether the searched embedder has vectors of every indexed document: a score with
        some missing is not comparable with a complete embedder's."""
        return not self.vectors_missing

    def missing_text(self) -> str | None:
        """The missing vectors, in words; None where none is missing."""
        if not self.vectors_missing:
            return None
        return (f"{self.vectors_missing:,} of the {self.documents:,} documents have no {self.embedder!r} "
                f"vectors, so its {DENSE_ONLY}: these scores are not comparable with a "
                "complete embedder's")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "collection",
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "collection": self.collection,
            "task": f"beir:{self.folder}@{self.split}",
            "instruction": self.instruction,
            "results_per": "document" if self.grouped else "chunk",
            "embedder": self.embedder,
            "embedder_spec": self.embedder_spec,
            "chunk_tokens": self.chunk_size,
            "documents": self.documents,
            "documents_without_vectors": self.vectors_missing,
            "comparable": self.comparable,
            "queries": self.queries,
            "judged_documents": self.judged_documents,
            "judged_in_collection": (self.judged_present if self.judged_indexed is None
                                     else self.judged_indexed),
            "judged_searchable": self.judged_present,
            "coverage": round(self.coverage, 4),
            "skipped_judgements": self.skipped_judgements,
            "notes": self.notes,
            "seconds": round(self.seconds, 2),
            "runs": [r.to_dict(self.ndcg_k, self.recall_k) for r in self.results],
        }


def evaluate_collection(
    facet: Facet,
    collection: str,
    data: BeirData,
    *,
    modes: Sequence[str] = ("auto",),
    instruction: str | None = None,
    group_by_document: bool = True,
    embedder: str | None = None,
    ndcg_k: int = NDCG_K,
    recall_k: int = RECALL_K,
    folder: str = "",
    split: str = "test",
    on_query: Callable[[], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> CollectionReport:
    """Search ``collection`` with every judged query of ``data`` in each of ``modes`` through
    ``facet.search`` and score the rankings against the qrels.

    Args:
        embedder: which of the collection's embedders to search (None: the search's default).
        on_query: called after each query of each mode (a progress bar).
        warn: told when only some judged documents are in the collection or can be found by
            the embedder searched, and when some documents lack its vectors.

    Raises:
        NotFoundError: no collection ``collection``.
        DataError: none of the judged documents is in the collection.
        InvalidRequestError: a mode the collection cannot run (lexical without term vectors), an
            embedder the collection has no vectors of.
    """
    info = facet.collection(collection)  # NotFoundError names the collections there are
    judged = sorted({d for rel in data.qrels.values() for d in rel})
    indexed = judged_in_collection(facet, collection, judged)
    if not indexed:
        raise DataError(f"collection {collection!r}: {NOT_IN_COLLECTION} (0 of the {len(judged)} documents "
                        f"the qrels judge, such as {judged[0]!r}, is an indexed document of it; it holds "
                        f"{plural(info.documents_indexed, 'document')})")
    # The embedder the searches use, as the search names it (not the collection's first).
    vector, spec = searched_embedder(facet, collection, data, modes, embedder, instruction)
    present = indexed if vector is None else judged_in_collection(facet, collection, judged, vector)
    missing = 0 if vector is None else int(info.vectors_missing.get(vector, 0))
    if missing and warn is not None:
        warn(f"warning: {missing:,} of the {info.documents_indexed:,} documents of collection {collection!r} "
             f"have no {vector!r} vectors (an embedder added part-way, or stopped), so its {DENSE_ONLY}: "
             "these scores are not comparable with a complete embedder's")
    if len(present) < len(judged) and warn is not None:
        # Those without the embedder's vectors are still found by words: only dense searches
        # miss them (a lexical run's Recall was 100 beside this warning's "not found").
        others = ([f"the {len(judged) - len(indexed)} not in it count as not found"]
                  if len(indexed) < len(judged) else []) + (
            [f"the {len(indexed) - len(present)} in it without {vector!r} vectors count as not found "
             "by dense searches (hybrid ones find them by their words only, lexical ones as any other)"]
            if len(present) < len(indexed) else [])
        warn(f"warning: only {len(present)} of the {len(judged)} judged documents are in collection "
             f"{collection!r}{f' with {vector!r} vectors' if vector is not None else ''} (coverage "
             f"{100 * len(present) / len(judged):.1f}%); {'; '.join(others)}, so the scores are lower "
             "than the index's own")
    # Every query encoded, as a `facet search` of it would be: with the vectors a search keeps
    # (``SearchService.query_vectors``) only the first mode paid for it, and a second mode's
    # ms/query was a kept vector's (3 ms against 155 with causal2vec), not a faster mode.
    with facet.searching.keeping_nothing():
        start = time.perf_counter()
        results: list[ModeResult] = []
        notes: dict[str, None] = {}
        qids = sorted(data.qrels)
        for mode in modes:
            search_ms = 0.0
            ran: set[str] = set()
            searched: set[str] = set()
            per_query: dict[str, dict[str, float]] = {}
            distinct: list[int] = []
            for qid in qids:
                ranked: dict[int, list[str]] = {}
                for k in dict.fromkeys((ndcg_k, recall_k)):
                    response = facet.search(SearchRequest(
                        query=data.queries[qid], collection=collection, instruction=instruction, top_k=k,
                        embedder=embedder, mode=mode, group_by_document=group_by_document))
                    ran.add(response.mode)
                    searched.add(response.embedder)
                    if response.mode != "lexical":
                        vector, spec = response.embedder, response.embedder_spec or spec
                    if response.note and len(notes) < MAX_NOTES:
                        notes.setdefault(response.note)
                    ranked[k] = [r.doc_id for r in response.results]
                    if k == ndcg_k:  # what a `facet search` waits for, a model's loading left out
                        t = response.timings_ms
                        search_ms += t.get("total", 0.0) - t.get("load_model", 0.0) - t.get("load_reranker", 0.0)
                rel = data.qrels[qid]
                top = ranked[ndcg_k]
                distinct.append(len(set(top)))
                per_query[qid] = {"ndcg": ndcg_at_k(top, rel, ndcg_k),
                                  "recall": recall_at_k(ranked[recall_k], rel, recall_k)}
                if on_query is not None:
                    on_query()
            n = len(qids)
            results.append(ModeResult(
                mode, sorted(ran), math.fsum(q["ndcg"] for q in per_query.values()) / n,
                math.fsum(q["recall"] for q in per_query.values()) / n, sum(distinct) / n,
                search_ms / n, per_query, sorted(searched)))
        return CollectionReport(
            collection, folder, split, instruction, group_by_document, vector, info.chunk_size,
            info.documents_indexed, len(qids), len(judged), len(present), data.skipped_judgements,
            results, ndcg_k, recall_k, time.perf_counter() - start, embedder_spec=spec,
            judged_indexed=len(indexed), vectors_missing=missing, notes=list(notes))


def markdown_table(report: CollectionReport) -> str:
    """One row per mode, scores x 100."""
    k, rk = report.ndcg_k, report.recall_k
    lines = [f"| mode | ran | nDCG@{k} | Recall@{rk} | distinct docs in top {k} | ms/query | searched |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in report.results:
        lines.append(f"| {r.mode} | {', '.join(r.ran)} | {100 * r.ndcg:.2f} | {100 * r.recall:.2f} | "
                     f"{r.distinct_docs:.2f} | {r.ms_per_query:.0f} | {', '.join(r.searched)} |")
    return "\n".join(lines)


def embedder_text(report: CollectionReport) -> str:
    """The embedder searched, as a summary names it (its spec where options differ)."""
    if report.embedder is None:
        return "no embedder (lexical, BM25)"
    spec = report.embedder_spec
    shown = report.embedder if not spec or spec == report.embedder else f"{report.embedder} ({spec})"
    return f"embedder {shown}"


def summary(report: CollectionReport) -> str:
    """What the table scores, in a line."""
    per = "grouped by document" if report.grouped else "per chunk"
    instr = f"instruction {report.instruction!r}" if report.instruction else "no instruction"
    missing = report.missing_text()
    # (Its dense searches: hybrid and lexical ones find the others by their words.)
    findable = "in it" if report.embedder is None else f"{report.embedder}'s dense searches can find"
    return (f"collection {report.collection!r} ({report.documents} documents, {report.chunk_size}-token "
            f"chunks), {embedder_text(report)}, on beir:{report.folder}@{report.split}: {report.queries} "
            f"queries, results {per}, {instr}; {report.judged_present} of {report.judged_documents} judged "
            f"documents {findable} ({100 * report.coverage:.1f}%)" + (f"; {missing}" if missing else ""))


def write_collection_report(report: CollectionReport, out_dir: Path,
                            command: str | None = None) -> tuple[Path, Path]:
    """Write ``results.json`` and ``results.md`` under ``out_dir`` (as ``facet eval`` does);
    returns their paths."""
    data = report.to_dict()
    if command:
        data["command"] = command
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    md_path = out_dir / "results.md"
    cmd = f"Command: `{command}`\n\n" if command else ""
    notes = "".join(f"- {note}\n" for note in report.notes)
    notes = f"\nThe search's notes:\n\n{notes}" if notes else ""
    md_path.write_text(f"# facet eval: collection {report.collection}, {embedder_text(report)}\n\n"
                       f"{cmd}{summary(report)}.\n\n"
                       "Scores x 100, through the collection's own search (`Facet.search`).\n\n"
                       + markdown_table(report) + "\n" + notes, encoding="utf-8")
    return json_path, md_path

