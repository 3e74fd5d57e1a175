"""scripts/instemb_target_probe.py: student look-ahead vs the teacher's answer targets, per instruction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from app.evaluation.tasks import kmeans_v_measure
from embedders.backbone import LoraSettings
from embedders.methods.instemb import InstEmbConfig, InstEmbEmbedder
from embedders.training.instruct_data import banking77_area
from tests.scripts import load_script


@pytest.fixture(scope="module")
def model(smollm2_cut):
    torch.manual_seed(0)
    m = InstEmbEmbedder(InstEmbConfig(lora=LoraSettings(r=2, target_modules=("q_proj",)), max_length=64,
                                      look_ahead=2, backbone=smollm2_cut), device="cpu")
    m.eval()
    return m


@pytest.mark.parametrize(("data", "names"), [("banking77", ["intent", "area"]), ("clinc", ["intent", "domain"])])
def test_each_instruction_is_scored_on_both_labelings(model, shared_data, data, names):
    script = load_script("instemb_target_probe.py")
    texts, labelled = script.views(shared_data, data, 16, 0)
    assert [v["name"] for v in labelled] == names and len(texts) == 16
    if data == "banking77":  # the coarse answer is the fine one's banking area
        assert labelled[1]["answers"] == [banking77_area(a.replace(" ", "_")) for a in labelled[0]["answers"]]
    result = script.probe(model, shared_data, data=data, texts=16)
    assert sorted(result["views"]) == sorted(names)
    for view in labelled:
        row = result["views"][view["name"]]
        assert row["k"] == len(set(view["labels"]))
        assert set(row["clusters"]) == {"student last input", "student look-ahead", "student daap",
                                        "teacher target (reads the gold answer)"}
        # The teacher row is the k-means V-measure of the mean target state, for either labeling.
        _, target, _ = model.teacher_states(texts, [view["instruction"]] * 16, view["answers"])
        x = F.normalize(target.float().mean(1), dim=-1).detach().numpy().astype(np.float32)
        for other in labelled:
            expected = round(100 * kmeans_v_measure(x, other["labels"], script.KMEANS_SEEDS)[0], 2)
            teacher_row = row["clusters"]["teacher target (reads the gold answer)"]
            assert teacher_row[other["name"]] == pytest.approx(expected, abs=0.01)
        # Raw and centred cosines are those of the look-ahead states against their targets.
        look = model.student_states(texts, [view["instruction"]] * 16).look_ahead.float().detach()
        t = target.float()
        assert row["cosine"]["raw"] == pytest.approx(float(F.cosine_similarity(look, t, dim=-1).mean()), abs=1e-3)
        centred = F.cosine_similarity(look - look.mean((0, 1)), t - t.mean((0, 1)), dim=-1).mean()
        assert row["cosine"]["centred"] == pytest.approx(float(centred), abs=1e-3)
