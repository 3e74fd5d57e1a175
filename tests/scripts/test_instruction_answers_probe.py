"""scripts/instruction_answers_probe.py: answers under each CLINC instruction, as clusters."""

from __future__ import annotations

from sklearn.metrics import v_measure_score

from app.evaluation import loaders
from embedders.registry import load_checkpoint
from tests.scripts import load_script


def test_answers_are_scored_as_clusters_against_both_labelings(shared_data, tiny_inbedder_dir):
    script = load_script("instruction_answers_probe.py")
    model = load_checkpoint(tiny_inbedder_dir, device="cpu")
    result = script.probe(model, shared_data, texts=12, max_new_tokens=2)
    views = loaders.build_clinc_multiview(shared_data / "clinc150" / "data_full.json",
                                          shared_data / "clinc150" / "domains.json", split="val", n=12, seed=0)
    assert sorted(result) == sorted(v.name for v in views) == ["domain", "intent"]
    for view in views:
        row = result[view.name]
        assert row["instruction"] == view.instruction
        # The examples are the sample's first texts with this instruction's own answers.
        answers = model.generate_answers(views[0].texts, view.instruction, max_new_tokens=2)
        assert row["examples"] == [[t, a] for t, a in zip(views[0].texts[:8], answers[:8], strict=True)]
        assert row["distinct_answers"] == len(set(answers))
        ids = {a: i for i, a in enumerate(sorted(set(answers)))}
        for labels in views:
            expected = round(100 * v_measure_score(labels.labels, [ids[a] for a in answers]), 2)
            assert row[f"v_vs_{labels.name}"] == expected
