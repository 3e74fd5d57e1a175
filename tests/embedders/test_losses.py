"""Losses against values computed by hand on tiny tensors."""

from __future__ import annotations

import math

import pytest
import torch

from embedders.losses import (
    cosent,
    gircse_loss,
    info_nce,
    iterative_refinement_penalty,
    similarity_distillation,
    stepwise_info_nce,
)


def test_info_nce_hand_computed_in_batch():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[1.0, 0.0], [1.0, 1.0]])  # cos(q0,p0)=1, cos(q0,p1)=1/sqrt2; cos(q1,p0)=0, cos(q1,p1)=1/sqrt2
    tau = 0.5
    s = 1 / math.sqrt(2)
    l0 = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(s / tau)))
    l1 = -math.log(math.exp(s / tau) / (math.exp(0) + math.exp(s / tau)))
    got = info_nce(q, p, temperature=tau)
    assert got.item() == pytest.approx((l0 + l1) / 2, abs=1e-6)


def test_info_nce_hard_negatives_join_the_candidates():
    q = torch.tensor([[1.0, 0.0]])
    p = torch.tensor([[1.0, 0.0]])
    n = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    tau = 1.0
    expected = -math.log(math.e / (math.e + 1.0 + math.exp(-1.0)))
    assert info_nce(q, p, n, temperature=tau).item() == pytest.approx(expected, abs=1e-6)
    # Scale does not matter: cosine similarity.
    assert info_nce(3 * q, 0.5 * p, 7 * n, temperature=tau).item() == pytest.approx(expected, abs=1e-6)


def test_info_nce_rejects_bad_shapes_and_temperature():
    with pytest.raises(ValueError, match="differ"):
        info_nce(torch.zeros(2, 3), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="temperature"):
        info_nce(torch.ones(2, 3), torch.ones(2, 3), temperature=0)


def test_stepwise_info_nce_uses_running_means():
    torch.manual_seed(0)
    q, p = torch.randn(3, 4, 5), torch.randn(3, 4, 5)
    steps = stepwise_info_nce(q, p, temperature=0.1)
    assert steps.shape == (4,)
    for k in range(4):
        expected = info_nce(q[:, : k + 1].mean(1), p[:, : k + 1].mean(1), temperature=0.1)
        assert steps[k].item() == pytest.approx(expected.item(), abs=1e-5)


def test_iterative_refinement_penalty_hand_computed():
    losses = torch.tensor([2.0, 1.0, 1.5, 1.5])
    # log-increases: 1->2: log(1)-log(2) < 0 -> 0; 2->3: log(1.5) - log(1); 3->4: 0.  Mean over 3 transitions.
    expected = math.log(1.5) / 3
    assert iterative_refinement_penalty(losses).item() == pytest.approx(expected, abs=1e-6)
    assert iterative_refinement_penalty(torch.tensor([3.0])).item() == 0.0
    assert iterative_refinement_penalty(torch.tensor([3.0, 2.0, 1.0])).item() == 0.0


def test_refinement_penalty_aimed_at_the_later_step_leaves_the_earlier_one_alone():
    """``later``: the same value, but a worse later step is pushed down without pulling the earlier
    one up (the paper's form moves both, as hard; audit of 2026-12-03)."""
    grads = {}
    for target in ("both", "later"):
        losses = torch.tensor([2.0, 1.0, 1.5], requires_grad=True)
        penalty = iterative_refinement_penalty(losses, target=target)
        assert penalty.item() == pytest.approx(math.log(1.5) / 2, abs=1e-6)
        penalty.backward()
        grads[target] = losses.grad.tolist()
    # d/dL3 of log L3 - log L2, over 2 transitions: 1 / (2 * 1.5); d/dL2: -1 / (2 * 1.0).
    assert grads["both"] == pytest.approx([0.0, -0.5, 1 / 3], abs=1e-6)
    assert grads["later"] == pytest.approx([0.0, 0.0, 1 / 3], abs=1e-6)
    with pytest.raises(ValueError, match="unknown refinement target 'first'; choose one of both, later"):
        iterative_refinement_penalty(losses, target="first")


def test_gircse_loss_combines_mean_and_weighted_penalty():
    torch.manual_seed(1)
    q, p = torch.randn(4, 3, 6), torch.randn(4, 3, 6)
    steps = stepwise_info_nce(q, p, temperature=0.02)
    penalty = iterative_refinement_penalty(steps)
    loss, metrics = gircse_loss(q, p, temperature=0.02, refinement_weight=0.7)
    assert loss.item() == pytest.approx((steps.mean() + 0.7 * penalty).item(), abs=1e-5)
    assert set(metrics) == {"L1", "L2", "L3", "refine"}


def test_supervised_contrastive_matches_hand_computation():
    from embedders.losses import supervised_contrastive

    views = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    labels = torch.tensor([0, 0, 1, 1])
    # Each anchor: one positive at cos 1, two others at cos 0 (tau 1):
    # -log(e / (e + 2)) = log(e + 2) - 1.
    expected = math.log(math.e + 2) - 1
    assert supervised_contrastive(views, labels, temperature=1.0).item() == pytest.approx(expected, rel=1e-6)
    # tau 0.5 doubles the logits: log(e^2 + 2) - 2.
    assert supervised_contrastive(views, labels, temperature=0.5).item() == pytest.approx(
        math.log(math.e**2 + 2) - 2, rel=1e-6)
    with pytest.raises(ValueError, match="positive"):
        supervised_contrastive(views, torch.tensor([0, 1, 2, 3]))


