"""scripts/dev_noise.py: the instruction dev suite on several seeded CLINC val samples."""

from __future__ import annotations

from app.evaluation.dev import DevEvaluator, DevSizes, build_dev_tasks
from embedders.registry import load_checkpoint
from tests.scripts import load_script


def test_each_seed_scores_its_own_sample_and_seed_0_is_trainings(shared_data, tiny_inbedder_dir):
    script = load_script("dev_noise.py")
    model = load_checkpoint(tiny_inbedder_dir, device="cpu")
    rows = script.probe(model, shared_data, [0, 1], texts=30)
    assert [r["seed"] for r in rows] == [0, 1]
    # Seed 0 is the sample training selects on; seed 1 draws other texts.
    training = DevEvaluator(shared_data, "instruction", sizes=DevSizes(clinc_texts=30))(model)
    assert rows[0]["score"] == training["score"]
    texts = [build_dev_tasks(shared_data, "instruction", DevSizes(clinc_texts=30, clinc_seed=s))[0].views()[0].texts
             for s in (0, 1)]
    assert len(texts[0]) == len(texts[1]) == 30 and texts[0] != texts[1]
    spread = script.spread(rows)
    for key in script.KEYS:
        values = [r[key] for r in rows]
        assert spread[key]["min"] == min(values) and spread[key]["max"] == max(values)
        assert spread[key]["sd"] >= 0 and min(values) <= spread[key]["mean"] <= max(values)
