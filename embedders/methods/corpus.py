"""What the three corpus methods (Causal-EOS, Causal2Vec, GIRCSE) share: the prompt template.

On a small decoder the prompt decides where training starts. SmolLM2-135M read as
``text + EOS`` and pooled at the EOS scores ~38 Spearman on STS-B dev; the same model
pooled at the last token of the PromptEOL prompt ``This sentence : "{text}" means in
one word:"`` scores ~75. So every corpus method reads its text inside one template:

* ``prompteol`` (default): ``[instruction\\n]This sentence : "{text}" means in one word:"``,
  nothing appended; the "last token" (the papers' EOS) is the template's closing
  ``"``. Causal2Vec puts its Contextual token inside the template, right before the
  text; GIRCSE generates its soft tokens after the closing ``"``.
* ``eos``: the papers' own layout, ``[Instruct: instruction\\nQuery: ]text`` followed by an
  explicit EOS token that is pooled (kept so the old behaviour can still be measured).

The instruction rule is the same in training and evaluation: a task instruction is
rendered into the template on the *query* side of asymmetric tasks (retrieval);
documents, and both sides of symmetric tasks (STS, NLI), are read bare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from embedders.base import Embedder, PromptConfig, PromptTokenizer, Role
from embedders.losses import cosent, info_nce, similarity_distillation
from embedders.methods.common import CORPUS_PROMPTS, PROMPTEOL_PROMPTS, TemplatedConfig, TrainableDecoderEmbedder

TEMPLATES: dict[str, PromptConfig] = {"prompteol": PROMPTEOL_PROMPTS, "eos": CORPUS_PROMPTS}


@dataclass
class CorpusConfig(TemplatedConfig):
    """Settings every corpus method has.

    Attributes:
        template: ``prompteol`` (last template token pooled, no EOS) or ``eos`` (the
            papers' ``Instruct/Query`` prompt with an appended EOS that is pooled);
            checkpoints saved before templates existed read ``eos``.
        temperature: contrastive tau.
    """

    TEMPLATES: ClassVar[dict[str, PromptConfig]] = TEMPLATES
    LEGACY_TEMPLATE: ClassVar[str] = "eos"
    TRAINING_ONLY: ClassVar[frozenset[str]] = frozenset({"temperature"})

    temperature: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")


class CorpusEmbedder(TrainableDecoderEmbedder):
    """A trainable decoder whose tokenizer follows ``config.template``, trained on pairs.

    ``template`` is also an inference option (``'checkpoints/causal-eos[template=eos]'``),
    so a checkpoint can be read under the other layout for an ablation.

    Training objective per batch (``training_loss``): InfoNCE over in-batch and hard
    negatives, or CoSENT when the batch carries gold scores; plus, when a teacher is set
    (``set_teacher``), the teacher's in-batch similarity structure distilled into the
    student's (``similarity_distillation``).
    """

    config: CorpusConfig
    # ``max_length`` is an inference option too: a checkpoint trained on short sentences
    # (96 tokens) can read a 200-token index chunk or a whole abstract at inference.
    OPTIONS: tuple[str, ...] = ("template", "max_length")
    # Positions a method keeps free inside max_length (Causal2Vec's Contextual token).
    reserved_positions = 0

    def __init__(self, config: CorpusConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.teacher: Embedder | None = None
        self.teacher_weight = 0.0

    def _set_tokenizer(self) -> None:
        if self.max_length <= self.reserved_positions + 8:
            raise ValueError(f"max_length must leave room for text, got {self.max_length}")
        tok = self.backbone.tokenizer
        self.prompts = self.config.prompts
        end_ids = [tok.eos_token_id] if self.config.template == "eos" else []
        self._tokenize = PromptTokenizer(tok, self.prompts, self.max_length - self.reserved_positions,
                                         end_ids=end_ids, empty_ids=[tok.eos_token_id])

    @property
    def template(self) -> str:
        return self.config.template

    @template.setter
    def template(self, value: str) -> None:
        if value not in TEMPLATES:
            raise ValueError(f"template must be one of {', '.join(TEMPLATES)}, got {value!r}")
        self.config.template = value
        self.config.prompts = TEMPLATES[value]
        self._set_tokenizer()

    # -- training ------------------------------------------------------------------------

    def set_teacher(self, teacher: Embedder | None, weight: float) -> None:
        """Distil ``teacher``'s in-batch similarities with this weight (training only; not saved)."""
        if weight < 0:
            raise ValueError(f"teacher weight must be >= 0, got {weight}")
        self.teacher, self.teacher_weight = teacher, weight

    def pair_loss(self, q: torch.Tensor, p: torch.Tensor, n: torch.Tensor | None, batch: Any) -> torch.Tensor:
        """CoSENT on scored batches, otherwise InfoNCE (tau = ``config.temperature``)."""
        if batch.scores is not None:
            return cosent(q, p, torch.tensor(batch.scores, device=q.device))
        return info_nce(q, p, n, temperature=self.config.temperature)

    def batch_sides(self, batch: Any) -> list[tuple[list[str], Role, str | None]]:
        """(texts, role, instruction) of the queries, positives and negatives, by the
        instruction rule: symmetric batches read both sides alike; otherwise only the
        queries carry the instruction."""
        doc_role, doc_instruction = (Role.QUERY, batch.instruction) if batch.symmetric else (Role.DOCUMENT, None)
        return [(batch.queries, Role.QUERY, batch.instruction), (batch.positives, doc_role, doc_instruction),
                (batch.negatives, doc_role, doc_instruction)]

    def distillation(self, batch: Any, student: torch.Tensor) -> torch.Tensor | None:
        """The teacher term for ``student`` = embeddings of queries + positives + negatives."""
        if self.teacher is None or self.teacher_weight == 0:
            return None
        texts = [t for side, _, _ in self.batch_sides(batch) for t in side]
        target = self.teacher.encode(texts, role=Role.DOCUMENT, instruction=None, batch_size=len(texts))
        return similarity_distillation(student, torch.from_numpy(target).to(student.device))

    def training_reps(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        """What the loss reads of one side of a batch, one row per text: here the embeddings
        (batch, dim). Rows depend on their own text only, so a side may be computed in chunks
        (``embedders.training.grad_cache``)."""
        return self.embed_with_grad(texts, role, instruction)

    def training_loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        reps = [self.training_reps(texts, role, instruction) if texts else None
                for texts, role, instruction in self.batch_sides(batch)]
        return self.loss_from_reps(batch, *reps)

    def loss_from_reps(self, batch: Any, q: torch.Tensor | None, p: torch.Tensor | None,
                       n: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, float]]:
        """The batch loss from the three sides' ``training_reps`` (negatives may be None)."""
        assert q is not None and p is not None
        loss = self.pair_loss(q, p, n, batch)
        metrics = {"pair": float(loss.detach())}
        distill = self.distillation(batch, torch.cat([x for x in (q, p, n) if x is not None]))
        if distill is not None:
            metrics["distill"] = float(distill.detach())
            loss = loss + self.teacher_weight * distill
        metrics["loss"] = float(loss.detach())
        return loss, metrics