def test_distillation_losses_match_hand_computation():
    from embedders.losses import distill_kl, distill_mse

    assert distill_mse(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 5.0]])).item() == pytest.approx(2.0)
    assert distill_mse(torch.tensor([[2.0, 0.0]]), torch.tensor([[1.0, 0.0]])).item() == pytest.approx(0.0)
    # teacher p = [0.75, 0.25], student uniform: 0.75 ln 1.5 + 0.25 ln 0.5.
    kl = distill_kl(torch.tensor([[0.0, 0.0]]), torch.tensor([[math.log(3.0), 0.0]]))
    assert kl.item() == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5), rel=1e-6)
    assert distill_kl(torch.ones(2, 5), torch.ones(2, 5)).item() == pytest.approx(0.0, abs=1e-7)


def test_centred_distillation_ignores_the_states_shared_direction():
    from embedders.losses import distill_mse

    gen = torch.Generator().manual_seed(0)
    teacher = torch.randn(4, 3, 8, generator=gen)  # (batch, positions, hidden)
    shared = 50.0 * torch.randn(8, generator=gen)
    # Plain cosine is near 1 for any states that share a large direction, whatever else they hold:
    unrelated = torch.randn(4, 3, 8, generator=gen)
    assert distill_mse(unrelated + shared, teacher + shared).item() < 0.05
    assert distill_mse(unrelated + shared, teacher + shared, center=True).item() > 1.0
    # Centred, a student that differs from the teacher by that direction alone is exact:
    assert distill_mse(teacher + shared, teacher, center=True).item() == pytest.approx(0.0, abs=1e-5)
    assert distill_mse(teacher + shared, teacher).item() > 0.5
    with pytest.raises(ValueError, match="at least two states"):
        distill_mse(teacher[:1, :1], teacher[:1, :1], center=True)


def test_cosent_hand_computed():
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    b = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # cosines 1, 0, 1/sqrt2
    scores = torch.tensor([5.0, 1.0, 3.0])
    c = [1.0, 0.0, 1 / math.sqrt(2)]
    scale = 2.0
    # Ordered pairs (i above j): (0,1), (0,2), (2,1); terms exp(scale * (c_j - c_i)).
    terms = [math.exp(scale * (c[1] - c[0])), math.exp(scale * (c[2] - c[0])), math.exp(scale * (c[1] - c[2]))]
    expected = math.log(1 + sum(terms))
    assert cosent(a, b, scores, scale=scale).item() == pytest.approx(expected, abs=1e-6)


def test_cosent_is_zero_for_ties_and_rewards_the_right_order():
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    assert cosent(a, b, torch.full((4,), 2.0)).item() == 0.0
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    y = torch.tensor([[1.0, 0.1], [0.1, 1.0]])  # pair 0 is the more similar
    right, wrong = torch.tensor([5.0, 1.0]), torch.tensor([1.0, 5.0])
    assert cosent(x, y, right).item() < cosent(x, y, wrong).item()
    with pytest.raises(ValueError, match="do not match"):
        cosent(x, y, torch.tensor([1.0]))


def test_similarity_distillation_is_zero_when_the_student_copies_the_teacher():
    torch.manual_seed(0)
    t = torch.randn(5, 8)
    assert similarity_distillation(3 * t, t).item() == pytest.approx(0.0, abs=1e-6)
    # A different geometry costs something, and gradients reach the student.
    s = torch.randn(5, 4, requires_grad=True)
    loss = similarity_distillation(s, t)
    assert loss.item() > 0.01
    loss.backward()
    assert s.grad is not None and s.grad.abs().sum() > 0


def test_similarity_distillation_hand_computed():
    s = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    t = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    tau = 1.0

    def rows(x):
        x = torch.nn.functional.normalize(x, dim=-1)
        sim = x @ x.T / tau
        out = []
        for i in range(3):
            others = [sim[i, j].item() for j in range(3) if j != i]
            z = sum(math.exp(v) for v in others)
            out.append([math.exp(v) / z for v in others])
        return out

    ps, pt = rows(s), rows(t)
    expected = sum(sum(q * math.log(q / r) for q, r in zip(tr, sr, strict=True))
                   for tr, sr in zip(pt, ps, strict=True)) / 3
    got = similarity_distillation(s, t, student_temperature=tau, teacher_temperature=tau)
    assert got.item() == pytest.approx(expected, abs=1e-5)


def test_gircse_loss_with_scores_uses_stepwise_cosent():
    torch.manual_seed(0)
    q, p = torch.randn(4, 3, 5), torch.randn(4, 3, 5)
    scores = torch.tensor([4.0, 1.0, 3.0, 2.0])
    _, metrics = gircse_loss(q, p, scores=scores, refinement_weight=0.0)
    for k in range(3):
        expected = cosent(q[:, : k + 1].mean(1), p[:, : k + 1].mean(1), scores)
        assert metrics[f"L{k + 1}"] == pytest.approx(expected.item(), abs=1e-5)


def test_step_weights_uniform_and_linear():
    from embedders.losses import step_weights

    assert step_weights(4).tolist() == pytest.approx([0.25] * 4)
    assert step_weights(3, "linear").tolist() == pytest.approx([1 / 6, 2 / 6, 3 / 6])
    with pytest.raises(ValueError, match="unknown step weighting 'square'"):
        step_weights(3, "square")


def test_gircse_loss_linear_weighting_leans_on_later_steps():
    torch.manual_seed(2)
    q, p = torch.randn(4, 3, 6), torch.randn(4, 3, 6)
    steps = stepwise_info_nce(q, p, temperature=0.02)
    penalty = iterative_refinement_penalty(steps)
    loss, _ = gircse_loss(q, p, temperature=0.02, refinement_weight=0.5, step_weighting="linear")
    expected = (steps[0] + 2 * steps[1] + 3 * steps[2]) / 6 + 0.5 * penalty
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
