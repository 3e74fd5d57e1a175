"""Dev suites for model selection during training: dev and train splits only, never a test split.

* ``corpus`` (Causal-EOS, Causal2Vec, GIRCSE): STS-B *dev* pairs (Spearman; a seeded 400, or
  all 1,500 with ``DevSizes(sts_pairs=None)``, ``facet train --dev-sts-pairs all``) and the
  SciFact *train* queries held out from training (``scifact_dev_query_ids``) retrieved
  from a corpus subset (their relevant abstracts plus seeded others, cut to 64 words), nDCG@10;
  or, with ``DevSizes.whole_corpus()`` (``facet train --dev-corpus whole``), from the whole
  corpus of whole abstracts, the task users search.
* ``instruction`` (InstEmb, InBedder): CLINC150 *validation* texts under the intent and
  the domain instruction (harmonic mean of the two V-measures, and the steer gap), on one
  seeded sample or the mean of several (``DevSizes.clinc_samples``).

``DevEvaluator(model)`` returns one dict of scores whose ``score`` is what selection
maximises: the mean of the suite's main scores (x 100), where a multi-view task counts
``hmean + steer_gap``: an instruction model is only useful if its instruction steers it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.evaluation import loaders
from app.evaluation.cache import EmbeddingCache
from app.evaluation.suites import SCIFACT_INSTRUCTION
from app.evaluation.tasks import EvalContext, MultiViewClusteringTask, RetrievalTask, StsTask, Task
from embedders import Embedder

DEV_SUITES = ("corpus", "instruction")
DEV_KMEANS_SEEDS = (0, 1, 2)  # k-means seeds of the dev suite's CLINC views (the test suites use five)


@dataclass(frozen=True)
class DevSizes:
    """Dev subsample sizes: small enough to run every few dozen steps on one CPU thread."""

    # STS-B dev pairs (seeded sample); None: all 1,500 (task "stsb-dev-all"), which halves the
    # noise of the STS part against the 400-pair sample at ~3.75 times its encoding cost.
    sts_pairs: int | None = 400
    scifact_queries: int | None = None  # None: every held-out query (162)
    # The judged abstracts plus seeded others, cut to 64 words: cheap on one CPU thread, but far
    # easier than the 5,183 whole abstracts users search. None, None: the whole corpus, whole
    # abstracts (task "scifact-dev-corpus"; ~20 minutes per evaluation on one CPU thread).
    scifact_docs: int | None = 400
    scifact_doc_words: int | None = 64
    clinc_texts: int = 400
    clinc_seed: int = 0  # which seeded sample of CLINC val (training selects on seed 0 by default)
    # Seeded samples scored and averaged (seeds clinc_seed, clinc_seed + 1, ...): one 400-text
    # sample's selection score has an sd of 1.2-2.2 points (scripts/dev_noise.py).
    clinc_samples: int = 1

    @classmethod
    def whole_corpus(cls, **sizes: Any) -> DevSizes:
        """SciFact dev ranked over the whole corpus, whole abstracts (the other sizes as given)."""
        return cls(**{**sizes, "scifact_docs": None, "scifact_doc_words": None})

    def __post_init__(self) -> None:
        if self.clinc_samples < 1:
            raise ValueError(f"clinc_samples must be at least 1, got {self.clinc_samples}")


def one_size(n: int) -> dict[str, int]:
    """``DevSizes`` fields for ``--dev-size n``: every dev subsample cut to ``n`` items."""
    return {"sts_pairs": n, "scifact_queries": n, "scifact_docs": n, "clinc_texts": n}


def sts_pairs_option(value: str) -> int | None:
    """``--dev-sts-pairs`` -> ``DevSizes.sts_pairs``: ``all`` -> None (every pair), else a count >= 10.

    Raises:
        ValueError: anything else.
    """
    if value.strip().lower() == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 10:
        raise ValueError(f"--dev-sts-pairs must be 'all' or a number of pairs >= 10, got {value!r}")
    return n


def stsb_dev(root: Path) -> list[loaders.StsPair]:
    """All 1,500 STS-B dev pairs (``stsb_en/stsb-en-dev.csv`` under the datasets root)."""
    return loaders.load_sts_csv(root / "stsb_en" / "stsb-en-dev.csv")


def scifact_dev(root: Path) -> loaders.BeirData:
    """SciFact's corpus with only the held-out *train* queries (``scifact_dev_query_ids``) and
    their judgements: the retrieval dev set, never trained on and never a test split."""
    from embedders.training.data import scifact_dev_query_ids

    data = loaders.load_beir(root / "beir_scifact", "train")
    keep = scifact_dev_query_ids(root)
    qrels = {q: rel for q, rel in data.qrels.items() if q in keep}
    return loaders.BeirData(data.corpus, {q: data.queries[q] for q in qrels}, qrels)


def build_dev_tasks(root: Path, suite: str, sizes: DevSizes | None = None) -> list[Task]:
    """The tasks of a dev suite, reading under the datasets root ``root``.

    Raises:
        ValueError: an unknown suite.
    """
    s = sizes or DevSizes()
    if suite == "corpus":
        return [
            StsTask("stsb-dev" if s.sts_pairs else "stsb-dev-all", lambda: stsb_dev(root), sample=s.sts_pairs,
                    seed=0),
            RetrievalTask("scifact-dev" if s.scifact_docs else "scifact-dev-corpus", lambda: scifact_dev(root),
                          instruction=SCIFACT_INSTRUCTION,
                          doc_max_words=s.scifact_doc_words, n_queries=s.scifact_queries,
                          n_docs=s.scifact_docs, seed=0),
        ]
    if suite == "instruction":
        data, domains = root / "clinc150" / "data_full.json", root / "clinc150" / "domains.json"

        def clinc(seed: int) -> MultiViewClusteringTask:
            # The first sample keeps the name "clinc-dev"; the others carry their seed.
            name = "clinc-dev" if seed == s.clinc_seed else f"clinc-dev-s{seed}"
            return MultiViewClusteringTask(
                name, lambda: loaders.build_clinc_multiview(data, domains, split="val", n=s.clinc_texts, seed=seed),
                kmeans_seeds=DEV_KMEANS_SEEDS)

        return [clinc(s.clinc_seed + i) for i in range(s.clinc_samples)]
    raise ValueError(f"unknown dev suite {suite!r}; use one of: {', '.join(DEV_SUITES)}")


def dev_instructions(suite: str) -> dict[str, tuple[str, str]]:
    """The instructions a dev suite embeds its texts under, by what they ask for, each with its
    role (``build_dev_tasks``'s): what a training run's ``--max-length`` must leave room for
    before its first dev evaluation (a run at InstEmb's ``--max-length 24`` trained, then
    stopped at the first CLINC evaluation on "the instruction is too long").

    Raises:
        ValueError: an unknown suite.
    """
    if suite == "corpus":
        return {"SciFact query": ("query", SCIFACT_INSTRUCTION)}
    if suite == "instruction":
        return {"CLINC intent": ("query", loaders.CLINC_INTENT_INSTRUCTION),
                "CLINC domain": ("query", loaders.CLINC_DOMAIN_INSTRUCTION)}
    raise ValueError(f"unknown dev suite {suite!r}; use one of: {', '.join(DEV_SUITES)}")


class DevEvaluator:
    """Scores a model on a dev suite; callable as the trainer's ``evaluate`` hook.

    Args:
        root: datasets root.
        suite: ``corpus`` or ``instruction``.
        batch_size: texts per forward pass.
        sizes: subsample sizes.
    """

    def __init__(self, root: Path, suite: str, *, batch_size: int = 32, sizes: DevSizes | None = None) -> None:
        self.suite = suite
        self.tasks = build_dev_tasks(Path(root), suite, sizes)
        self.batch_size = batch_size
        self._cache = EmbeddingCache(None)

    def __call__(self, model: Embedder) -> dict[str, Any]:
        start = time.perf_counter()
        ctx = EvalContext(model, self._cache, batch_size=self.batch_size, show_progress=False)
        out: dict[str, Any] = {}
        mains = []
        for task in self.tasks:
            result = task.run(ctx)
            for key, value in result.scores.items():
                out[f"{task.name}/{key}"] = round(100 * value, 2)
            main = result.main_score + (result.scores.get("steer_gap", 0.0) if result.kind == "multiview" else 0.0)
            mains.append(100 * main)
        out["score"] = round(sum(mains) / len(mains), 2)
        out["eval_seconds"] = round(time.perf_counter() - start, 1)
        return out
