"""Training losses as pure functions of embeddings (testable on random tensors).

Nothing here knows about models: each function takes embeddings (or per-step
embeddings) and returns a scalar loss, so the same code trains every method and
tests check it against hand-computed values.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


def info_nce(
    queries: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor | None = None,
    *,
    temperature: float = 0.05,
    reduction: str = "mean",
) -> torch.Tensor:
    """InfoNCE with in-batch negatives and optional hard negatives (cosine similarity).

    For query i the candidates are every positive in the batch plus every hard
    negative; the target is positive i:

        L_i = -log exp(cos(q_i, p_i)/tau) / sum_j exp(cos(q_i, c_j)/tau)

    (Causal2Vec, Sec. 3.3 / eq. of the contrastive objective; GIRCSE uses the same
    form per generation step.)

    Args:
        queries: (batch, dim).
        positives: (batch, dim), row i is the positive of query i.
        negatives: (n_neg, dim) hard negatives shared by the whole batch, or None.
        temperature: tau.
        reduction: ``mean`` or ``none`` (per-query losses).

    Returns:
        Scalar loss (or (batch,) with reduction="none").
    """
    if queries.shape != positives.shape:
        raise ValueError(f"queries {tuple(queries.shape)} and positives {tuple(positives.shape)} differ")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    q = F.normalize(queries, dim=-1)
    candidates = positives if negatives is None else torch.cat([positives, negatives], dim=0)
    c = F.normalize(candidates, dim=-1)
    logits = q @ c.T / temperature  # (batch, batch + n_neg)
    target = torch.arange(q.shape[0], device=q.device)
    return F.cross_entropy(logits, target, reduction=reduction)


def running_means(steps: torch.Tensor) -> torch.Tensor:
    """(n, K, dim) per-step states -> (n, K, dim) where row k is the mean of the first k + 1."""
    k = steps.shape[1]
    counts = torch.arange(1, k + 1, device=steps.device, dtype=steps.dtype).view(1, k, 1)
    return steps.cumsum(dim=1) / counts


def stepwise_info_nce(
    query_steps: torch.Tensor,
    positive_steps: torch.Tensor,
    negative_steps: torch.Tensor | None = None,
    *,
    temperature: float = 0.02,
) -> torch.Tensor:
    """GIRCSE's stepwise contrastive losses, one per number of generated tokens.

    The embedding after k soft tokens is the mean of the first k generated states;
    L_k is InfoNCE on those embeddings (GIRCSE, stepwise contrastive objective).

    Args:
        query_steps: (batch, K, dim) generated-token states of the queries.
        positive_steps: (batch, K, dim).
        negative_steps: (n_neg, K, dim) or None.
        temperature: tau (0.02 in the paper).

    Returns:
        (K,) tensor [L_1, ..., L_K].
    """
    return stepwise(lambda q, p, n: info_nce(q, p, n, temperature=temperature),
                    query_steps, positive_steps, negative_steps)


def stepwise(
    loss: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor],
    query_steps: torch.Tensor,
    positive_steps: torch.Tensor,
    negative_steps: torch.Tensor | None = None,
) -> torch.Tensor:
    """Any pair loss applied to the running-mean embeddings after each of K generated tokens.

    Returns:
        (K,) tensor [L_1, ..., L_K].
    """
    q, p = running_means(query_steps), running_means(positive_steps)
    n = running_means(negative_steps) if negative_steps is not None else None
    return torch.stack([loss(q[:, k], p[:, k], None if n is None else n[:, k]) for k in range(q.shape[1])])


REFINEMENT_TARGETS = ("both", "later")


def iterative_refinement_penalty(step_losses: torch.Tensor, eps: float = 1e-8,
                                 target: str = "both") -> torch.Tensor:
    """GIRCSE's iterative refinement regulariser: mean_k max(log L_{k+1} - log L_k, 0).

    It penalises any step that makes the contrastive loss worse, so more generated
    tokens never hurt (the property test-time scaling relies on).

    Args:
        step_losses: (K,) losses [L_1..L_K].
        target: ``both`` (the paper): the gradient lowers L_{k+1} and, as hard, raises L_k, so a
            worse k-token embedding also satisfies it; ``later``: L_k is a fixed reference
            (detached) and only the later step is pushed down.

    Returns:
        Scalar; 0 when K == 1.
    """
    if target not in REFINEMENT_TARGETS:
        raise ValueError(f"unknown refinement target {target!r}; choose one of "
                         f"{', '.join(REFINEMENT_TARGETS)}")
    if step_losses.numel() < 2:
        return step_losses.new_zeros(())
    logs = torch.log(step_losses.clamp(min=eps))
    earlier = logs[:-1].detach() if target == "later" else logs[:-1]
    return torch.relu(logs[1:] - earlier).mean()


STEP_WEIGHTINGS = ("uniform", "linear")


def step_weights(k: int, weighting: str = "uniform") -> torch.Tensor:
    """(k,) weights summing to 1 over GIRCSE's stepwise losses L_1..L_k.

    ``uniform``: 1/k each. ``linear``: w_j = j / (1 + ... + k), so L_k weighs k times L_1.
    """
    if weighting == "uniform":
        return torch.full((k,), 1.0 / k)
    if weighting == "linear":
        ranks = torch.arange(1, k + 1, dtype=torch.float32)
        return ranks / ranks.sum()
    raise ValueError(f"unknown step weighting {weighting!r}; choose one of {', '.join(STEP_WEIGHTINGS)}")


def gircse_loss(
    query_steps: torch.Tensor,
    positive_steps: torch.Tensor,
    negative_steps: torch.Tensor | None = None,
    *,
    temperature: float = 0.02,
    refinement_weight: float = 1.0,
    scores: torch.Tensor | None = None,
    cosent_scale: float = 20.0,
    step_weighting: str = "uniform",
    refinement_target: str = "both",
) -> tuple[torch.Tensor, dict[str, float]]:
    """Total GIRCSE objective: sum_k w_k L_k + weight * iterative refinement penalty.

    L_k is InfoNCE after k generated tokens, or CoSENT when the batch has gold ``scores``.
    ``step_weighting`` sets w: ``uniform`` (w_k = 1/K, the paper's mean) or ``linear``
    (w_k proportional to k), meant to lean on the later steps; measured from a strong
    last-token start it raised dev but did not bring back a rising K curve (README).
    ``refinement_target``: which side of each penalised pair the penalty's gradient moves
    (``iterative_refinement_penalty``).

    Returns:
        (loss, metrics) where metrics has the per-step losses and the penalty.
    """
    if scores is None:
        steps = stepwise_info_nce(query_steps, positive_steps, negative_steps, temperature=temperature)
    else:
        steps = stepwise(lambda q, p, _n: cosent(q, p, scores, scale=cosent_scale), query_steps, positive_steps)
    penalty = iterative_refinement_penalty(steps, target=refinement_target)
    loss = (step_weights(steps.numel(), step_weighting).to(steps) * steps).sum() + refinement_weight * penalty
    metrics = {f"L{k + 1}": float(v) for k, v in enumerate(steps.detach())}
    metrics["refine"] = float(penalty.detach())
    return loss, metrics


def supervised_contrastive(views: torch.Tensor, labels: torch.Tensor, *, temperature: float = 0.1) -> torch.Tensor:
    """Multi-view supervised contrastive loss (SupCon) over cosine similarities.

    Every row is an anchor; its positives are the other rows with the same label:

        L_a = -1/|P(a)| * sum_{p in P(a)} log( exp(s_ap/tau) / sum_{k != a} exp(s_ak/tau) )

    averaged over anchors that have at least one positive (InstEmb's contrastive term,
    where the views of one example are student, student with another dropout mask,
    teacher, and the student's encoding of the answer alone).

    Args:
        views: (n, dim) embeddings, unnormalised.
        labels: (n,) integer class ids; equal ids are positives.
        temperature: tau.
    """
    if views.ndim != 2 or labels.shape != views.shape[:1]:
        raise ValueError(f"views must be (n, dim) and labels (n,), got {tuple(views.shape)} and {tuple(labels.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    z = F.normalize(views.float(), dim=-1)
    sim = z @ z.T / temperature
    n = sim.shape[0]
    self_mask = torch.eye(n, dtype=torch.bool, device=sim.device)
    sim = sim.masked_fill(self_mask, float("-inf"))
    log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    positive = (labels.unsqueeze(0) == labels.unsqueeze(1)) & ~self_mask
    counts = positive.sum(dim=1)
    has = counts > 0
    if not bool(has.any()):
        raise ValueError("no anchor has a positive: every label occurs once")
    per_anchor = -(log_prob.masked_fill(~positive, 0.0).sum(dim=1)[has] / counts[has])
    return per_anchor.mean()


def distill_mse(student: torch.Tensor, teacher: torch.Tensor, *, center: bool = False) -> torch.Tensor:
    """Squared distance between L2-normalised student and teacher states, summed over the
    hidden size and averaged over positions (= 2 - 2 cos). Normalising first keeps the
    decoder's few huge activation dimensions from dominating the loss.

    Args:
        student: (..., dim); teacher: same shape (no gradient is taken through it).
        center: subtract each side's mean state over all positions in the batch before
            normalising. A decoder's states share one large direction (anisotropy), so the
            plain cosine is high for any two states and is mostly fitted by that shared part;
            centred, the loss only counts what tells one example's answer from another's.
    """
    if student.shape != teacher.shape:
        raise ValueError(f"student {tuple(student.shape)} and teacher {tuple(teacher.shape)} differ")
    s, t = student.float(), teacher.detach().float()
    if center:
        dims = tuple(range(s.dim() - 1))  # every axis but the hidden one
        if s[..., 0].numel() < 2:  # one state centred is zero: the loss would silently vanish
            raise ValueError("centred distillation needs at least two states (batch x positions); got one")
        s = s - s.mean(dim=dims, keepdim=True)
        t = t - t.mean(dim=dims, keepdim=True)
    s, t = F.normalize(s, dim=-1), F.normalize(t, dim=-1)
    return (s - t).pow(2).sum(dim=-1).mean()


def distill_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, *, temperature: float = 1.0) -> torch.Tensor:
    """KL(teacher || student) between next-token distributions, averaged over positions.

    Args:
        student_logits, teacher_logits: (..., vocab).
        temperature: softens both distributions (the loss is scaled by T^2, as usual).
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student {tuple(student_logits.shape)} and teacher {tuple(teacher_logits.shape)} logits differ")
    log_s = F.log_softmax(student_logits.float() / temperature, dim=-1)
    log_t = F.log_softmax(teacher_logits.detach().float() / temperature, dim=-1)
    kl = (log_t.exp() * (log_t - log_s)).sum(dim=-1)
    return kl.mean() * temperature**2


def cosent(first: torch.Tensor, second: torch.Tensor, scores: torch.Tensor, *, scale: float = 20.0) -> torch.Tensor:
    """CoSENT ranking loss over scored pairs: every pair scored higher by the gold labels
    should have the higher cosine.

        L = log(1 + sum_{(i, j): s_i > s_j} exp(scale * (cos_j - cos_i)))

    (Su, "CoSENT", 2022; the scored-pair loss of AnglE, eq. 3 without the angle term.)
    It uses every scored pair (not only the very similar ones), so graded STS labels
    teach the order of similarities that Spearman measures.

    Args:
        first, second: (batch, dim) embeddings of each pair's two texts.
        scores: (batch,) gold similarities.
        scale: 1 / temperature.

    Returns:
        Scalar loss; 0 when all gold scores are equal.
    """
    if first.shape != second.shape or scores.shape != first.shape[:1]:
        raise ValueError(f"first {tuple(first.shape)}, second {tuple(second.shape)} and scores "
                         f"{tuple(scores.shape)} do not match")
    cos = F.cosine_similarity(first.float(), second.float(), dim=-1) * scale  # (batch,)
    diff = cos.unsqueeze(0) - cos.unsqueeze(1)  # [i, j] = cos_j - cos_i
    higher = scores.unsqueeze(1) > scores.unsqueeze(0)  # [i, j]: pair i should score above pair j
    terms = diff[higher]
    zero = cos.new_zeros(1)
    return torch.logsumexp(torch.cat([zero, terms]), dim=0)


def similarity_distillation(student: torch.Tensor, teacher: torch.Tensor, *, student_temperature: float = 0.05,
                            teacher_temperature: float = 0.05) -> torch.Tensor:
    """KL(teacher || student) between the rows of the in-batch cosine-similarity matrices.

    Each text's similarities to the others are turned into a distribution (softmax over
    the row, self excluded) for the teacher and the student; the student learns the
    teacher's graded view of which texts are close, not just which one is the positive.

    Args:
        student: (n, d_s) student embeddings (gradients flow).
        teacher: (n, d_t) teacher embeddings of the same texts (no gradient).

    Returns:
        Scalar loss.
    """
    if student.shape[0] != teacher.shape[0] or student.shape[0] < 2:
        raise ValueError(f"student {tuple(student.shape)} and teacher {tuple(teacher.shape)} need the same n >= 2")
    s = F.normalize(student.float(), dim=-1)
    t = F.normalize(teacher.detach().float(), dim=-1)
    n = s.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=s.device)
    log_s = F.log_softmax((s @ s.T / student_temperature).masked_fill(eye, float("-inf")), dim=-1)
    log_t = F.log_softmax((t @ t.T / teacher_temperature).masked_fill(eye, float("-inf")), dim=-1)
    p_t = log_t.exp()
    # Diagonal: p_t = 0 and log terms are -inf; mask them out of the sum.
    kl = (p_t * (log_t - log_s)).masked_fill(eye, 0.0).sum(dim=-1)
    return kl.mean()
