"""scripts/dev_score.py: a checkpoint scored on its own method's dev suite, as training scores it."""

from __future__ import annotations

import json

import pytest

from app.evaluation.dev import DevEvaluator, DevSizes
from embedders.registry import load_checkpoint
from tests.scripts import load_script


def test_each_checkpoint_gets_its_methods_dev_suite_and_trainings_scores(shared_data, tiny_inbedder_dir, smollm2_cut,
                                                                         tmp_path, capsys):
    from embedders.backbone import LoraSettings
    from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder

    corpus_dir = CausalEOSEmbedder(CausalEOSConfig(lora=LoraSettings(r=2, target_modules=("q_proj",)),
                                                   backbone=smollm2_cut, max_length=32),
                                   device="cpu").save(tmp_path / "eos")
    script = load_script("dev_score.py")
    out = tmp_path / "rows.jsonl"
    assert script.main([str(corpus_dir), str(tiny_inbedder_dir), "--dev-size", "10", "--out", str(out),
                        "--data-dir", str(shared_data)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["suite"] for r in rows] == ["corpus", "instruction"]
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == rows
    # Each row says when, how and on what it was scored (dev-probe rows had no date).
    from datetime import UTC, datetime, timedelta

    for row in rows:
        assert abs(datetime.fromisoformat(row["created"]) - datetime.now(UTC)) < timedelta(minutes=30), row
        assert row["command"].startswith("scripts/dev_score.py ") and "--dev-size 10" in row["command"], row
        assert row["environment"]["torch_threads"] >= 1 and "facet-search" in row["environment"], row
    sizes = DevSizes(sts_pairs=10, scifact_queries=10, scifact_docs=10, clinc_texts=10)
    for row, path, suite in ((rows[0], corpus_dir, "corpus"), (rows[1], tiny_inbedder_dir, "instruction")):
        expected = DevEvaluator(shared_data, suite, sizes=sizes)(load_checkpoint(path, device="cpu"))
        assert row["dev"]["score"] == expected["score"]


def test_a_bad_sts_pair_count_is_a_usage_error_before_any_model_loads(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_script("dev_score.py").main(["no-such-checkpoint", "--dev-sts-pairs", "3"])
    assert exit_info.value.code == 2
    assert "--dev-sts-pairs must be 'all' or a number of pairs >= 10" in capsys.readouterr().err


def test_an_untrained_embedder_is_scored_on_the_suite_named_and_averaged_over_samples(shared_data,
                                                                                      capsys):
    """`--suite` scores an embedder whose method declares no dev suite (minilm: it was refused,
    "not a checkpoint of a trainable method"), and `--clinc-samples N` averages seeds 0..N-1."""
    script = load_script("dev_score.py")
    with pytest.raises(SystemExit) as exit_info:
        script.main(["minilm", "--dev-size", "10", "--data-dir", str(shared_data)])
    assert "name one with --suite" in str(exit_info.value.code)
    assert script.main(["minilm", "--suite", "instruction", "--dev-size", "10", "--clinc-samples", "2",
                        "--data-dir", str(shared_data)]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["suite"] == "instruction"
    sizes = DevSizes(sts_pairs=10, scifact_queries=10, scifact_docs=10, clinc_texts=10, clinc_samples=2)
    from embedders.registry import load_embedder

    expected = DevEvaluator(shared_data, "instruction", sizes=sizes)(load_embedder("minilm", device="cpu"))
    assert row["dev"]["score"] == expected["score"] and "clinc-dev-s1/hmean" in row["dev"]
