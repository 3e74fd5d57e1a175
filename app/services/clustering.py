"""The cluster service: a set of texts + an instruction -> explained clusters and a 2-D map.

Texts come from one of three places: given directly, a collection (optionally filtered),
or the results of a search. The instruction embedder encodes them under the instruction
(reused where this service encoded the same texts under it lately: ``RecentVectors``; a
collection's chunks that it wrote are read from their stored vectors: ``_from_stored``), k-means
groups them (``k`` given, or chosen by the best silhouette from 2 to ``max_k``), and
each cluster gets:

* keywords: the words the members' InBedder answers to the same instruction (when an explainer
  is given, else the members' own texts) use more than the other clusters' do
  (``embedders.explain``);
* a name: its most distinctive answer, more common in it than overall, no two clusters alike,
  after its most common answer where that one dominates (explainer given; ``_name_clusters``),
  else its top three keywords joined, with how many members hold one of them (``name_texts``);
* representatives: the members nearest the cluster centroid (cosine);
* a 2-D position: PCA of the embeddings, the same projection for every text (a map).

Fewer distinct texts than clusters (a file of repeated lines) give fewer clusters; the response
says how many were found and why (``note``); so does a collection cut to ``limit`` or
``FACET_MAX_CLUSTER_TEXTS`` (how many of how many chunks), and so do names that describe the
clusters poorly (answers that do not follow the clusters, or name few texts).
``read_text_file`` and ``read_label_file`` read the text and label files that the CLI and the UI
both accept.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import io
import json
import logging
import numbers
import re
import sys
import time
import unicodedata
import warnings
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy.exc import SQLAlchemyError

from app.encoding import (
    ANSWER_BATCH,
    CLUSTERING_MODULES,
    UNREAD_MARK,
    UNREAD_WHY,
    InlineQueryEncoder,
    RecentVectors,
    check_explainer,
    loaded_model,
    local_model_key,
    longest_first,
    max_length_spec,
    not_an_explainer,
    texts_digest,
    unread_count,
)
from app.errors import (
    DataError,
    FacetError,
    InvalidRequestError,
    NotFoundError,
    TooLargeError,
    UnknownModelError,
    as_domain_error,
)
from app.services.collections import default_vector
from app.services.context import ServiceContext
from app.services.search import (
    SearchRequest,
    SearchService,
    check_filters,
    check_str,
    payload_filters,
    plain_filters,
    plain_number,
    read_as_none,
    reads_instruction,
    refuse_if_busy,
    stored_vectors,
    user_filter_words,
    weak_instruction_note,
)
from app.text import blank as blank_text
from app.text import check_text_encodable, check_texts, plural
from embedders.contract import EncodesFromPlain, Role, may_be_cut
from embedders.explain import ARTICLES, answer_terms, explain_clusters
from indexer import metadata as md
from indexer.errors import StoreBusyError, StoreDamagedError, StoreError, StoreUnavailableError
from indexer.parsing import TEXT_FIELDS  # what `facet index` reads as a record's text
from indexer.store import Scrolled, point_id, validate_name

logger = logging.getLogger(__name__)

ClusterProgress = Callable[[float, str], None]
"""Called with the fraction done (0 to 1) and what is being done, e.g. ``(0.4, "encoding
800/2000 texts")``; a UI shows it as a progress bar."""

# Texts encoded per progress step at most (``ClusterService._encode_step``): an encoder with a
# batch size (the CLI's, a server's) is told after each of its batches instead, one forward pass:
# steps of 128 left `facet cluster` at "encoding 0/1140 texts" for minutes with InBedder on a
# CPU (137 SciFact chunks took 207 s, about 48 s a batch of 32). The workers' encoder, which has
# no batch size, gets this many per round trip.
PROGRESS_STEP_TEXTS = 128
# Texts answered per progress step: the explainer's decoding batch (answers take far longer).
ANSWER_STEP_TEXTS = ANSWER_BATCH
# Texts per call of a server's ``encode_from_plain`` (``_from_stored``): it runs on the model
# thread as one block, ahead of waiting queries, so a search waits for at most one piece, about
# ``BULK_PIECE_MS`` as bulk encoding's: the instructed half of 4 scifact chunks (700 characters)
# under minilm took 0.48 s at one thread on the 2-core CPU, 8 took 1.0 s; 64 chunks in pieces
# of 4 took 7.7 s, in one call 8.8 s (less padding in small pieces).
FROM_PLAIN_PIECE_TEXTS = 4

# The progress bar's shares of encoding and answering (``stage_shares``) follow their expected
# time per text, relative to minilm encoding one (under an instruction: two passes). Measured
# with OMP_NUM_THREADS=1 on the 2-core CPU (shared: load ~8), 64 texts each way (examples/
# steer-probe's reviews and styles: short, ~20 tokens; long, four of them joined, ~90 tokens),
# batch 32, instruction "the topic", after a warm-up call; ms per text, short / long:
#   minilm encode        35.6 / 234.5   again, around the answers: 25.5-26.3 / 84.3-114.3
#   inbedder encode     553.7 / 2768.3  (15.6x / 11.8x the first minilm)
#   instemb encode      387.0 / 1661.1  (10.9x / 7.1x)
#   inbedder answering  331.6 / 726.1   again: 246.6 / 670.0 (9.5x / 6.7x the minilm around it)
# (FACET_DATA_DIR=/tmp/x OMP_NUM_THREADS=1 python measure.py: load_embedder(name, device="cpu")
# .encode(texts, role=Role.DOCUMENT, instruction="the topic", batch_size=32) and
# load_embedder("inbedder").generate_answers(texts, "the topic", batch_size=ANSWER_BATCH), its
# 16 answer tokens, timed with time.perf_counter.) A user's 5,000 texts: minilm ~2 min, the
# answers ~32 min (16x); the fixed 0.45 + 0.45 filled 45% of the bar in its first ~6%.
ENCODE_COST = 1.0  # minilm (``SMALL_ENCODERS``)
ENCODE_COST_LLM = 11.0  # any other embedder: SmolLM2's (checkpoints, backbone-*), plugins
ANSWER_COST = 8.0  # an explainer generating its answers (InBedder's; any explainer)
SMALL_ENCODERS = frozenset({"minilm"})
# The bar's part that encoding and answering share: k-means is told at its end, the naming and
# the map at 0.95.
WORK_SHARE = 0.9


def stage_shares(embedder: str, explainer: str | None) -> tuple[float, float]:
    """The bar's shares (encoding, answering) of ``WORK_SHARE``, by the stages' expected cost per
    text: ``ENCODE_COST`` for an embedder of ``SMALL_ENCODERS`` (options aside), else
    ``ENCODE_COST_LLM``; ``ANSWER_COST`` for an ``explainer``, none without one. minilm with
    InBedder answering: 0.1 and 0.8 (0.45 each before); inbedder with it: 0.52 and 0.38."""
    from embedders.registry import without_options

    encode = ENCODE_COST if without_options(embedder).lower() in SMALL_ENCODERS else ENCODE_COST_LLM
    answer = ANSWER_COST if explainer else 0.0
    encode_share = WORK_SHARE * encode / (encode + answer)
    return encode_share, WORK_SHARE - encode_share


# How a too-large k's message ends; each edge adds its own way of leaving k unset ("set k to
# 0", `--k 0`, "omit k") to a message that ends so.
K_BY_SILHOUETTE = "or let k be chosen by silhouette"


class _Chunks(NamedTuple):
    """The texts as chunks of a collection: its name, their point ids, and (``vector``, ``read``)
    the vectors of that name as the scroll that found them read them ((hit, vectors) pairs in
    ids' order; None where none were read), so ``_from_stored`` does not read the same points
    twice."""

    collection: str
    ids: list[str]
    vector: str | None = None
    read: list[Scrolled] | None = None


# k-means' random_state takes 0 .. 2**32 - 1 (numpy's seed range).
MAX_SEED = 2**32 - 1

# The largest max_k: the silhouette choice runs k-means once per k tried (every edge's bound:
# the CLI's --max-k, POST /cluster's max_k).
MAX_K = 50
# The results of a search clustered unless the request says (POST /cluster's ``search.k``,
# `facet cluster --query`'s --top-k).
SEARCH_RESULTS_CLUSTERED = 100

# How the registry's refusal of an unknown model name begins ("unknown embedder 'x': ...").
_UNKNOWN_EMBEDDER = "unknown embedder "


def _explainers_named(message: str) -> str:
    """The registry's refusal of an unknown name (``message``) with its list of valid names
    cut to those that generate answers (``answers_questions``): `--explain ./nope` listed every
    embedder, minilm among them, which was then refused as not generating answers."""
    from embedders.registry import answers_questions, embedder_names

    names = embedder_names()
    listed = f"Valid names: {', '.join(names)}"
    if listed not in message:
        return message
    explainers = [name for name in names if answers_questions(name)]
    said = (f"Valid names: {', '.join(explainers)} (the registered models that generate answers; "
            "a path to an InBedder checkpoint is one too)" if explainers else
            "No registered model generates answers: give a path to an InBedder checkpoint")
    return message.replace(listed, said, 1)

# Bytes of embeddings the cluster service keeps for reuse (``RecentVectors``; a constant, not a
# setting): 1,504 minilm vectors are 2.3 MB, 5,000 (FACET_MAX_CLUSTER_TEXTS) of a 1,024-wide
# model 20 MB.
EMBEDDING_CACHE_BYTES = 256 * 2**20

# File types the UI's upload takes (``read_text_file`` reads any other as lines, as the CLI's FILE).
TEXT_FILE_SUFFIXES = (".txt", ".json", ".jsonl", ".csv")


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
        limit: texts taken from ``collection``; default and cap ``FACET_MAX_CLUSTER_TEXTS``
            (a collection cut to it is said in the response's ``note``, with its chunk count).
        k: number of clusters; None chooses it by silhouette from 2 to ``max_k``.
        max_k: the largest k tried when choosing.
        embedder: the instruction embedder (name or checkpoint); default the settings' one.
        explainer: a model that generates answers (an InBedder checkpoint, an embedder
            registered as an explainer) whose answers name the clusters; None takes keywords
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

    def __post_init__(self) -> None:
        # numpy scalars as plain numbers, as ``SearchRequest`` takes them (a filter value
        # np.int64(1) was refused as nothing a filter matches).
        for name in ("limit", "k", "max_k", "keywords", "members", "answer_tokens", "seed"):
            object.__setattr__(self, name, plain_number(getattr(self, name)))
        object.__setattr__(self, "filters", plain_filters(self.filters))
        # A blank explainer is none, as '' is (the CLI's --explain '', the page's empty box):
        # `--explain ' '` was looked up as a model named ' ' ("unknown explainer ' '").
        if isinstance(self.explainer, str) and not self.explainer.strip():
            object.__setattr__(self, "explainer", None)


@dataclass
class Cluster:
    """One cluster: its name, keywords, most central members and where it sits on the map.

    Attributes:
        id: the cluster's label, as ``ClusterResponse.labels`` gives it per text.
        size: how many texts it holds.
        name: its most distinctive explainer answer (lower-cased), after its most common one
            where that one dominates ("anger / love": ``_name_clusters``), or,
            without answers, its first three keywords joined by " / ".
        keywords: its distinctive words, from the answers or else the texts
            (``ClusterRequest.keywords`` at most).
        representatives: its most central texts, distinct (``ClusterRequest.members`` at most).
        representative_indices: where ``representatives`` are in ``ClusterResponse.texts``.
        center: (x, y) on the 2-D map of ``ClusterResponse.coordinates``: its members' mean.
        name_count: how many members' answers ``name`` stands for (both answers of "anger /
            love"); None for a name made of keywords.
        name_texts: for a name made of keywords, how many members hold at least one of its
            words (in their answers where the keywords came from answers, else their texts;
            read as the keywords are: ``embedders.explain.answer_terms``); None for an
            explainer's answer and for "(no keywords)".
    """

    id: int
    size: int
    name: str
    keywords: list[str]
    representatives: list[str]
    representative_indices: list[int]
    center: tuple[float, float]
    # How many members' answers are the name (an explainer's answer), None for a name made of
    # keywords: a name 7 of 16 members share describes the cluster less than it seems.
    name_count: int | None = None
    # How many members hold a word of a name made of keywords, None for an explainer's answer:
    # "balance / account / transfer" named a cluster of 43 texts, 9 of which hold one of them,
    # and nothing said so (the page and the CLI show "9 of 43 texts" since the seventh session
    # of 2026-11-30). A field of its own: ``name_count`` stays None for such a name, as the
    # API has always answered.
    name_texts: int | None = None

    @property
    def name_share(self) -> str | None:
        """"24 of 71" where the name is fewer than all its members' answers, else None (what
        the CLI and the page show beside the name)."""
        if self.name_count is None or self.name_count >= self.size:
            return None
        return f"{self.name_count} of {self.size}"

    @property
    def name_text_share(self) -> str | None:
        """"9 of 43" where a name of keywords has a word in fewer than all its members' texts
        (``name_texts``), else None."""
        if self.name_texts is None or self.name_texts >= self.size:
            return None
        return f"{self.name_texts} of {self.size}"

    @property
    def name_share_label(self) -> str | None:
        """How much of the cluster the name stands for, with its unit: "24 of 71 answers" (an
        explainer's answer) or "9 of 43 texts" (a name of keywords: members holding one of its
        words); None where it stands for all of them."""
        if self.name_share:
            return f"{self.name_share} answers"
        return f"{self.name_text_share} texts" if self.name_text_share else None


@dataclass
class ClusterResponse:
    """The clustering of ``texts``; ``labels``, ``coordinates`` and ``sources`` are per text.

    ``k`` is the number of clusters found (``len(clusters)``); ``note`` says why it is fewer
    than the k asked for, or why k was not chosen by silhouette (too few distinct texts), and
    when a collection was cut to ``limit`` or ``FACET_MAX_CLUSTER_TEXTS`` ("clustered
    5,000 of 50,001 chunks, in storage order (FACET_MAX_CLUSTER_TEXTS caps it)"), and when the
    explainer's names describe the clusters poorly (``_naming_note``), the parts joined by "; ".

    ``timings_ms`` always has ``encode``: the time spent getting the embeddings, near 0 when
    ``encode_reused`` (they were kept from an earlier clustering of the same texts under the
    same instruction and embedder: ``RecentVectors``). The stage itself was once renamed
    ``encode_reused`` then, and whatever read ``encode`` missed it. ``stored_vectors_used``:
    the texts are chunks of a collection that the embedder wrote, and their stored (bare)
    vectors were read rather than encoded again (``ClusterService._from_stored``): ``encode``
    is then the time of the instructed half alone.

    Attributes:
        instruction: the instruction the texts were grouped by (stripped).
        embedder: the name of the model that encoded the texts.
        explainer: the explainer that answered for each text, None where keywords name the
            clusters.
        k: the number of clusters found.
        k_chosen: whether k was chosen by silhouette (False where given, or where too few
            distinct texts left nothing to choose between).
        silhouette: the cosine silhouette of the chosen k, None where k was not chosen.
        texts: the texts clustered, in order.
        labels: each text's cluster (a ``Cluster.id``).
        coordinates: each text's (x, y) on a 2-D map (PCA of the embeddings).
        sources: where each text came from: ``{"index": i}`` for given texts; ``doc_id``,
            ``chunk_no``, ``title`` (and a search's ``score``) for a collection's chunks.
        answers: the explainer's answer for each text, None without an explainer.
        clusters: the clusters, largest first.
        timings_ms: milliseconds per stage (``texts``, ``encode``, ``kmeans``, ``explain``;
            ``answers`` with an explainer, ``load_model`` where the call loaded one,
            ``imports`` where it imported scikit-learn, the first clustering of a process).
        note: what the result cannot show (see above), else None.
        encode_reused: the embeddings were those of an earlier clustering (``RecentVectors``).
        stored_vectors_used: the collection's stored vectors were read, not encoded again.
        embedder_spec: what encoded the texts, options included (``minilm[instruction_weight=1]``).
        max_k_tried: the largest k the silhouette choice tried (from 2), None where k was not
            chosen; a chosen k equal to it may be cut short by it.
    """

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
    note: str | None = None
    encode_reused: bool = False
    stored_vectors_used: bool = False
    # What encoded the texts, options included (``minilm[instruction_weight=1]``): ``embedder``
    # is the model's name, which dropped them.
    embedder_spec: str | None = None
    # The largest k the silhouette choice tried (k from 2 to it): ``max_k``, or fewer where the
    # texts (one less than their number) or their distinct embeddings allow fewer; None where k
    # was given or not chosen. A chosen k equal to ``max_k`` may be cut short by it.
    max_k_tried: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_k(vectors: np.ndarray, max_k: int, seed: int) -> tuple[int, float]:
    """The k from 2 to ``max_k`` whose k-means clustering has the best cosine silhouette (k is
    also kept below the number of texts and at most the number of distinct vectors; the caller
    makes sure there are at least 3 texts and 2 distinct vectors).

    Returns:
        (k, its silhouette).
    """
    from sklearn.metrics import silhouette_score

    n = len(vectors)
    best_k, best_score = 2, -2.0
    # More clusters than distinct vectors would leave some empty (and sklearn warn about it).
    for k in range(2, min(max_k, n - 1, distinct_rows(vectors)) + 1):
        labels = _kmeans(vectors, k, seed)
        if len(set(labels.tolist())) < 2:
            continue
        # A sample bounds the O(n^2) cost on large sets; seeded, so the choice is stable.
        score = float(silhouette_score(vectors, labels, metric="cosine",
                                       sample_size=min(n, 2000), random_state=seed))
        if score > best_score:
            best_k, best_score = k, score
    return best_k, best_score


# A k chosen by silhouette with one cluster holding at least this share of the texts (and at
# least ``LOPSIDED_MIN_TEXTS`` texts) is said: silhouette favours a few broad clusters, and
# clustering a search's 100 results (26 intents) chose k = 2 with 88 texts in one cluster,
# said as "the best of k = 2 to 10" and nothing more (quality exploration).
LOPSIDED_SHARE = 0.8
LOPSIDED_MIN_TEXTS = 20


def _lopsided(labels: Sequence[int], k: int) -> str | None:
    """The note for a chosen k whose largest cluster holds most of the texts, else None."""
    n = len(labels)
    if n < LOPSIDED_MIN_TEXTS or k < 2:
        return None
    largest = max(np.bincount(np.asarray(labels)).tolist())
    if largest < LOPSIDED_SHARE * n:
        return None
    return (f"one of the {k} clusters holds {largest:,} of the {n:,} texts: silhouette favours a "
            "few broad clusters; give k (the number of groups you expect) for finer ones")


# A k chosen by silhouette whose silhouette is below this is said: the texts form no clear
# groups under the embedder. Measured with minilm (k from 2 to 10, seeds 0-1, second session
# of 2026-12-04): 300 emotion *validation* texts under "What emotion does the writer feel?"
# 0.045-0.052 (V-measure against the 6 emotions 1.0-1.6), where InstEmb found 0.236 (V 19.1);
# 400 CLINC *validation* texts 0.081-0.087 (V 53.5-56.4); 400 Banking77 *train* texts
# 0.169-0.175 (V 41.0-43.2). k = 7 at 0.046 was listed as any other choice. It is said only
# where it is clear, and a sample or seed can land either side: the first 100 of those emotion
# texts scored 0.083, above CLINC's, and the first 300 0.066 at seed 0, 0.057 at seed 1.
WEAK_SILHOUETTE = 0.06


def _weak(silhouette: float, spec: str, reads_instructions: bool) -> str | None:
    """The note for a chosen k whose silhouette says the texts form no clear groups, else None;
    ``reads_instructions``: the embedder is one trained to follow them (no other is advised)."""
    if silhouette >= WEAK_SILHOUETTE:
        return None
    other = ("" if reads_instructions else
             "; an embedder trained to follow instructions may separate them (on emotion texts "
             "InstEmb's best silhouette was 0.24 where minilm's was 0.05)")
    return (f"the best silhouette ({silhouette:.3f}) is near 0: under {spec} these texts form no "
            f"clear groups, so another seed or k may group them quite differently{other}")


# How much of a text ``other_script_texts`` reads to tell its script (a long text's start says it).
SCRIPT_SAMPLE_CHARS = 2000


def _latin_letter(char: str) -> bool:
    return char < "\u0250" or "LATIN" in unicodedata.name(char, "")


def other_script_texts(texts: Sequence[str]) -> int:
    """How many of ``texts`` are mostly letters of a script other than Latin (Cyrillic, Greek,
    Arabic, CJK, Thai...): more than half the letters of their first ``SCRIPT_SAMPLE_CHARS``."""
    count = 0
    for text in texts:
        letters = [c for c in text[:SCRIPT_SAMPLE_CHARS] if c.isalpha()]
        if letters and sum(not _latin_letter(c) for c in letters) * 2 > len(letters):
            count += 1
    return count


def _other_script_note(texts: Sequence[str], explainer: str) -> str | None:
    """The note for an explainer's answers to texts in other scripts than Latin, else None.

    The shipped InBedder (an English instruction-tuned 135M model, trained on English answers)
    read "my card was stolen" in six other scripts as "cash withdrawal" (Chinese), "2018-01-24
    20:20" (Russian), "sure" (Arabic), "morning" (Japanese), "201810201810" (Thai) and "1000"
    (Greek), where the English text got "card stolen" (third session of 2026-12-04); a cluster
    of Thai and Chinese tickets was named "201810201810" with nothing said (helper-419)."""
    other = other_script_texts(texts)
    if not other:
        return None
    return (f"{other:,} of the {len(texts):,} texts are mostly in another script than Latin: the "
            f"explainer {explainer} answers in English and read such texts poorly in a check (a "
            "Chinese \"my card was stolen\" answered \"cash withdrawal\", a Thai one "
            "\"201810201810\"), so their answers, and names made of them, may be wrong; texts in "
            "other languages written in Latin letters fare no better. Read the texts, or name "
            "the clusters without an explainer (keywords of the texts)")


_LINE_END = re.compile(r"\r\n|\r|\n")


def text_lines(raw: str) -> list[str]:
    """``raw``'s lines, split at LF, CRLF and CR alone (an old Mac's), not at the other breaks
    ``str.splitlines`` knows: U+2028 and U+0085, which a JSON string may hold raw
    (``json.dumps(..., ensure_ascii=False)`` writes them so), and the form feed and the
    separators U+001C-U+001E, which a text may hold. A .jsonl that `facet index` read was
    refused by `facet cluster` ("not valid JSON (Unterminated string ...)"), and a text with a
    form feed was two texts, so a labels file of as many lines "held 6 labels for the 7 texts"."""
    return _LINE_END.split(raw)


def same_text_same_vector(texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    """``vectors`` with every copy of a text given its first copy's vector. The same text in
    two batches (or two stored chunks) comes back differing in the last bits (8.6e-8 with
    minilm), which rounding to 5 decimals does not always merge (a value on a rounding
    boundary lands on both sides): 40 copies of one text counted as 2 distinct rows, and
    k-means split them into two clusters of "please / refund", with no "only N distinct
    texts" note."""
    first: dict[str, int] = {}
    rows = [first.setdefault(text, i) for i, text in enumerate(texts)]
    return vectors if len(first) == len(texts) else vectors[rows]


def distinct_rows(vectors: np.ndarray) -> int:
    """How many different rows ``vectors`` has, to 5 decimals (the same text encoded in two
    batches may differ in the last bits)."""
    return len(np.unique(np.round(vectors, 5), axis=0)) if len(vectors) else 0


def _kmeans(vectors: np.ndarray, k: int, seed: int) -> np.ndarray:
    """k-means labels, (n,). Near-duplicate vectors can still leave a cluster empty, which
    sklearn reports as a ConvergenceWarning; the caller counts the clusters actually found."""
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return np.asarray(KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(vectors))


def _few_distinct(texts: Sequence[str], distinct: int, cut: int = 0, spec: str = "") -> str:
    """Why there are so few clusters: ``only 1 distinct text`` (or embedding; with ``cut``
    texts that ``spec`` cut, that texts differing only past the cut embed alike: nine long
    texts that differed in their last sentence read "only 1 distinct embedding", and nothing
    said that they were cut)."""
    different = len(set(texts))
    if different > distinct:  # different texts the embedder could not tell apart
        past_cut = (f" (texts that differ only past where {spec} cuts them embed alike)"
                    if cut else "")
        return f"only {plural(distinct, 'distinct embedding')}{past_cut}"
    return f"only {plural(different, 'distinct text')}"


class _TokenCounts(NamedTuple):
    """What the embedder's tokenizer makes of the texts to cluster: how many are mostly its
    unknown token (``unread``), how many it cuts read under the instruction (``cut``), the
    tokens of text it reads whole so (``budget``; None where it does not tell), and its spec
    with ``[max_length=N]`` where it takes that option (``option``)."""

    unread: int = 0
    cut: int = 0
    budget: int | None = None
    option: str | None = None


def _takes_instruction(method: Callable[..., Any]) -> bool:
    """Whether ``method`` (an embedder's ``documents_cut``, ``document_budget``) takes an
    ``instruction`` (a plugin's may not: it is then read bare, which cuts no more)."""
    import inspect

    try:
        return "instruction" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _cut_texts(model: Any, texts: Sequence[str], instruction: str) -> tuple[int, int | None]:
    """How many of ``texts`` ``model`` cuts read as documents under ``instruction`` (as a
    clustering encodes them) and the tokens of text it reads whole so; ``(0, None)`` for a
    model that does not tell (a plugin's)."""
    count_of = getattr(model, "documents_cut", None)
    budget_of = getattr(model, "document_budget", None)
    if not callable(count_of) or not callable(budget_of):
        return 0, None
    under: dict[str, Any] = ({"instruction": instruction}
                             if _takes_instruction(count_of) and _takes_instruction(budget_of) else {})
    budget = budget_of(**under)
    if not isinstance(budget, int) or isinstance(budget, bool):
        return 0, None
    # Only texts that might be longer are tokenised (5,000 short chunks: none).
    long = may_be_cut(texts, budget)
    count = count_of(long, **under) if long else 0
    return (count if isinstance(count, int) and not isinstance(count, bool) else 0), budget


def _cut_note(cut: int, total: int, spec: str, budget: int | None, option: str | None) -> str:
    """The note for ``cut`` of ``total`` texts that ``spec`` reads only the start of (as the
    index's ``cut_message`` says chunks): its advice names ``[max_length=N]`` only where the
    embedder takes it (``option``), else splitting the texts (minilm has none: the
    log's "raise max_length" was refused when followed)."""
    reads = f" ({budget} tokens of text)" if budget else ""
    advice = "split the texts into shorter ones" + (f", or raise max_length (embedder '{option}')"
                                                    if option else "")
    return (f"{cut:,} of {total:,} texts are longer than {spec} reads whole under the "
            f"instruction{reads} and were cut: only the start of each is in its embedding, so "
            f"what the rest says groups nothing; to have all of each read, {advice}")


def _distinct_representatives(chosen: list[int], labels: Sequence[int], cluster: int,
                               texts: Sequence[str], vectors: np.ndarray, members: int) -> list[int]:
    """The representatives of ``cluster`` as distinct texts: ``chosen`` (its members nearest
    the centroid, ``explain_clusters``'), unless some repeat a text (a file with duplicate
    lines showed "refund please" three times); then the first ``members`` distinct texts of
    its members ordered by cosine closeness to the centroid as ``explain_clusters`` orders
    them (a stable sort: ties keep the texts' order)."""
    if len({texts[i] for i in chosen}) == len(chosen):
        return chosen
    idx = [i for i, label in enumerate(labels) if label == cluster]
    rows = vectors[idx] / np.maximum(np.linalg.norm(vectors[idx], axis=1, keepdims=True), 1e-12)
    centroid = rows.mean(axis=0)
    closeness = rows @ (centroid / max(float(np.linalg.norm(centroid)), 1e-12))
    shown: list[int] = []
    seen: set[str] = set()
    for j in np.argsort(-closeness, kind="stable"):
        if texts[idx[j]] not in seen:
            seen.add(texts[idx[j]])
            shown.append(idx[j])
            if len(shown) == members:
                break
    return shown


def map_coordinates(vectors: np.ndarray) -> np.ndarray:
    """2-D PCA coordinates of the rows of ``vectors``, (n, 2); zeros where n < 2."""
    from sklearn.decomposition import PCA

    if len(vectors) < 2 or np.ptp(vectors, axis=0).max() == 0:
        # (All rows alike: PCA divides by a zero variance and warns, for the same zeros.)
        return np.zeros((len(vectors), 2))
    components = min(2, vectors.shape[1], len(vectors))
    xy = PCA(n_components=components, random_state=0).fit_transform(vectors)
    if xy.shape[1] < 2:
        xy = np.pad(xy, ((0, 0), (0, 2 - xy.shape[1])))
    return np.asarray(xy, dtype=np.float64)


# Same-answer pairs needed before the answers' agreement with the clusters is judged (fewer
# say too little: 3 pairs agree 0, 1/3, 2/3 or all of the time by luck).
MIN_ANSWER_PAIRS = 10
# Below this chance-corrected agreement (0: as random clusters of the same sizes, 1: every
# pair of texts with the same answer in one cluster; a quarter of the way from chance to full)
# the answers do not follow the clusters. Sentiment answers on clusters of topics scored -0.07
# (27% of same-answer pairs together, 32% by chance); style answers on style clusters 0.66.
MIN_ANSWER_AGREEMENT = 0.25
# Below this share of the answered texts whose answer is their cluster's name, the names
# describe few members (a name 2 of 7 members give): the note says so.
MIN_NAMED_SHARE = 1 / 3


# Words of an answer that do not tell two answers apart ("the lost card" is "lost card");
# negations and numbers stay, with their signs ("no refund" is not "refund", "16 gb" not
# "128 gb", "-5" not "$5" or "5%").
_ANSWER_WORD = re.compile(r"(?:(?<!\w)[-+])?[$€£¥]?\w+%?")  # "top-up" is "top up"
_ANSWER_FILLER = frozenset(("a", "an", "the", "my", "your", "his", "her", "its", "our", "their",
                            "this", "that", "of", "is", "are", "was", "i"))
# Words that give an answer a direction: with one, the order stays ("card to account" is not
# "account to card"); without, "card lost" is "lost card".
_ANSWER_DIRECTION = frozenset(("to", "from", "into", "onto", "than", "vs", "versus", "before",
                               "after", "over", "under"))
# A cluster's most common answer goes before its distinctive name when it holds at least twice
# as many answers as the name and half the cluster's answers, or this share of them and more
# than its share of all the answers (``_name_clusters``).
COMMON_ANSWER_SHARE = 1 / 3
MAJORITY = 1 / 2
# A cluster named by keywords (no explainer, or no answers) is named by its first this many.
NAME_KEYWORDS = 3


def _answer_key(answer: str) -> str:
    """What two answers must share to count as one: their words as a set (in order where one
    gives a direction: "to", "from"), without articles and the like ("card lost", "Lost
    card." and "the lost card" are one answer; counted apart,
    the name "card theft (3 of 35 answers)" hid 8 answers of lost or stolen cards), or the
    answer itself when it has no other words."""
    words = [w for w in _ANSWER_WORD.findall(answer.lower()) if w not in _ANSWER_FILLER]
    if not words:
        return answer
    return " ".join(words if _ANSWER_DIRECTION & set(words) else sorted(set(words)))


def _leading_article(wording: str) -> bool:
    """Whether ``wording`` starts with an article ("the card", "l'économie": ``ARTICLES``)."""
    first = _ANSWER_WORD.match(wording.lstrip())
    return first is not None and first.group() in ARTICLES and wording.lstrip() != first.group()


def _shown_wording(forms: Counter[str]) -> str:
    """The wording an answer is shown in, of the ``forms`` counted as it (``_answer_key``),
    central first: the one most members gave, of those that do not start with an article where
    any does not ("card" before "the card", whichever more members gave; which answers count
    as one is unchanged)."""
    bare = [form for form in forms if not _leading_article(form)]
    return max(bare or forms, key=lambda form: forms[form])  # max keeps the first of a tie


def _keyword_name_texts(words: Sequence[str], ids: Sequence[int],
                        terms: Sequence[Sequence[str]]) -> int | None:
    """How many of ``ids`` hold at least one of ``words`` (a name of keywords) among their
    ``terms`` (``answer_terms`` of what the keywords came from); None without words."""
    wanted = set(words)
    return sum(bool(wanted.intersection(terms[i])) for i in ids) if wanted else None


def _name_clusters(members: Mapping[int, list[int]], answers: Sequence[str] | None,
                   keywords: Mapping[int, list[str]], explainer_embedded: bool = False,
                   ) -> tuple[dict[int, tuple[str, int | None]], str | None]:
    """Each cluster's name and how many members' answers it stands for (None: made of
    keywords), and a note when the names describe the clusters poorly (None: they do not).

    Answers are counted as one when they hold the same content words (``_answer_key``), and
    shown in the wording most members gave, one without a leading article where any is
    (``_shown_wording``: "card", not "the card"). The name is the cluster's most *distinctive*
    answer, not its most common one: the answer whose share of the cluster's answers most
    exceeds its share of all the answers (share in the cluster minus share overall). The most
    common answer named three topic clusters "positive" under a sentiment instruction, as every
    topic had positive reviews; an answer as common everywhere scores 0, one only this cluster
    gives scores its share. A difference of shares (rather than share x log idf over clusters)
    counts how often the answer is met elsewhere, not only whether, and stays meaningful with
    k = 2. An answer that two or more members give comes before one of a single member (that
    describes one text, not a group), then by the score, the count, and central members first.

    No two clusters share a name: the cluster where an answer is most distinctive keeps it and
    the other takes its next answer, whose smaller "(n of m answers)" shows that it is a weaker
    name (two clusters both "positive" said nothing of the difference). Only a cluster with no
    other answer repeats a name, and the note says which.

    A cluster's most common answer goes first when it is not the name, holds at least twice as
    many answers as the name, and half the cluster's answers (``MAJORITY``), or a third of them
    (``COMMON_ANSWER_SHARE``) and a larger share than of all the answers: "anger / love (20 of
    23 answers)", the count of both. Named "love (5 of 23 answers)" alone, a cluster of 15
    "anger" answers read as a cluster about love; yet an answer that is half of all the answers
    went before most names ("anger / surprise" for 25 "anger" answers of 66), telling no
    cluster from another. Both are shown whole, "card / card withdrawal" too: a shortened
    "card (withdrawal)" (tried in the seventh session of 2026-11-30) read as the whole
    cluster's answer where one member of 12 gave it, and put negations and numbers in the
    brackets ("happy (not)").

    Args:
        members: each cluster's members, central first (ties go to the more central).
        answers: the explainer's answer per text; None names clusters by their keywords.
        keywords: each cluster's keywords (a name of keywords is the first three).
        explainer_embedded: the explainer was the embedder too (the note does not suggest it).
    """
    keyword_names = {c: (" / ".join(keywords[c][:NAME_KEYWORDS]) or "(no keywords)", None)
                     for c in members}
    if answers is None:
        return dict(keyword_names), None
    worded: dict[str, Counter[str]] = {}  # each answer key's wordings, central first
    said: dict[int, list[str]] = {}
    for c, ids in members.items():
        said[c] = []
        for answer in (answers[i].strip().lower() for i in ids):
            if answer:
                key = _answer_key(answer)
                worded.setdefault(key, Counter())[answer] += 1
                said[c].append(key)
    shown = {key: _shown_wording(forms) for key, forms in worded.items()}
    counts = {c: Counter(said[c]) for c in members}  # in central-first order: ties keep it
    overall = Counter(a for c in members for a in said[c])
    answered = sum(overall.values())
    ranked: dict[int, list[tuple[tuple[bool, float, int, int], str]]] = {}
    for c, got in counts.items():
        size = sum(got.values())
        ranked[c] = sorted(((n >= 2, n / size - overall[a] / answered, n, -order), a)
                           for order, (a, n) in enumerate(got.items()))
        ranked[c].reverse()  # best first (each key is distinct: its order among the answers)
    names: dict[int, tuple[str, int | None]] = {
        c: keyword_names[c] for c in members if not counts[c]}  # no answers: keywords
    taken: set[str] = set()
    while len(names) < len(members):
        # Of the clusters not yet named, the one whose best free answer ranks highest takes it
        # (a cluster with none left goes last).
        free = {c: next(((key, a) for key, a in ranked[c] if a not in taken), None)
                for c in members if c not in names}
        c = max(free, key=lambda d: (free[d] is not None, free[d] or ()))
        # Every answer of the cluster names another one: its best, said in the note.
        answer = (free[c] or ranked[c][0])[1]
        taken.add(answer)
        common, n = counts[c].most_common(1)[0]
        share = n / sum(counts[c].values())
        if common != answer and n >= 2 * counts[c][answer] and (
                share >= MAJORITY or (share >= COMMON_ANSWER_SHARE
                                      and share > overall[common] / answered)):
            names[c] = (f"{shown[common]} / {shown[answer]}", n + counts[c][answer])
        else:
            names[c] = (shown[answer], counts[c][answer])
    holders: dict[str, list[int]] = {}
    for c in sorted(names):
        if names[c][1] is not None:
            holders.setdefault(names[c][0], []).append(c)
    repeated = [f"clusters {', '.join(map(str, ids[:-1]))} and {ids[-1]} are all named {name!r}: "
                "no other answer of theirs tells them apart"
                for name, ids in holders.items() if len(ids) > 1]
    return names, _naming_note(counts, overall, names, repeated, explainer_embedded)


def _naming_note(counts: Mapping[int, Counter[str]], overall: Counter[str],
                 names: Mapping[int, tuple[str, int | None]], repeated: list[str],
                 explainer_embedded: bool) -> str | None:
    """What the names cannot say, for the response's note: the answers do not follow the
    clusters, the names are the answers of few texts, or two clusters share a name.

    Whether the answers follow the clusters is read from the pairs of texts that got the same
    answer: how often such a pair falls in one cluster, against how often a pair of texts
    does by chance with clusters of these sizes (chance-corrected: 0 as chance, 1 always).
    Sentiment answers on clusters of topics were together less often than chance: each name
    was one sentiment of a cluster holding all three.
    """
    parts = list(repeated)
    answered = sum(overall.values())
    if not answered:
        return "; ".join(parts) or None
    sizes = [sum(got.values()) for got in counts.values()]
    together = sum(n * (n - 1) // 2 for got in counts.values() for n in got.values())
    pairs = sum(n * (n - 1) // 2 for n in overall.values())
    chance = sum(s * (s - 1) for s in sizes) / (answered * (answered - 1)) if answered > 1 else 1.0
    named = sum(n for n in (count for _, count in names.values()) if n)
    try_next = ("read each text's own answer (`answers` in the JSON result, the `answer` column "
                "of the UI's CSV), or try another k"
                + (" or another embedder" if explainer_embedded else ", or the explainer as the embedder too"))
    if pairs >= MIN_ANSWER_PAIRS and chance < 1 and (
            (together / pairs - chance) / (1 - chance) < MIN_ANSWER_AGREEMENT):
        parts.append(f"the explainer's answers do not follow the clusters: texts with the same "
                     f"answer are in the same cluster {together / pairs:.0%} of the time, "
                     f"against {chance:.0%} by chance, so a name says little about its cluster; "
                     f"{try_next}")
    elif named / answered < MIN_NAMED_SHARE:
        parts.append(f"the cluster names are the answers of only {named} of the {answered} texts "
                     f"(the others answered otherwise): each describes a few members, not the "
                     f"cluster; {try_next}")
    return "; ".join(parts) or None


# Unknown-token counts kept for reused clusterings (a few ints each; RecentVectors holds far fewer).
_UNREAD_KEPT = 1024


class ClusterService:
    """Cluster texts under an instruction and explain the clusters."""

    def __init__(self, ctx: ServiceContext, search: SearchService | None = None) -> None:
        self.ctx = ctx
        self.search_service = search or SearchService(ctx)
        # The embeddings of recent clusterings: another k of the same texts reuses them.
        self.embeddings = RecentVectors(EMBEDDING_CACHE_BYTES)
        # How many of those texts the embedder's tokenizer reads as mostly [UNK], by the same
        # keys (counting re-tokenises the texts: 3.7 s for 5,000 chunks on one thread, more than
        # a reused clustering takes); the oldest dropped past _UNREAD_KEPT.
        # The texts it cuts are counted with them (``_TokenCounts``).
        self._unread: OrderedDict[Hashable, _TokenCounts] = OrderedDict()

    def _token_counts(self, key: Hashable | None, spec: str, texts: list[str], instruction: str,
                      reused: bool) -> _TokenCounts:
        """How many of ``texts`` the loaded ``spec`` reads as mostly unknown tokens, and how
        many it cuts under ``instruction`` (none where the model encodes on the workers: not
        loaded here); kept by ``key`` for a reuse."""
        if reused and key is not None and key in self._unread:
            self._unread.move_to_end(key)
            return self._unread[key]
        model = self.ctx.embedders.peek(spec)
        counts = _TokenCounts()
        if model is not None:
            cut, budget = _cut_texts(model, texts, instruction)
            counts = _TokenCounts(unread_count(model, texts), cut, budget,
                                  max_length_spec(model, spec) if cut else None)
        if key is not None:
            self._unread[key] = counts
            while len(self._unread) > _UNREAD_KEPT:
                self._unread.popitem(last=False)
        return counts

    def _embedding_key(self, spec: str, instruction: str, digest: str,
                       step: int | None) -> Hashable | None:
        """What the embeddings of a clustering depend on: the embedder (``local_model_key``),
        the instruction, the texts in order (``digest``) and the pieces they were encoded in
        (``step``: reused, the vectors are exactly those the same request would get). None
        where the model is not loaded in this process: nothing is reused then."""
        model = local_model_key(self.ctx.encoder, spec)
        # The instruction as a digest: held whole, a key of a 190 KB instruction weighed 40 times
        # its 9 texts' vectors, and the cache bounds the vectors' bytes alone (the leak review
        # of the seventh session of 2026-12-06: 337 KB more a request, without bound).
        return None if model is None else (*model, Role.DOCUMENT.value, texts_digest([instruction]),
                                           step, digest)

    def validate(self, request: ClusterRequest) -> None:
        """Check a request without running it (the API and the workers refuse one early so).

        Raises:
            InvalidRequestError: no instruction, not exactly one source, filters or a limit
                without a collection, bad k/max_k/keywords/members/answer_tokens/limit/seed; an
                explainer known not to answer.
            UnknownModelError: an embedder or explainer name that loads nothing (when encoding here).
        """
        self._validate_fields(request)
        self._validate_names(request)

    def _validate_fields(self, request: ClusterRequest) -> None:
        """``validate`` less the explainer's name: what needs no model registry (nor torch)."""
        for name, value in (("k", request.k), ("max_k", request.max_k), ("keywords", request.keywords),
                            ("members", request.members), ("answer_tokens", request.answer_tokens),
                            ("limit", request.limit), ("seed", request.seed)):
            optional = name in ("k", "answer_tokens", "limit")
            if (value is not None or not optional) and (isinstance(value, bool)
                                                        or not isinstance(value, numbers.Integral)):
                raise InvalidRequestError(f"{name} must be a whole number, got {value!r}", param=name)
        # Of the wrong type, said so: an instruction of 5 was "empty", texts=5 and a search
        # that is not a SearchRequest failed deep inside with a TypeError, an AttributeError.
        check_str(request.instruction, "instruction")
        for name in ("embedder", "explainer"):
            check_str(getattr(request, name), name, optional=True)
        if request.texts is not None and not isinstance(request.texts, Iterable):
            raise InvalidRequestError(f"texts must be a list of str, got {type(request.texts).__name__} "
                                      f"{request.texts!r:.60}", param="texts")
        if request.search is not None and not isinstance(request.search, SearchRequest):
            raise InvalidRequestError(f"search must be a SearchRequest (SearchRequest(query, "
                                      f"collection)), got {type(request.search).__name__} "
                                      f"{request.search!r:.60}", param="search")
        if blank_text(request.instruction):  # (invisible characters alone too: no instruction)
            raise InvalidRequestError("the instruction must not be empty: it is what the texts are "
                                      "grouped by (e.g. 'What does the customer want?')",
                                      param="instruction")
        # (A surrogate was refused by the encoder, after the texts were read, with a null param.)
        check_text_encodable(request.instruction, "the instruction", param="instruction")
        given = [name for name, value in (("texts", request.texts),
                                          ("collection", request.collection),
                                          ("search", request.search)) if value is not None]
        if len(given) != 1:
            raise InvalidRequestError(
                "give exactly one source of texts: texts, collection (with optional filters) or "
                f"search; got {', '.join(given) or 'none'}")
        if request.collection is None and (request.filters or request.limit is not None):
            # They were ignored: every text (or search result) was clustered.
            given = [n for n, v in (("filters", request.filters), ("limit", request.limit is not None)) if v]
            # The search's own count, named as no edge's field (top_k in process, k over HTTP,
            # --top-k on the command line): "top_k" was advice an HTTP client could not follow.
            where = ("put them in the search request (its filters, and its number of results "
                     "for how many)" if request.search is not None else "send only the texts to cluster")
            verb = "applies" if given == ["limit"] else "apply"
            # (No param: the option and the source conflict, and which to change is the
            # caller's choice, tests/app/api/test_api_error_params.py.)
            raise InvalidRequestError(f"{' and '.join(given)} {verb} to a collection's texts; {where}")
        if request.k is not None and request.k < 2:
            raise InvalidRequestError(f"k must be at least 2 (or None to choose it by silhouette), "
                                      f"got {request.k}", param="k")
        if not 2 <= request.max_k <= MAX_K:
            raise InvalidRequestError(f"max_k must be from 2 to {MAX_K}, got {request.max_k}",
                                      param="max_k")
        if request.collection is not None:
            check_filters(request.filters)
        if isinstance(request.seed, bool) or not 0 <= request.seed <= MAX_SEED:
            raise InvalidRequestError(f"seed must be from 0 to {MAX_SEED}, got {request.seed}",
                                      param="seed")
        for name, value in (("keywords", request.keywords), ("members", request.members)):
            if value < 1:
                raise InvalidRequestError(f"{name} must be at least 1, got {value}", param=name)
        if request.answer_tokens is not None and request.answer_tokens < 1:
            raise InvalidRequestError(f"answer_tokens must be at least 1, got {request.answer_tokens}",
                                      param="answer_tokens")
        if request.limit is not None and request.limit < 2:
            raise InvalidRequestError(f"limit must be at least 2, got {request.limit}", param="limit")

    def _validate_names(self, request: ClusterRequest) -> None:
        """``validate``'s check of the model names, the embedder's then the explainer's, read
        without loading any model: the registry it asks imports torch (4 s on 2 cores). An
        unknown embedder was refused only when it loaded, after the explainer had loaded (`facet
        cluster -e nosuch`: 13.9 s, "loading the explainer inbedder" first). With
        ``encode_on_workers`` the workers' registry decides the names."""
        if request.embedder and not self.ctx.settings.encode_on_workers:
            self._check_name(request.embedder, "embedder")
        if request.explainer:
            # Known from the name, before any text is encoded (it was refused after, 17 s in).
            if not self.ctx.settings.encode_on_workers:
                self._check_name(request.explainer, "explainer")
            from embedders.registry import answers_questions

            if answers_questions(request.explainer) is False:
                error = not_an_explainer(request.explainer)
                error.param = "explainer"
                raise error

    @staticmethod
    def _check_name(name: str, param: str) -> None:
        """The registry's check of a model ``name`` given as ``param`` (embedder, explainer),
        as a domain error naming it: an explainer's typo reads "unknown explainer 'nosuch'"
        (the registry's "unknown embedder" sent the user to the embedder)."""
        from embedders.errors import EmbedderError
        from embedders.registry import check_embedder

        try:
            check_embedder(name)
        except EmbedderError as e:
            domain = as_domain_error(e)
            if domain is None:
                raise
            domain.param = param
            message = str(domain)
            if (param == "explainer" and isinstance(domain, UnknownModelError)
                    and message.startswith(_UNKNOWN_EMBEDDER)):
                domain = UnknownModelError("unknown explainer "
                                           + _explainers_named(message)[len(_UNKNOWN_EMBEDDER):],
                                           param="explainer")
            raise domain from e

    def _encode_in_pieces(self, texts: Sequence[str], spec: str, instruction: str, step: int | None,
                          share: float, report: Any) -> np.ndarray:
        """``texts``' vectors, encoded longest first in pieces of the encoder's batch
        (``longest_first``: the batches of one call, so its vectors), told before each, as
        indexing tells its pieces; a Ctrl-C in the CLI stops between (or inside) them. In this
        process's own thread (the CLI), the texts the embedder cut are said in one line at the
        end (``truncation_tally``), not one per piece."""
        assert step is not None
        done = 0
        out: np.ndarray | None = None
        with self._said_once():
            for piece in longest_first(texts, step):
                report(share * done / len(texts), f"encoding {done}/{len(texts)} texts")
                rows = self.ctx.encoder.encode([texts[i] for i in piece], embedder=spec,
                                               role=Role.DOCUMENT, instruction=instruction, bulk=True)
                if out is None:
                    out = np.empty((len(texts), rows.shape[1]), dtype=rows.dtype)
                out[piece] = rows
                done += len(piece)
        assert out is not None  # (at least 2 texts)
        return out  # (n, dim)

    def _said_once(self) -> contextlib.AbstractContextManager[Any]:
        """Where the encoder runs in this process's own thread (the CLI): the texts a stage's
        calls cut said in one line at its end (``truncation_tally``), not one per call; the
        answering stage's 5,000 texts logged one line per batch of 32 (156 lines). Elsewhere
        nothing: the server's model thread says them at most once a minute."""
        from app.encoding import InlineQueryEncoder

        if isinstance(self.ctx.encoder, InlineQueryEncoder):  # (its model loads here: torch too)
            from embedders.base import truncation_tally

            return truncation_tally()
        return contextlib.nullcontext()

    def _encode_step(self) -> int:
        """Texts per progress step of encoding: the encoder's batch size (one forward pass), at
        most ``PROGRESS_STEP_TEXTS``, which an encoder without one (the workers') gets."""
        size = getattr(self.ctx.encoder, "batch_size", None)
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            return min(size, PROGRESS_STEP_TEXTS)
        return PROGRESS_STEP_TEXTS

    def _check_explainer(self, request: ClusterRequest, texts: Sequence[str], instruction: str,
                         report: ClusterProgress, timings: dict[str, float]) -> None:
        """Before any text is encoded, refuse an explainer that cannot answer
        (``not_an_explainer``) or an instruction it cannot fit (over its limit, which may be
        lower than the embedder's: InBedder's 43 tokens against minilm's 127). Where it answers
        in this process, it is loaded now (its answers use the same copy), timed in
        ``load_model``, and checked as its answers would check it (``check_explainer``): the
        registered ``inbedder`` was known by name to answer, so an instruction too long for it
        was refused after the encoding and k-means (3 min 10 s for 2,000 texts). Where it
        answers elsewhere (on a worker) and its name does not tell whether it answers (a plugin
        that did not say; ``validate`` refused those known not to), it is asked for one token
        about the shortest text, which loads it there and refuses the same. It was refused
        after the encoding and k-means had run."""
        from embedders.registry import answers_questions

        if not request.explainer:
            return
        if getattr(self.ctx.encoder, "embedders", None) is self.ctx.embedders:
            t0 = time.perf_counter()
            loading = self.ctx.embedders.peek(request.explainer) is None
            if loading:
                report(0.0, f"loading the explainer {request.explainer}")
            check_explainer(self.ctx.embedders, request.explainer, instruction,
                            self.embedder_spec(request))
            if loading:
                timings["load_model"] = timings.get("load_model", 0.0) + (time.perf_counter() - t0) * 1000
            return
        if answers_questions(request.explainer) is not None:
            return
        report(0.0, f"loading the explainer {request.explainer}")
        self.ctx.encoder.generate_answers([min(texts, key=len)], explainer=request.explainer,
                                          instruction=instruction, max_new_tokens=1)

    def cluster(self, request: ClusterRequest,
                progress: ClusterProgress | None = None) -> ClusterResponse:
        """Cluster and explain.

        Args:
            request: what to cluster and how.
            progress: told how far the work is after each step (texts are then encoded in
                pieces of the encoder's batch, ``_encode_step``, longest first: the vectors
                the same within the embedders' batch-invariance tolerance, and answered in
                pieces of ``ANSWER_STEP_TEXTS``, the same answers).

        Raises:
            InvalidRequestError: see ``validate``; fewer than 2 texts or more clusters than texts;
                an explainer that cannot answer.
            TooLargeError: more texts than ``FACET_MAX_CLUSTER_TEXTS``.
            NotFoundError: unknown collection (or search collection).
            StoreBusyError: a collection another process holds (``refuse_if_busy``).

        A ``collection`` source is looked at before the models' names: an unknown or busy
        collection is refused before the registry imports torch (``facet cluster --collection``,
        whose ``--explain`` is inbedder by default, said a busy one after 8.5 s), so a request
        with both a bad explainer and a bad collection is refused for the collection. Other
        sources have the names checked first, as ``validate`` does. Every name (the embedder's,
        then the explainer's) is checked before any model loads.
        """
        self._validate_fields(request)
        if request.collection is not None:
            self._check_collection(request.collection)
        self._validate_names(request)
        report = progress or (lambda fraction, stage: None)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        report(0.0, "collecting the texts")
        spec = self.embedder_spec(request)
        texts, sources, cut, points = self._texts(request, spec)
        timings["texts"] = (time.perf_counter() - t0) * 1000
        cap = self.ctx.settings.max_cluster_texts
        if len(texts) > cap:
            raise TooLargeError(f"{len(texts)} texts to cluster, more than the limit of {cap} "
                                "(FACET_MAX_CLUSTER_TEXTS); send fewer or raise the limit",
                                param="texts" if request.texts is not None else None)
        if len(texts) < 2:
            hint = (self._filter_hint(request.collection, request.filters)
                    if request.collection is not None and request.filters else None)
            why = (" (check the filters: they matched "
                   f"{plural(len(texts), 'chunk')} of collection {request.collection!r}"
                   f"{f'; {hint}' if hint else ''})"
                   if request.collection is not None and request.filters else
                   f" (the search found {plural(len(texts), 'result')}"
                   f"{'; check its filters' if request.search.filters else ''})"
                   if request.search is not None else "")
            param = ("texts" if request.texts is not None else
                     "filters" if request.collection is not None and request.filters else None)
            if request.collection is not None and not request.filters:
                # A collection a job is writing now, or holding no indexed document: said, as a
                # search says it, on every edge (only the API said the second, and none the
                # first: the UI's Cluster tab said "got 0" while its Index tab's job ran).
                said = (self.search_service.being_indexed_note(request.collection, "a clustering reads")
                        or self.search_service.nothing_searchable_note(request.collection))
                if said is not None:
                    why = ": " + said.replace("the collection", f"collection {request.collection!r}", 1)
                    param = "collection"
            # Given texts: that field; a collection's or a search's: their filters, their k...
            raise InvalidRequestError(f"clustering needs at least 2 texts, got {len(texts)}{why}",
                                      param=param)
        if request.k is not None and request.k > len(texts):
            # Each edge adds its own way of leaving k unset (the CLI's `--k 0` reached the page).
            raise InvalidRequestError(
                f"k={request.k} is more than the {plural(len(texts), 'text')} to cluster; "
                f"ask for at most {len(texts)}, {K_BY_SILHOUETTE}", param="k")
        instruction = request.instruction.strip()
        self._check_explainer(request, texts, instruction, report, timings)

        if getattr(self.ctx.encoder, "embedders", None) is self.ctx.embedders and \
                self.ctx.embedders.peek(spec) is None:
            # Loaded here, timed as its own stage: "encode 5.8s" for 8 texts was nearly all the
            # model's load (as index and search report it apart).
            t0 = time.perf_counter()
            report(0.0, f"loading {spec}")
            self.ctx.embedders.get(spec)
            timings["load_model"] = timings.get("load_model", 0.0) + (time.perf_counter() - t0) * 1000

        # Shares of the bar by the stages' expected cost (``stage_shares``): answering, where
        # asked, most of it (it filled 45-90% while taking 94% of the time).
        encode_share, answer_share = stage_shares(spec, request.explainer)
        t0 = time.perf_counter()
        digest = texts_digest(texts)
        step = None if progress is None else self._encode_step()
        key = self._embedding_key(spec, instruction, digest, step)
        cached = self.embeddings.get(key) if key is not None else None
        stored = None if cached is not None else self._from_stored(
            points, texts, spec, instruction, progress is not None,
            lambda done: report(encode_share * done / len(texts), f"encoding {done}/{len(texts)} texts"))
        if cached is not None:
            vectors = cached  # ``encode`` near 0, said by ``encode_reused``
        elif stored is not None:
            vectors = stored  # the instructed half alone encoded, said by ``stored_vectors_used``
        elif progress is None:
            vectors = self.ctx.encoder.encode(texts, embedder=spec, role=Role.DOCUMENT,
                                              instruction=instruction, bulk=True)
        else:
            vectors = self._encode_in_pieces(texts, spec, instruction, step, encode_share, report)
        if cached is None:
            # (The model is loaded now: its key can be told where it could not before.)
            key = key or self._embedding_key(spec, instruction, digest, step)
            if key is not None:
                self.embeddings.put(key, vectors)
        vectors = same_text_same_vector(texts, vectors)
        counts = self._token_counts(key, spec, texts, instruction, cached is not None)
        unread = counts.unread
        timings["encode"] = (time.perf_counter() - t0) * 1000
        report(encode_share, "k-means")

        # scikit-learn's first import in a process (1-5 s here; a server imports it at start-up,
        # ``warm_up_clustering``) was timed as k-means: 3 texts said "kmeans 3.3s".
        t0 = time.perf_counter()
        for module in CLUSTERING_MODULES:
            importlib.import_module(module)
        imported_ms = (time.perf_counter() - t0) * 1000
        if imported_ms >= 50:
            timings["imports"] = imported_ms
        t0 = time.perf_counter()
        silhouette: float | None = None
        max_k_tried: int | None = None
        distinct = distinct_rows(vectors)
        # The largest k a silhouette can score for these texts (2 clusters and a text more).
        possible = min(distinct, len(texts) - 1)
        if request.k is not None:
            k = min(request.k, distinct)
        elif possible > 2:
            k, silhouette = choose_k(vectors, request.max_k, request.seed)
            max_k_tried = min(request.max_k, possible)  # choose_k's range
        else:
            # Nothing to choose between: no k a silhouette can score, or only k = 2 (three
            # lines, two of them alike, read "k = 2 chosen by silhouette (0.667), the best of
            # k = 2 to 2").
            k = min(distinct, 2)
        label_list = [int(x) for x in _kmeans(vectors, k, request.seed)]
        found = len(set(label_list))
        note: str | None = None
        if request.k is not None and found < request.k:
            why = (_few_distinct(texts, distinct, counts.cut, spec) if distinct < request.k
                   else "k-means left some empty")
            note = f"{plural(found, 'cluster')} instead of the {request.k} asked for: {why}"
        elif request.k is None and silhouette is None:
            reason = (_few_distinct(texts, distinct, counts.cut, spec) if distinct < len(texts)
                      else f"only {len(texts)} texts")
            only = ", so 2 is the only k possible" if possible == 2 and found == 2 else ""
            note = f"k = {found}, not chosen by silhouette: {reason}{only}"
        if silhouette is not None:
            from embedders.registry import instruction_use  # (the model is loaded: torch is too)

            follows = instruction_use(spec) == "trained"
            for said in (_lopsided(label_list, found), _weak(silhouette, spec, follows)):
                if said:
                    note = f"{note}; {said}" if note else said
        if cut is not None:  # a collection cut to the cap or the limit: said, with numbers
            note = f"{cut}; {note}" if note else cut
        if counts.cut:  # what follows the cut is in no embedding: said, with what helps
            cut_note = _cut_note(counts.cut, len(texts), spec, counts.budget, counts.option)
            note = f"{note}; {cut_note}" if note else cut_note
        if unread:  # Thai or emoji to minilm: they embed nearly alike and cluster together
            warning = (f"{unread:,} of {len(texts):,} texts {UNREAD_MARK} {spec} {UNREAD_WHY}, so "
                       "they embed nearly alike and cluster together whatever they say; cluster "
                       "with an embedder whose tokenizer reads them (e.g. causal2vec)")
            note = f"{note}; {warning}" if note else warning
        # A search says it too: the instruction grouped nothing (the registry: imported already).
        if not reads_instruction(spec):
            unread_instruction = (f"the instruction was not read: {spec} reads no instruction, so "
                                  "the texts are grouped as they read bare")
            note = f"{note}; {unread_instruction}" if note else unread_instruction
        elif not read_as_none(loaded_model(self.ctx.encoder, spec), instruction) and \
                (weak := weak_instruction_note([spec])):
            # minilm's 0.25 blend: emotion val grouped by emotion at V 9-11 against InstEmb's 22-23
            note = f"{note}; {weak}" if note else weak
        timings["kmeans"] = (time.perf_counter() - t0) * 1000

        answers: list[str] | None = None
        if request.explainer:
            t0 = time.perf_counter()
            # The texts the explainer cut, said in one line for the stage (``_said_once``).
            with self._said_once():
                if progress is None:
                    answers = self.ctx.encoder.generate_answers(texts, explainer=request.explainer,
                                                                instruction=instruction,
                                                                max_new_tokens=request.answer_tokens)
                else:
                    # One decoding batch at a time, longest first as the explainer takes one call's
                    # texts (the same answers): a step of 128 texts showed "answering 0/N" for the
                    # whole of the answers of up to 128 texts (a minute on a CPU), then N/N.
                    answers = [""] * len(texts)
                    done = 0
                    for piece in longest_first(texts, ANSWER_STEP_TEXTS):
                        report(encode_share + answer_share * done / len(texts),
                               f"{request.explainer} answering {done}/{len(texts)} texts")
                        got = self.ctx.encoder.generate_answers(
                            [texts[i] for i in piece], explainer=request.explainer,
                            instruction=instruction, max_new_tokens=request.answer_tokens)
                        for i, answer in zip(piece, got, strict=True):
                            answers[i] = answer
                        done += len(piece)
                    report(encode_share + answer_share,
                           f"{request.explainer} answering {done}/{len(texts)} texts")
            timings["answers"] = (time.perf_counter() - t0) * 1000
            if scripts := _other_script_note(texts, request.explainer):
                note = f"{note}; {scripts}" if note else scripts

        report(0.95, "naming the clusters and drawing the map")
        t0 = time.perf_counter()
        # At least the three a name of keywords is made of, whatever ``keywords`` shows: with
        # --keywords 1 the CLI named clusters "bill", the page "bill / pay / electric".
        explained = explain_clusters(texts, label_list, answers if answers is not None else texts,
                                     embeddings=vectors, top_k=max(request.keywords, NAME_KEYWORDS),
                                     members=request.members)
        xy = map_coordinates(vectors)
        explained = sorted(explained, key=lambda e: (-e.size, e.cluster))
        central_first = {c.cluster: c.representative_indices
                         + [i for i, label in enumerate(label_list)
                            if label == c.cluster and i not in c.representative_indices]
                         for c in explained}
        model_name = self.ctx.embedders.name_of(spec)
        names, naming_note = _name_clusters(
            central_first, answers, {c.cluster: c.keywords for c in explained},
            explainer_embedded=bool(request.explainer) and model_name in (
                request.explainer, self.ctx.embedders.name_of(request.explainer or "")))
        # A name of keywords says how many members hold one of its words, read as the
        # keywords were (from the answers where there are any, else the texts).
        terms = (answer_terms(answers if answers is not None else texts)
                 if any(count is None for _, count in names.values()) else [])
        if naming_note:  # what the names cannot say, where the edges show the note
            note = f"{note}; {naming_note}" if note else naming_note
        clusters = []
        for c in explained:
            center = xy[central_first[c.cluster]].mean(axis=0)
            name, name_count = names[c.cluster]
            shown = _distinct_representatives(c.representative_indices, label_list, c.cluster, texts,
                                              vectors, request.members)
            clusters.append(Cluster(
                id=c.cluster, size=c.size, name=name, name_count=name_count,
                name_texts=None if name_count is not None else _keyword_name_texts(
                    c.keywords[:NAME_KEYWORDS], central_first[c.cluster], terms),
                keywords=c.keywords[:request.keywords], representatives=[texts[i] for i in shown],
                representative_indices=shown,
                center=(round(float(center[0]), 5), round(float(center[1]), 5))))
        timings["explain"] = (time.perf_counter() - t0) * 1000
        report(1.0, "done")
        return ClusterResponse(
            instruction=instruction, embedder=model_name, explainer=request.explainer, k=found,
            k_chosen=silhouette is not None, silhouette=silhouette, texts=texts, labels=label_list,
            coordinates=[(round(float(x), 5), round(float(y), 5)) for x, y in xy],
            sources=sources, answers=answers, clusters=clusters, timings_ms=timings, note=note,
            encode_reused=cached is not None, stored_vectors_used=stored is not None,
            embedder_spec=spec, max_k_tried=max_k_tried)

    def _texts(self, request: ClusterRequest, spec: str,
               ) -> tuple[list[str], list[dict[str, Any]], str | None, _Chunks | None]:
        """The texts, their sources, what says that a collection was cut (None: all of its
        chunks that the filters match are here), and the collection and point ids of the texts
        where they are a collection's chunks (None: texts given). A collection's chunks are read
        with their vectors of the embedder ``spec`` where ``_from_stored`` may use them
        (``_stored_vector``)."""
        if request.texts is not None:
            if isinstance(request.texts, str):
                raise InvalidRequestError("texts must be a list of strings, not one string",
                                          param="texts")
            texts = list(request.texts)
            check_texts(texts)
            return texts, [{"index": i} for i in range(len(texts))], None, None
        if request.search is not None:
            try:
                response = self.search_service.search(request.search)
            except FacetError as e:
                if e.param is not None:  # a field of the search, which the request nests
                    e.param = f"search.{e.param}"
                raise
            if len(response.results) < 2 and request.search.filters and response.note:
                # What the search says of its filters (a key no document holds, a number
                # written as a string), which the error below would drop.
                found = len(response.results)
                raise InvalidRequestError(
                    f"clustering needs at least 2 texts, got {found} (the search found "
                    f"{plural(found, 'result')}; check its filters: {response.note})",
                    param="search.filters")
            return ([r.text for r in response.results],
                    [{"doc_id": r.doc_id, "chunk_no": r.chunk_no, "title": r.title,
                      "score": r.score} for r in response.results], None,
                    _Chunks(response.collection, [point_id(r.doc_id, r.chunk_no) for r in response.results]))
        assert request.collection is not None
        name = request.collection  # known and free: ``cluster`` checked (``_check_collection``)
        cap = self.ctx.settings.max_cluster_texts
        limit = min(request.limit or cap, cap)
        filters = payload_filters(request.filters)
        vector = self._stored_vector(spec)
        try:
            read = self.ctx.store.scroll_with_vectors(name, vector, limit=limit, filters=filters) if vector else None
            hits = [hit for hit, _ in read] if read is not None else self.ctx.store.scroll(
                name, limit=limit, filters=filters)
            # Only a full scroll may have been cut: the store counts the rest (no scroll of it).
            total = self.ctx.store.count(name, filters) if len(hits) >= limit else len(hits)
        except (StoreBusyError, StoreUnavailableError):
            raise  # the facade names the writer / the server to start
        except StoreDamagedError as e:  # its files cannot be read: a data error
            raise DataError(str(e)) from e
        except StoreError as e:  # a filter it cannot match, named as the user typed its key
            raise InvalidRequestError(user_filter_words(str(e), request.filters),
                                      param=e.param) from e
        cut = None
        if total > len(hits):
            matching = " matching the filters" if request.filters else ""
            if request.limit is not None and request.limit <= cap:
                why = f"limit {request.limit:,}"
            elif request.limit is not None and request.limit > cap:
                why = f"FACET_MAX_CLUSTER_TEXTS caps it; the limit of {request.limit:,} asked for more"
            else:
                why = "FACET_MAX_CLUSTER_TEXTS caps it"
            # "the first" read as the documents' order: storage order is by point id, which
            # spreads across the collection (not a random sample either).
            cut = f"clustered {len(hits):,} of {total:,} chunks{matching}, in storage order ({why})"
        return ([str(h.payload.get("text", "")) for h in hits],
                [{"doc_id": h.payload.get("doc_id"), "chunk_no": h.payload.get("chunk_no"),
                  "title": h.payload.get("title")} for h in hits], cut,
                _Chunks(name, [h.id for h in hits], vector, read))

    def _filter_hint(self, collection: str, filters: Mapping[str, Any]) -> str | None:
        """Why ``filters`` matched (almost) nothing in ``collection``, as a search that found
        nothing says it (``SearchService.filter_notes``). A clustering said only "check the
        filters"."""
        return "; ".join(self.search_service.filter_notes(collection, filters)) or None

    def embedder_spec(self, request: ClusterRequest) -> str:
        """What encodes the texts: the embedder ``request`` names, else, clustering a
        collection (or a search's results naming no embedder), the embedder a search of it
        naming none uses (``default_vector``: the one ``FACET_DEFAULT_EMBEDDER`` names, read as
        indexing reads it, ``named_default``; else its first; a complete one over a half-filled
        default), as the collection recorded loading it; else ``FACET_DEFAULT_EMBEDDER``. A
        collection indexed with a checkpoint, or whose default was not the settings' name, was
        clustered with the settings' embedder (its stored vectors unused) while its searches
        ran its own."""
        if request.embedder:
            return request.embedder
        default = self.ctx.settings.default_embedder
        name = request.collection if request.collection is not None else (
            request.search.collection if request.search is not None
            and not request.search.embedder else None)
        if not isinstance(name, str):
            return default
        try:
            with self.ctx.sessions() as session:
                coll = md.get_collection(session, name)
                if coll is None or not coll.embedders:
                    return default
                pairs = [(e.name, e.spec) for e in coll.embedders]
                indexed = md.count_documents(session, coll.id, "indexed")
                missing = md.vectors_missing(session, coll.id, [n for n, _ in pairs], indexed)
        except SQLAlchemyError:  # the collection's own read says what is wrong
            return default
        vector, _ = default_vector(default, pairs, missing)
        return next((spec for n, spec in pairs if n == vector), default)

    def _check_collection(self, name: str) -> None:
        """Refuse an unknown collection, or one another process holds, before anything imports
        torch: ``_stored_vector``'s and the explainer check's registry import it (4 s on 2
        cores), and the scroll met the lock only after.

        Raises:
            NotFoundError: an unknown collection (naming the known ones), or one with nothing
                written yet.
            ConflictError: one indexed into another vector store than the one in use.
            StoreBusyError, StoreUnavailableError: see ``refuse_if_busy``.
        """
        try:  # said by the store's collection_exists too, as a lower error naming no field
            validate_name(name)
        except StoreError as e:
            raise InvalidRequestError(str(e), param="collection") from e
        if not self.ctx.store.collection_exists(name):
            self.search_service.vector_names(name)  # says why as a search does: the known ones
            raise NotFoundError(f"collection {name!r} has nothing to cluster yet",
                                param="collection")
        with self.ctx.sessions() as session:
            coll = md.get_collection(session, name)
            recorded = coll is not None
            # Indexed into another store (FACET_VECTOR_BACKEND or FACET_QDRANT_URL switched
            # since): this store's copy may be stale; refused as a search refuses it.
            other_store = coll is not None and coll.backend != self.ctx.store.backend
        if other_store:
            self.search_service.vector_names(name)
        if not recorded:
            # Vectors this database does not record (a stray: its own database lost, or the
            # data folder's facet.db's under FACET_DATABASE_URL): refused as a search refuses
            # them; their texts were clustered while search called the name unknown.
            self.search_service.vector_names(name)
            raise NotFoundError(f"unknown collection {name!r}", param="collection")
        refuse_if_busy(self.ctx.store, name)

    def _stored_vector(self, spec: str) -> str | None:
        """The vector name of the embedder ``spec``, where ``_from_stored`` may read the chunks'
        stored vectors (the encoder computes from them), so that the scroll reads them with the
        chunks (a 200-chunk minilm collection was scrolled, then the same points retrieved);
        None where only loading the model would name it, or it is not one to read them."""
        encoder = self.ctx.encoder
        if not callable(getattr(encoder, "encode_from_plain", None)) or \
                getattr(encoder, "embedders", None) is not self.ctx.embedders:
            return None
        model = self.ctx.embedders.peek(spec)
        if model is not None:
            name: str = model.name
            return name if isinstance(model, EncodesFromPlain) else None
        from embedders.errors import EmbedderError
        from embedders.registry import saved_name

        try:
            return saved_name(spec)
        except EmbedderError:  # loading it says what is wrong
            return None

    def _from_stored(self, points: _Chunks | None, texts: list[str], spec: str,
                     instruction: str, pieces: bool, told: Callable[[int], None],
                     ) -> np.ndarray | None:
        """The embeddings of ``texts``, chunks of a collection (``points``: its name and their
        point ids), computed from their stored vectors, else None (encode them). Clustering a
        minilm collection under an instruction encoded every chunk again, bare half included,
        although the collection holds that half: 97% of a clustering's time. The vectors come
        from the scroll that read the chunks where it read this embedder's (``points.read``),
        else are retrieved.

        Only where they are what encoding would give (to float rounding; ``stored_vectors``, as
        rerank reads them): the collection's vectors of the embedder's name were written by the
        same version of it from exactly these texts, read bare, and the embedder blends its bare
        vectors into its instructed ones (``EncodesFromPlain``: minilm, inbedder), so only the
        instructed half is encoded. Not where workers encode (their model may be another
        version than this process can check).

        As bulk work (``bulk=True``): in a server on the model thread, after waiting queries, in
        pieces of ``FROM_PLAIN_PIECE_TEXTS``, each a block on that thread; inline (the CLI), in
        the calling thread at torch's threads as bulk encoding runs, not at a query's
        ``FACET_QUERY_THREADS`` (1).
        With ``pieces`` (a progress bar), in pieces of ``_encode_step`` there, ``told``
        how many texts are done before each piece.
        """
        encoder = self.ctx.encoder
        from_plain = getattr(encoder, "encode_from_plain", None)
        if points is None or not callable(from_plain) or \
                getattr(encoder, "embedders", None) is not self.ctx.embedders:
            return None
        model = self.ctx.embedders.get(spec)  # loads it: it encodes the texts either way
        name, identity = model.name, self.ctx.embedders.identity(model)  # name: the vector it writes
        if not isinstance(model, EncodesFromPlain):
            return None
        collection, ids = points.collection, points.ids
        with self.ctx.sessions() as session:
            coll = md.get_collection(session, collection)
            recorded = next((e.identity for e in coll.embedders if e.name == name), "") if coll else ""
        plain = stored_vectors(self.ctx.store, collection, name, ids, texts, recorded=recorded, current=identity,
                               read=points.read if points.vector == name else None)
        if plain is None:
            return None
        inline = isinstance(encoder, InlineQueryEncoder)
        step = (self._encode_step() if pieces else len(texts)) if inline else FROM_PLAIN_PIECE_TEXTS
        parts = []
        for start in range(0, len(texts), step):
            told(start)
            rows, piece = plain[start:start + step], texts[start:start + step]
            parts.append(from_plain(rows, piece, embedder=spec, role=Role.DOCUMENT, instruction=instruction,
                                    bulk=True))
        return np.concatenate(parts, axis=0)


# -- what the edges read -----------------------------------------------------------------------


def k_option(k: int | None) -> int | None:
    """A request's ``k`` from a CLI option or a UI box, where 0 (or nothing) means "choose it
    by silhouette".

    Raises:
        InvalidRequestError: a negative k, or 1.
    """
    if not k:
        return None
    if k < 2:
        raise InvalidRequestError(f"k must be 0 (choose it by silhouette) or at least 2, got {k}",
                                  param="k")
    return k


def limit_option(limit: int | None) -> int | None:
    """How many texts to take, from a CLI option or a UI box where 0 (or nothing) means all.

    Raises:
        InvalidRequestError: a negative limit.
    """
    if limit is not None and limit < 0:
        raise InvalidRequestError(f"the limit must be 0 (all the texts) or a positive number of texts, got {limit}",
                                  param="limit")
    return limit or None



# How a text file's reader tells a user to name the column or field of texts (the UI's upload);
# the CLI names its --text-column instead.
CHOOSE_TEXT_COLUMN = "rename the one holding the texts to 'text'"

# Separators other than the comma that a one-column csv header holding one is refused for
# (``read_text_file``), as ``facet index`` warns of them (indexer.parsing), by name.
CSV_OTHER_SEPARATORS = {";": "semicolon", "\t": "tab", "|": "'|'"}


def read_text_file(path: Path, name: str | None = None, text_column: str | None = None,
                   choose: str = CHOOSE_TEXT_COLUMN, *, utf8_only: bool = False,
                   skipped: list[int] | None = None) -> list[str]:
    """Texts to cluster from a file: ``.json`` (a list of strings or of objects with a text
    field, or a GoalEx-style object with a ``texts`` list), ``.jsonl`` (a text field or a JSON
    string per line), ``.csv`` (the text column; the first row is the header), any other
    (``.txt``, ``.md``, no suffix) one text per line. A record's text field or a csv's text
    column is ``text_column`` where given, else the first of ``TEXT_FIELDS`` (text, contents,
    content, body: as ``facet index``) it has, in any case; a csv with one
    column only is that column, unless its name holds a semicolon, a tab or a '|' (a file
    separated by one, read as comma-separated: refused, unless that name is ``text_column``).
    A csv with two or more columns and none of those names is refused (its first column, an
    id, was clustered with only a log line).
    Blank texts are skipped (of a file of lines, each blank line's number, from 1, is added to
    ``skipped`` where given); a text that is not a string (``null``, a number) is an error.
    The file is decoded as `facet index` decodes plain text (``_read_text``: UTF-8, a UTF-16 or
    UTF-32 byte order mark, else a detected legacy charset, with a logged warning); with
    ``utf8_only`` (standard input, as `facet search -` reads a query) UTF-8 alone.

    Args:
        path: the file.
        name: how messages name the file (default its path; the UI gives the upload's name).
        text_column: the csv column or JSON field holding the texts.
        choose: how a message says to name the column of texts (the CLI's ``--text-column``).

    Raises:
        DataError: binary, text of no encoding detected, not valid JSON, or not of the
            expected shape (no column or field of texts, or not ``text_column``); the message
            names the file and the line (or item).
        InvalidRequestError: ``text_column`` for a file of lines (no columns).
    """
    return [text for text, _ in _text_records(path, name, text_column, choose, utf8_only=utf8_only,
                                              skipped=skipped)]


def read_labelled_text_file(path: Path, label_column: str, name: str | None = None,
                            text_column: str | None = None, choose: str = CHOOSE_TEXT_COLUMN
                            ) -> tuple[list[str], list[str]]:
    """The texts of a .csv, .jsonl or .json file of records, as ``read_text_file`` reads them,
    and each kept text's gold label from its column or field ``label_column`` (matched as the
    text column is: exactly, else in any case), so a file such as Banking77's ``text,category``
    is scored against its own labels. A number is read as its text.

    Raises:
        DataError: as ``read_text_file``; a record without the label field (its fields named),
            or a label that is blank, ``null``, a list or an object (the line or item named).
        InvalidRequestError: a file of lines, which has no columns (``param`` ``label_column``).
    """
    records = _text_records(path, name, text_column, choose, label_column=label_column)
    return [text for text, _ in records], [str(label) for _, label in records]


def _text_records(path: Path, name: str | None, text_column: str | None, choose: str, *,
                  utf8_only: bool = False, label_column: str | None = None,
                  skipped: list[int] | None = None) -> list[tuple[str, str | None]]:
    """``read_text_file``'s texts, each with its label from ``label_column`` (None without one),
    and ``skipped`` as there."""
    where = name or str(path)
    suffix = path.suffix.lower()
    for option, column_name in (("text_column", text_column), ("label_column", label_column)):
        if column_name is not None and suffix not in (".json", ".jsonl", ".csv"):
            what = "a text" if option == "text_column" else "a label"
            raise InvalidRequestError(f"{where}: {what} column is named for a .csv, .jsonl or .json file; "
                                      "this one is read as one text per line", param=option)
    raw = _read_text(path, where, utf8_only=utf8_only)
    # Field names compared composed (NFC), as indexing stores them: a csv header or jsonl key
    # written decomposed by macOS is the name typed composed.
    text_column = unicodedata.normalize("NFC", text_column) if text_column is not None else None
    label_column = unicodedata.normalize("NFC", label_column.strip()) if label_column is not None else None
    fields = (text_column,) if text_column is not None else TEXT_FIELDS
    asked = f"field {text_column!r} (the text column asked for)" if text_column is not None else \
        f"text field ({', '.join(TEXT_FIELDS)})"

    def record_text(row: dict[str, Any], at: str) -> tuple[str, Any]:
        row = {unicodedata.normalize("NFC", str(k)): v for k, v in row.items()}
        field_name = next((f for f in fields if f in row), None)
        if field_name is None:
            # "Text": any case, as `facet index` reads it, and a --text-column too, as a csv's
            # header is matched (`--text-column body` found a csv's "Body" but refused a
            # jsonl's: "no field 'body' ...; it has 'Body'").
            folded = {k.casefold(): k for k in reversed(list(row))}  # the first of a case-twin pair
            field_name = next((folded[f.casefold()] for f in fields if f.casefold() in folded), None)
        if field_name is None:
            raise DataError(f"{at}: no {asked}; it has {', '.join(map(repr, row)) or 'no field'}; "
                            f"{choose}")
        return field_name, row[field_name]

    def checked_label(label: Any, at: str) -> str:
        if label is None or isinstance(label, list | dict):
            raise DataError(f"{at}: its label {label_column!r} is {_json_kind(label)}; give every "
                            "label as a string or a number")
        if not str(label).strip():
            raise DataError(f"{at}: its label {label_column!r} is blank; give every text a label")
        return str(label).strip()

    def record_label(row: Any, at: str) -> str | None:
        if label_column is None:
            return None
        if not isinstance(row, dict):
            raise DataError(f"{at}: a text without fields has no label {label_column!r}; give "
                            "records with a text and a label field")
        row = {unicodedata.normalize("NFC", str(k)): v for k, v in row.items()}
        key = label_column if label_column in row else \
            {k.casefold(): k for k in reversed(list(row))}.get(label_column.casefold())
        if key is None:
            raise DataError(f"{at}: no label field {label_column!r} (the label column asked for); "
                            f"it has {', '.join(map(repr, row)) or 'no field'}")
        return checked_label(row[key], at)

    records: list[tuple[str, str | None]] = []
    blank: list[str] = []  # records whose text is blank, skipped: said, as the texts are numbered without them
    if suffix == ".json":
        data = _json(raw, where)
        items = data.get("texts") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise DataError(f"{where}: expected a JSON list of strings or an object with a "
                            "'texts' list")
        for i, item in enumerate(items):
            at = f"{where}: item {i + 1} of the list"
            field_name, text = record_text(item, at) if isinstance(item, dict) else (None, item)
            if not isinstance(text, str):
                what = f"{field_name!r} of item {i + 1}" if field_name else f"text {i + 1} of the list"
                raise DataError(f"{where}: {what} is {_json_kind(text)}, not a string; give every "
                                "text as a JSON string")
            if not blank_text(text):
                records.append((text, record_label(item, at)))
            else:
                blank.append(f"item {i + 1}")
        _note_blank(where, blank)
        return records
    if suffix == ".jsonl":
        for line_no, line in enumerate(text_lines(raw), 1):
            if not line.strip():
                continue
            at = f"{where}:{line_no}"
            row = _json(line, at)
            field_name = "text"
            if isinstance(row, dict):
                field_name, text = record_text(row, at)
            elif isinstance(row, str):
                text = row
            else:
                raise DataError(f"{where}:{line_no}: each line needs a text field "
                                f"({', '.join(fields)}) or is a JSON string")
            if not isinstance(text, str):
                raise DataError(f"{where}:{line_no}: {field_name!r} is {_json_kind(text)}, not a "
                                "string; give every line a text or remove the line")
            if not blank_text(text):
                records.append((text, record_label(row, at)))
            else:
                blank.append(f"line {line_no}")
        _note_blank(where, blank)
        return records
    if suffix == ".csv":
        try:
            # A long field reads as the indexer reads it, whatever ran before in this process.
            from indexer.parsing import allow_long_csv_fields

            allow_long_csv_fields()
            rows = list(csv.reader(io.StringIO(raw, newline="")))
        except csv.Error as e:
            raise DataError(f"{where}: not a readable csv file ({e})") from e
        if not rows:
            return []
        header = [unicodedata.normalize("NFC", h.strip()) for h in rows[0]]
        lower = [h.lower() for h in header]
        # One column whose name holds another separator (Excel's European export, `text;prio`):
        # each row was one text, "refund me;1", silently.
        other = next((d for d in CSV_OTHER_SEPARATORS if len(header) == 1 and d in header[0]), None)
        separated = (f"its header {header[0]!r} looks {CSV_OTHER_SEPARATORS[other]}-separated, but "
                     "a .csv is read as comma-separated (as `facet index` reads it): every row would "
                     "be one text, its other columns included; save it with commas"
                     if other is not None else "")
        def named_column(name: str, what: str) -> int:
            """The index of the column ``name`` (exactly, else in any case)."""
            wanted = name.strip()
            at = header.index(wanted) if wanted in header else \
                lower.index(wanted.lower()) if wanted.lower() in lower else None
            if at is None:
                raise DataError(f"{where}: no column {name!r} (the {what} column asked for); "
                                f"its columns are {', '.join(map(repr, header))}"
                                + (f"; {separated}" if separated else ""))
            return at

        column: int | None
        if text_column is not None:
            column = named_column(text_column, "text")
        else:
            if separated:  # (naming the whole header as the column reads the rows whole)
                raise DataError(f"{where}: {separated}")
            column = next((lower.index(f) for f in TEXT_FIELDS if f in lower), None)
            if column is None:
                # One column is the texts, unless it is an id column (as `facet index` reads
                # a csv: its ids were clustered as texts).
                if len(header) > 1 or lower[0] in ("_id", "id", "doc_id"):
                    raise DataError(f"{where}: no column of texts ({', '.join(TEXT_FIELDS)}) among "
                                    f"its columns {', '.join(map(repr, header))}; {choose}")
                column = 0  # one column: the texts
        label_at = None if label_column is None else named_column(label_column, "label")
        for line_no, r in enumerate(rows[1:], 2):
            if len(r) > column and not blank_text(r[column]):
                label = None if label_at is None else checked_label(
                    r[label_at] if len(r) > label_at else "", f"{where}: row {line_no} (the header is row 1)")
                records.append((r[column], label))
            elif len(r) == 1 or any(cell.strip() for cell in r):
                # A record with a blank text: a one-column file's line of spaces too (taken for
                # an empty line, unsaid). Not an empty line, nor a row of empty cells (a
                # spreadsheet's trailing ",,," rows).
                blank.append(f"row {line_no}")
        _note_blank(where, blank)
        return records
    every = text_lines(raw)
    if every and not every[-1]:
        every.pop()  # (what follows the last line's end is no line)
    if skipped is not None:
        skipped.extend(i for i, line in enumerate(every, 1) if blank_text(line))
    lines = [line for line in every if not blank_text(line)]
    _refuse_tab_separated(where, lines)  # (the lines as written: a table's empty last cells count)
    return [(line.strip(), None) for line in lines]


def _note_blank(where: str, blank: list[str]) -> None:
    """Log the records of ``where`` skipped for a blank text: the texts after them are numbered
    without them (a result's ``index``, a labels file's count), which was said nowhere."""
    if blank:
        shown = ", ".join(blank[:5]) + (", ..." if len(blank) > 5 else "")
        logger.warning("%s: %s with a blank text skipped (%s); the texts are numbered without %s",
                       where, plural(len(blank), "record"), shown, "it" if len(blank) == 1 else "them")


def _refuse_tab_separated(where: str, lines: list[str]) -> None:
    """Refuse a file of lines that is a table separated by tabs (a .tsv, Excel's "Unicode Text"
    export): each line, its header and other columns included, was clustered as one text,
    where a semicolon-separated .csv is refused. A table's lines hold the same number of tabs
    (its columns); lines of code or prose whose inner tabs vary are texts (they were refused
    too, with no way to cluster them).

    Raises:
        DataError: every line (of two or more) holds the same number of tabs, one or more, and
            one holds a tab inside it; it names the .jsonl that keeps each line whole.
    """
    # Counted as written (a row whose last cells are empty ends in tabs), but a line indented
    # by tabs alone is no table's.
    counts = {line.rstrip("\r\n ").count("\t") for line in lines}
    inner = any("\t" in line.strip() for line in lines)
    if len(lines) >= 2 and len(counts) == 1 and 0 not in counts and inner:
        columns = counts.pop() + 1
        raise DataError(f"{where}: every line holds {columns - 1 if columns > 2 else 'a'} tab"
                        f"{'s' if columns > 2 else ''}: it looks tab-separated ({columns} columns: a .tsv, "
                        "or a spreadsheet's text export), but a file of lines is read as one text per "
                        "line, its other columns included; save it as a .csv with commas (its text "
                        "column named text), or with the texts alone, one per line; to cluster each "
                        'line whole, tabs included, save it as a .jsonl, one {"text": "..."} a line')


def labels_v_measure(labels: Sequence[str], clusters: Sequence[int]) -> float:
    """The V-measure (0 to 1) of ``clusters`` (a clustering's label per text) against gold
    ``labels`` (strings, one per text, in the same order), as the Cluster tab and ``facet
    cluster --labels`` report it (``app.evaluation.metrics.v_measure``).

    Raises:
        ValueError: the two lists differ in length.
    """
    from app.evaluation.metrics import v_measure

    ids = {label: i for i, label in enumerate(dict.fromkeys(labels))}
    return v_measure([ids[label] for label in labels], list(clusters))


def far_apart(classes: int, k: int) -> bool:
    """Whether the number of gold classes and a k chosen by silhouette differ a lot (one at
    least twice the other): the V-measure then says more about k than about the grouping, and
    the Cluster tab and ``facet cluster --labels`` name the number of classes."""
    return max(classes, k) >= 2 * min(classes, k)


def read_label_file(path: Path, name: str | None = None) -> list[str]:
    """Gold labels of texts, in order: ``.json`` (a list, or an object with a ``labels`` list,
    as GoalEx's labels.json), else one label per line.

    Raises:
        DataError: binary, text of no encoding detected, not valid JSON, not of that shape, or a label that is
            ``null``, a list or an object.
    """
    where = name or str(path)
    raw = _read_text(path, where)
    if path.suffix.lower() != ".json":
        return [line.strip() for line in text_lines(raw) if line.strip()]
    data = _json(raw, where)
    items = data.get("labels") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise DataError(f"{where}: expected a JSON list of labels or an object with a 'labels' list")
    for i, item in enumerate(items):
        if item is None or isinstance(item, list | dict):
            raise DataError(f"{where}: label {i + 1} of the list is {_json_kind(item)}; give every "
                            "label as a string or a number")
        if not str(item).strip():
            raise DataError(f"{where}: label {i + 1} of the list is blank; give every text a label")
    # Stripped, as a labels file's lines and a --label-column's values are ("card " and "card"
    # were two classes in a .json only).
    return [str(x).strip() for x in items]


def _read_text(path: Path, where: str, *, utf8_only: bool = False) -> str:
    """A text file's text, decoded as `facet index` decodes plain text
    (``indexer.parsing.decode_text``): UTF-8 (a BOM allowed), a UTF-32 or UTF-16 byte order mark,
    else the detected legacy charset (cp1252, cp1254, cp1251...), each but plain UTF-8 logged as
    a warning (what indexing reports on the document); binary data refused. A UTF-16 file was
    refused as binary and a Latin-1 one as not UTF-8, though `facet index` read both.
    ``utf8_only``: UTF-8 alone (`facet cluster -` reads standard input so, as `facet search -`
    reads a query: a pipe carries the terminal's UTF-8)."""
    from indexer.parsing import DocumentError, binary_message, decode_text, looks_binary

    try:
        data = path.read_bytes()
    except OSError as e:
        raise DataError(f"{where} cannot be read: {e.strerror or e}") from e
    if utf8_only:
        return _strict_utf8(data, where)
    decoded = decode_text(data, where)
    if isinstance(decoded, DocumentError):
        if looks_binary(data):
            raise DataError(binary_message(where, data, "give a text file"))
        raise DataError(decoded.message)
    text, notes = decoded
    for note in notes:
        logger.warning("%s", note)
    return text


def _strict_utf8(data: bytes, where: str) -> str:
    if b"\x00" in data[:8192]:
        from indexer.parsing import utf16_without_bom

        codec = utf16_without_bom(data)
        said = (f"; it reads as {codec} text without a byte order mark: save it as UTF-8"
                if codec else "")
        raise DataError(f"{where} looks binary (it has NUL bytes), not text{said}; give a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        read = bytes(e.object)  # (after a byte order mark, which e.start does not count)
        line = read.count(b"\n", 0, e.start) + 1
        # The byte's place in its line, counted from 1 ("line 3, byte 14" gave the offset in
        # the whole input beside the line's number, past the end of a 6-byte line).
        column = e.start - read.rfind(b"\n", 0, e.start)
        raise DataError(f"{where} is not UTF-8 text (line {line}, byte 0x{read[e.start]:02X} at byte "
                        f"{column} of the line); save it as UTF-8") from e


def _json(raw: str, where: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise DataError(f"{where}: not valid JSON ({e.msg} at line {e.lineno})") from e
    except RecursionError as e:  # '[' * 100000: was a traceback, not a message
        raise json_too_deep(where) from e


def json_too_deep(where: str) -> DataError:
    """The refusal of JSON that ``json.loads`` cannot read for its depth (a ``RecursionError``),
    ``where`` the file (and line) it came from; `facet cluster`'s and `facet eval`'s readers
    (``app.evaluation.loaders``) say it alike."""
    return DataError(f"{where}: JSON nested too deeply to read (lists or objects inside each "
                     f"other more than about {sys.getrecursionlimit()} levels deep); flatten it")


def _json_kind(value: Any) -> str:
    """How a JSON value reads in a message: ``null``, ``the number 3``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, int | float):
        return f"the number {value}"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else repr(value)
