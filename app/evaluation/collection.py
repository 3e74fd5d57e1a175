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
"""

from __future__ import annotations

import json
import math
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
NOT_IN_COLLECTION = ("none of the judged documents is in the collection — indexed from another "
                     "corpus?")


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


def judged_in_collection(facet: Facet, collection: str, doc_ids: Sequence[str]) -> set[str]:
    """Which of ``doc_ids`` are indexed documents of ``collection`` (a jsonl record's ``_id`` is
    its document's id, as the search results' ``doc_id`` give it)."""
    from indexer import metadata as md

    with facet.context.sessions() as session:
        coll = md.get_collection(session, collection)
        if coll is None:
            return set()
        found = md.documents_by_key(session, coll.id, doc_ids)
        return {key for key, doc in found.items() if doc.status == "indexed"}


@dataclass
class ModeResult:
    """One search mode's scores over the queries (fractions; reports multiply by 100).

    ``ran``: the modes the service ran (``auto`` runs dense or hybrid); ``distinct_docs``:
    the mean number of distinct documents in a query's top ``ndcg_k`` (below it per chunk);
    ``ms_per_query``: the mean time of the top-``ndcg_k`` search, loading a model left out.
    """

    mode: str
    ran: list[str]
    ndcg: float
    recall: float
    distinct_docs: float
    ms_per_query: float
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self, ndcg_k: int, recall_k: int) -> dict[str, Any]:
        return {"mode": self.mode, "ran": self.ran, f"ndcg@{ndcg_k}": self.ndcg,
                f"recall@{recall_k}": self.recall, f"distinct_docs@{ndcg_k}": self.distinct_docs,
                "ms_per_query": round(self.ms_per_query, 1), "per_query": self.per_query}


@dataclass
class CollectionReport:
    """What ``evaluate_collection`` measured, with what it read."""

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

    @property
    def coverage(self) -> float:
        return self.judged_present / self.judged_documents if self.judged_documents else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "collection",
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "collection": self.collection,
            "task": f"beir:{self.folder}@{self.split}",
            "instruction": self.instruction,
            "results_per": "document" if self.grouped else "chunk",
            "embedder": self.embedder,
            "chunk_tokens": self.chunk_size,
            "documents": self.documents,
            "queries": self.queries,
            "judged_documents": self.judged_documents,
            "judged_in_collection": self.judged_present,
            "coverage": round(self.coverage, 4),
            "skipped_judgements": self.skipped_judgements,
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
        on_query: called after each query of each mode (a progress bar).
        warn: told when only some judged documents are in the collection.

    Raises:
        NotFoundError: no collection ``collection``.
        DataError: none of the judged documents is in the collection.
        InvalidRequestError: a mode the collection cannot run (lexical without term vectors).
    """
    info = facet.collection(collection)  # NotFoundError names the collections there are
    judged = sorted({d for rel in data.qrels.values() for d in rel})
    present = judged_in_collection(facet, collection, judged)
    if not present:
        raise DataError(f"collection {collection!r}: {NOT_IN_COLLECTION} (0 of the {len(judged)} documents "
                        f"the qrels judge, such as {judged[0]!r}, is an indexed document of it; it holds "
                        f"{plural(info.documents_indexed, 'document')})")
    if len(present) < len(judged) and warn is not None:
        warn(f"warning: only {len(present)} of the {len(judged)} judged documents are in collection "
             f"{collection!r} (coverage {100 * len(present) / len(judged):.1f}%); the others count as "
             "not found, so the scores are lower than the index's own")
    start = time.perf_counter()
    results: list[ModeResult] = []
    qids = sorted(data.qrels)
    for mode in modes:
        search_ms = 0.0
        ran: set[str] = set()
        per_query: dict[str, dict[str, float]] = {}
        distinct: list[int] = []
        for qid in qids:
            ranked: dict[int, list[str]] = {}
            for k in dict.fromkeys((ndcg_k, recall_k)):
                response = facet.search(SearchRequest(
                    query=data.queries[qid], collection=collection, instruction=instruction, top_k=k,
                    embedder=embedder, mode=mode, group_by_document=group_by_document))
                ran.add(response.mode)
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
            search_ms / n, per_query))
    return CollectionReport(
        collection, folder, split, instruction, group_by_document,
        embedder or (next(iter(info.embedders), None) if info.embedders else None), info.chunk_size,
        info.documents_indexed, len(qids), len(judged), len(present), data.skipped_judgements,
        results, ndcg_k, recall_k, time.perf_counter() - start)


def markdown_table(report: CollectionReport) -> str:
    """One row per mode, scores x 100."""
    k, rk = report.ndcg_k, report.recall_k
    lines = [f"| mode | ran | nDCG@{k} | Recall@{rk} | distinct docs in top {k} | ms/query |",
             "|---|---|---:|---:|---:|---:|"]
    for r in report.results:
        lines.append(f"| {r.mode} | {', '.join(r.ran)} | {100 * r.ndcg:.2f} | {100 * r.recall:.2f} | "
                     f"{r.distinct_docs:.2f} | {r.ms_per_query:.0f} |")
    return "\n".join(lines)


def summary(report: CollectionReport) -> str:
    """What the table scores, in a line."""
    per = "grouped by document" if report.grouped else "per chunk"
    instr = f"instruction {report.instruction!r}" if report.instruction else "no instruction"
    return (f"collection {report.collection!r} ({report.documents} documents, {report.chunk_size}-token "
            f"chunks) on beir:{report.folder}@{report.split}: {report.queries} queries, results {per}, "
            f"{instr}; {report.judged_present} of {report.judged_documents} judged documents in it "
            f"({100 * report.coverage:.1f}%)")


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
    md_path.write_text(f"# facet eval: collection {report.collection}\n\n{cmd}{summary(report)}.\n\n"
                       "Scores x 100, through the collection's own search (`Facet.search`).\n\n"
                       + markdown_table(report) + "\n", encoding="utf-8")
    return json_path, md_path

