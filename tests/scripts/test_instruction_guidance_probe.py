"""scripts/instruction_guidance_probe.py: w = 1 is the dev suite; other w move the embedding."""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation import loaders
from app.evaluation.dev import DevEvaluator, DevSizes
from embedders.registry import load_checkpoint
from tests.scripts import load_script


def test_guidance_one_is_the_dev_suite_and_other_weights_change_the_scores(shared_data, tiny_inbedder_dir):
    probe = load_script("instruction_guidance_probe.py")
    model = load_checkpoint(tiny_inbedder_dir, device="cpu")
    clinc = shared_data / "clinc150"
    views = loaders.build_clinc_multiview(clinc / "data_full.json", clinc / "domains.json", split="val", n=40, seed=0)
    plain, doubled = probe.score_views(model, views, [1.0, 2.0])
    dev = DevEvaluator(shared_data, "instruction", sizes=DevSizes(clinc_texts=40))(model)
    assert plain["hmean"] == pytest.approx(dev["clinc-dev/hmean"], abs=0.01)
    assert plain["steer_gap"] == pytest.approx(dev["clinc-dev/steer_gap"], abs=0.01)
    assert plain["score"] == pytest.approx(dev["score"], abs=0.02)
    assert doubled["w"] == 2.0 and doubled != {**plain, "w": 2.0}
    e0, e1 = np.eye(2)[:1], np.array([[0.6, 0.8]])
    np.testing.assert_allclose(probe.guided(e0, e1, 1.0), e1)  # w = 1: the instruction's own embedding
    np.testing.assert_allclose(probe.guided(e0, e1, 2.0), [[0.2 / np.hypot(0.2, 1.6), 1.6 / np.hypot(0.2, 1.6)]])


def test_bad_weights_are_a_usage_error_before_any_model_loads(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_script("instruction_guidance_probe.py").main(["no-such-checkpoint", "--weights", "1,two"])
    assert exit_info.value.code == 2 and "comma-separated numbers" in capsys.readouterr().err
