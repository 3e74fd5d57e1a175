from __future__ import annotations

import torch

from embedders.pooling import gather_positions, last_token_index, last_token_pool, mean_pool


def test_mean_pool_ignores_padding_hand_computed():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                           [[100.0, 100.0], [5.0, 6.0], [7.0, 10.0]]])
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    out = mean_pool(hidden, mask)
    assert torch.allclose(out, torch.tensor([[2.0, 3.0], [6.0, 8.0]]))


def test_last_token_index_both_padding_sides():
    right = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    left = torch.tensor([[0, 1, 1, 1], [0, 0, 0, 1], [1, 1, 1, 1]])
    assert last_token_index(right).tolist() == [2, 0, 3]
    assert last_token_index(left).tolist() == [3, 3, 3]


def test_last_token_pool_same_for_left_and_right_padding():
    torch.manual_seed(0)
    states = torch.randn(2, 3, 4)
    # Row 0 has 3 real tokens; row 1 has 2 real tokens.
    right_hidden = torch.zeros(2, 4, 4)
    right_hidden[0, :3] = states[0]
    right_hidden[1, :2] = states[1, :2]
    left_hidden = torch.zeros(2, 4, 4)
    left_hidden[0, 1:] = states[0]
    left_hidden[1, 2:] = states[1, :2]
    right_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    left_mask = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])
    a = last_token_pool(right_hidden, right_mask)
    b = last_token_pool(left_hidden, left_mask)
    assert torch.equal(a, b)
    assert torch.equal(a[0], states[0, 2]) and torch.equal(a[1], states[1, 1])


def test_gather_positions_single_and_multi():
    hidden = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    assert torch.equal(gather_positions(hidden, torch.tensor([2, 0])), hidden[[0, 1], [2, 0]])
    multi = gather_positions(hidden, torch.tensor([[0, 1], [1, 2]]))
    assert multi.shape == (2, 2, 4)
    assert torch.equal(multi[1, 1], hidden[1, 2])
