"""The cluster service: a set of texts + an instruction -> explained clusters and a 2-D map.

Texts come from one of three places: given directly, a collection (optionally filtered),
or the results of a search. The instruction embedder encodes them under the instruction,
k-means groups them (``k`` given, or chosen by the best silhouette from 2 to ``max_k``), and
each cluster gets:

* keywords: TF-IDF top words of the members' InBedder answers to the same instruction when
  an explainer is given, else of the members' own texts (``embedders.explain``);
* a name: the answer most members share (explainer given), else its top keywords joined;
* representatives: the members nearest the cluster centroid (cosine);
* a 2-D position: PCA of the embeddings, the same projection for every text (a map).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from app.errors import InvalidRequestError, NotFoundError, TooLargeError
from app.services.context import ServiceContext
from app.services.search import SearchRequest, SearchService, payload_filters
from embedders.contract import Role
from embedders.explain import explain_clusters
from indexer.errors import StoreBusyError, StoreError, StoreUnavailableError

logger = logging.getLogger(__name__)

ClusterProgress = Callable[[float, str], None]
"""Called with the fraction done (0 to 1) and what is being done, e.g. ``(0.4, "encoding
800/2000 texts")``; a UI shows it as a progress bar."""

# Texts encoded (or answered) per progress step: small enough that a bar moves every few
# seconds on a CPU, large enough that the per-call overhead stays negligible.
PROGRESS_STEP_TEXTS = 128


@dataclass(frozen=True)
class ClusterRequest:
    """What to cluster and how. Give exactly one of ``texts``, ``collection`` or ``search``.

    Attributes:
        instruction: the aspect to group by ("What does the customer want?"); required.
        texts: the texts themselves.
        collection: take the chunk texts of this collection (``filters`` apply, at most
            ``limit`` of them, in point-id order).
        search: cluster the results of this search (its ``top_k`` is how many).
        filters: payload filters for ``collection`` (as in search).
        limit: texts taken from ``collection``; default and cap ``FACET_MAX_CLUSTER_TEXTS``.
        k: number of clusters; None chooses it by silhouette from 2 to ``max_k``.
        max_k: the largest k tried when choosing.
        embedder: the instruction embedder (name or checkpoint); default the settings' one.
        explainer: an InBedder checkpoint whose answers name the clusters; None takes keywords
            from the texts.
        keywords: keywords per cluster.
        members: representatives per cluster.
        answer_tokens: tokens the explainer generates per text (default: its own setting).
        seed: k-means seed (the result is deterministic for a seed).
    """

    instruction: str
    texts: Sequence[str] | None = None
    collection: str | None = None
    search: SearchRequest | None = None
    filters: Mapping[str, Any] = field(default_factory=dict)
    limit: int | None = None
    k: int | None = None
    max_k: int = 10
    embedder: str | None = None
    explainer: str | None = None
    keywords: int = 5
    members: int = 3
    answer_tokens: int | None = None
    seed: int = 0


@dataclass
class Cluster:
    """One cluster: its name, keywords, most central members and where it sits on the map."""

    id: int
    size: int
    name: str
    keywords: list[str]
    representatives: list[str]
    representative_indices: list[int]
    center: tuple[float, float]


@dataclass
class ClusterResponse:
    """The clustering of ``texts``; ``labels``, ``coordinates`` and ``sources`` are per text."""

    instruction: str
    embedder: str
    explainer: str | None
    k: int
    k_chosen: bool
    silhouette: float | None
    texts: list[str]
    labels: list[int]
    coordinates: list[tuple[float, float]]
    sources: list[dict[str, Any]]
    answers: list[str] | None
    clusters: list[Cluster]
    timings_ms: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_k(vectors: np.ndarray, max_k: int, seed: int) -> tuple[int, float]:
    """The k from 2 to ``max_k`` whose k-means clustering has the best cosine silhouette.

    Returns:
        (k, its silhouette).
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    n = len(vectors)
    best_k, best_score = 2, -2.0
    for k in range(2, min(max_k, n - 1) + 1):
        labels = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(vectors)
        if len(set(labels.tolist())) < 2:
            continue
        # A sample bounds the O(n^2) cost on large sets; seeded, so the choice is stable.
        score = float(silhouette_score(vectors, labels, metric="cosine",
                                       sample_size=min(n, 2000), random_state=seed))
        if score > best_score:
            best_k, best_score = k, score
    return best_k, best_score


def map_coordinates(vectors: np.ndarray) -> np.ndarray:
    """2-D PCA coordinates of the rows of ``vectors``, (n, 2); zeros where n < 2."""
    from sklearn.decomposition import PCA

    if len(vectors) < 2:
        return np.zeros((len(vectors), 2))
    components = min(2, vectors.shape[1], len(vectors))
    xy = PCA(n_components=components, random_state=0).fit_transform(vectors)
    if xy.shape[1] < 2:
        xy = np.pad(xy, ((0, 0), (0, 2 - xy.shape[1])))
    return np.asarray(xy, dtype=np.float64)


def _name(members: list[int], answers: list[str] | None, keywords: list[str]) -> str:
    if answers is not None:
        counts = Counter(answers[i].strip().lower() for i in members if answers[i].strip())
        if counts:
            # Most shared answer; ties go to the one met first among central-first members.
            return counts.most_common(1)[0][0]
    return " / ".join(keywords[:3]) or "(no keywords)"


class ClusterService:
    """Cluster texts under an instruction and explain the clusters."""

    def __init__(self, ctx: ServiceContext, search: SearchService | None = None) -> None:
        self.ctx = ctx
        self.search_service = search or SearchService(ctx)

    def validate(self, request: ClusterRequest) -> None:
        """Check a request without running it.

        Raises:
            InvalidRequestError: no instruction, not exactly one source, bad k/max_k/keywords/
                members/answer_tokens.
        """
        if not isinstance(request.instruction, str) or not request.instruction.strip():
            raise InvalidRequestError("the instruction must not be empty: it is what the texts are "
                                      "grouped by (e.g. 'What does the customer want?')")
        given = [name for name, value in (("texts", request.texts),
                                          ("collection", request.collection),
                                          ("search", request.search)) if value is not None]
        if len(given) != 1:
            raise InvalidRequestError(
                "give exactly one source of texts: texts, collection (with optional filters) or "
                f"search; got {', '.join(given) or 'none'}")
        if request.k is not None and (isinstance(request.k, bool) or request.k < 2):
            raise InvalidRequestError(f"k must be at least 2, got {request.k}")
        if request.max_k < 2:
            raise InvalidRequestError(f"max_k must be at least 2, got {request.max_k}")
        for name, value in (("keywords", request.keywords), ("members", request.members)):
            if value < 1:
                raise InvalidRequestError(f"{name} must be at least 1, got {value}")
        if request.answer_tokens is not None and request.answer_tokens < 1:
            raise InvalidRequestError(f"answer_tokens must be at least 1, got {request.answer_tokens}")
        if request.limit is not None and request.limit < 2:
            raise InvalidRequestError(f"limit must be at least 2, got {request.limit}")

    def cluster(self, request: ClusterRequest,
                progress: ClusterProgress | None = None) -> ClusterResponse:
        """Cluster and explain.

        Args:
            request: what to cluster and how.
            progress: told how far the work is after each step (texts are then encoded and
                answered in pieces of ``PROGRESS_STEP_TEXTS``; the vectors are the same within
                the embedders' batch-invariance tolerance).

        Raises:
            InvalidRequestError: see ``validate``; fewer than 2 texts or more clusters than texts;
                an explainer that cannot answer.
            TooLargeError: more texts than ``FACET_MAX_CLUSTER_TEXTS``.
            NotFoundError: unknown collection (or search collection).
        """
        from sklearn.cluster import KMeans

        self.validate(request)
        report = progress or (lambda fraction, stage: None)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        report(0.0, "collecting the texts")
        texts, sources = self._texts(request)
        timings["texts"] = (time.perf_counter() - t0) * 1000
        cap = self.ctx.settings.max_cluster_texts
        if len(texts) > cap:
            raise TooLargeError(f"{len(texts)} texts to cluster, more than the limit of {cap} "
                                "(FACET_MAX_CLUSTER_TEXTS); send fewer or raise the limit")
        if len(texts) < 2:
            raise InvalidRequestError(f"clustering needs at least 2 texts, got {len(texts)}")
        if request.k is not None and request.k > len(texts):
            raise InvalidRequestError(f"k={request.k} is more than the {len(texts)} texts")
        instruction = request.instruction.strip()
        spec = request.embedder or self.ctx.settings.default_embedder

        # Shares of the bar: encoding most of it, answering (when asked) as much again.
        encode_share = 0.45 if request.explainer else 0.9
        t0 = time.perf_counter()
        if progress is None:
            vectors = self.ctx.encoder.encode(texts, embedder=spec, role=Role.DOCUMENT,
                                              instruction=instruction, bulk=True)
        else:
            parts = []
            for start in range(0, len(texts), PROGRESS_STEP_TEXTS):
                report(encode_share * start / len(texts),
                       f"encoding {start}/{len(texts)} texts")
                parts.append(self.ctx.encoder.encode(
                    texts[start:start + PROGRESS_STEP_TEXTS], embedder=spec, role=Role.DOCUMENT,
                    instruction=instruction, bulk=True))
            vectors = np.concatenate(parts, axis=0)  # (n, dim)
        timings["encode"] = (time.perf_counter() - t0) * 1000
        report(encode_share, "k-means")

        t0 = time.perf_counter()
        silhouette: float | None = None
        if request.k is None:
            k, silhouette = choose_k(vectors, request.max_k, request.seed)
        else:
            k = request.k
        labels = KMeans(n_clusters=k, n_init=4, random_state=request.seed).fit_predict(vectors)
        label_list = [int(x) for x in labels]
        timings["kmeans"] = (time.perf_counter() - t0) * 1000

        answers: list[str] | None = None
        if request.explainer:
            t0 = time.perf_counter()
            if progress is None:
                answers = self.ctx.encoder.generate_answers(texts, explainer=request.explainer,
                                                            instruction=instruction,
                                                            max_new_tokens=request.answer_tokens)
            else:
                answers = []
                for start in range(0, len(texts), PROGRESS_STEP_TEXTS):
                    report(encode_share + 0.45 * start / len(texts),
                           f"{request.explainer} answering {start}/{len(texts)} texts")
                    answers.extend(self.ctx.encoder.generate_answers(
                        texts[start:start + PROGRESS_STEP_TEXTS], explainer=request.explainer,
                        instruction=instruction, max_new_tokens=request.answer_tokens))
            timings["answers"] = (time.perf_counter() - t0) * 1000

        report(0.95, "naming the clusters and drawing the map")
        t0 = time.perf_counter()
        explained = explain_clusters(texts, label_list, answers if answers is not None else texts,
                                     embeddings=vectors, top_k=request.keywords,
                                     members=request.members)
        xy = map_coordinates(vectors)
        clusters = []
        for c in sorted(explained, key=lambda e: (-e.size, e.cluster)):
            members = [i for i, label in enumerate(label_list) if label == c.cluster]
            central_first = c.representative_indices + [i for i in members
                                                        if i not in c.representative_indices]
            center = xy[members].mean(axis=0)
            clusters.append(Cluster(
                id=c.cluster, size=c.size, name=_name(central_first, answers, c.keywords),
                keywords=c.keywords, representatives=c.representatives,
                representative_indices=c.representative_indices,
                center=(round(float(center[0]), 5), round(float(center[1]), 5))))
        timings["explain"] = (time.perf_counter() - t0) * 1000
        report(1.0, "done")
        model_name = self.ctx.embedders.name_of(spec)
        return ClusterResponse(
            instruction=instruction, embedder=model_name, explainer=request.explainer, k=k,
            k_chosen=request.k is None, silhouette=silhouette, texts=texts, labels=label_list,
            coordinates=[(round(float(x), 5), round(float(y), 5)) for x, y in xy],
            sources=sources, answers=answers, clusters=clusters, timings_ms=timings)

    def _texts(self, request: ClusterRequest) -> tuple[list[str], list[dict[str, Any]]]:
        if request.texts is not None:
            if isinstance(request.texts, str):
                raise InvalidRequestError("texts must be a list of strings, not one string")
            texts = list(request.texts)
            bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
            if bad:
                raise InvalidRequestError(f"texts[{bad[0]}] is {type(texts[bad[0]]).__name__}, "
                                          "not a string; every text must be a string")
            return texts, [{"index": i} for i in range(len(texts))]
        if request.search is not None:
            response = self.search_service.search(request.search)
            return ([r.text for r in response.results],
                    [{"doc_id": r.doc_id, "chunk_no": r.chunk_no, "title": r.title,
                      "score": r.score} for r in response.results])
        assert request.collection is not None
        name = request.collection
        if not self.ctx.store.collection_exists(name):
            raise NotFoundError(f"unknown collection {name!r}; list them with `facet collections`")
        cap = self.ctx.settings.max_cluster_texts
        limit = min(request.limit or cap, cap)
        try:
            hits = self.ctx.store.scroll(name, limit=limit, filters=payload_filters(request.filters))
        except (StoreBusyError, StoreUnavailableError):
            raise  # the facade names the writer / the server to start
        except StoreError as e:
            raise InvalidRequestError(str(e)) from e
        return ([str(h.payload.get("text", "")) for h in hits],
                [{"doc_id": h.payload.get("doc_id"), "chunk_no": h.payload.get("chunk_no"),
                  "title": h.payload.get("title")} for h in hits])
