"""`facet train` end to end on the shared data at toy sizes: dev selection, continuation, and
the checks on --init-from / --init-lora-from."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli

TOY = ["--batch-size", "2", "--max-length", "32", "--lora-r", "2", "--lora-targets", "q_proj", "--threads", "1",
       "--tasks", "stsb:1,sick-nli:1"]


@pytest.fixture(scope="module")
def tiny(smollm2_cut) -> list[str]:
    """Toy sizes on SmolLM2 cut to two layers (tests/conftest.py): these tests check the
    command's plumbing (selection, continuation, refusals), not what training reaches."""
    return [*TOY, "--backbone", smollm2_cut]


def _train(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["train", *args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shared_data, tiny) -> Path:
    out = tmp_path_factory.mktemp("train") / "eos"
    code, output = _train("causal-eos", "--out", str(out), "--steps", "2", "--eval-every", "1", "--dev-size", "10",
                          "--data-dir", str(shared_data), *tiny)
    assert code == 0, output
    return out


def test_training_selects_on_dev_and_saves_a_loadable_checkpoint(trained):
    log = json.loads((trained / "train_log.json").read_text())
    assert [p["step"] for p in log["dev_curve"]] == [0, 1, 2]
    assert {"stsb-dev/spearman", "scifact-dev/ndcg@10", "score"} <= set(log["dev_curve"][0])
    assert log["best"]["score"] == max(p["score"] for p in log["dev_curve"])
    assert log["weights_steps"] == log["best"]["step"] and log["mix"] == {"sick-nli": 0.5, "stsb": 0.5}
    assert "facet train causal-eos" in log["command"] and log["seconds_per_step"] > 0
    # What the run depended on below the command (torch's threads: the run's --threads 1).
    env = log["environment"]
    assert env["torch_threads"] == 1 and {"python", "torch", "facet-search"} <= set(env), env
    from embedders import load_embedder

    model = load_embedder(str(trained), device="cpu")
    assert model.config.template == "prompteol" and model.encode(["a test"]).shape == (1, 576)


def test_init_from_continues_and_counts_the_steps(trained, tmp_path, shared_data, tiny):
    before = json.loads((trained / "train_log.json").read_text())["weights_steps"]
    out = tmp_path / "more"
    code, output = _train("causal-eos", "--out", str(out), "--steps", "1", "--no-dev", "--init-from", str(trained),
                          "--data-dir", str(shared_data), *tiny)
    assert code == 0, output
    log = json.loads((out / "train_log.json").read_text())
    assert log["init_from"] == str(trained) and log["weights_steps"] == before + 1


def test_last_out_keeps_the_final_weights_beside_the_best(trained, tmp_path, shared_data, tiny):
    from embedders import load_embedder

    out, last = tmp_path / "best", tmp_path / "last"
    code, output = _train("causal-eos", "--out", str(out), "--last-out", str(last), "--steps", "2", "--eval-every",
                          "1", "--dev-size", "10", "--init-from", str(trained), "--data-dir", str(shared_data), *tiny)
    assert code == 0, output
    before = json.loads((trained / "train_log.json").read_text())["weights_steps"]
    best, final = (json.loads((d / "train_log.json").read_text()) for d in (out, last))
    assert final["weights"] == "last" and final["weights_steps"] == before + 2
    assert f"saved the last weights ({before + 2} steps in all) to {last}" in output  # it said only --out's
    assert best["weights_steps"] == before + best["best"]["step"]
    assert load_embedder(str(last), device="cpu").encode(["a test"]).shape == (1, 576)
    same = _train("causal-eos", "--out", str(out), "--last-out", str(out), "--data-dir", str(shared_data), *tiny)
    assert same[0] == 2 and "--last-out" in same[1]


def test_init_from_another_method_or_backbone_is_refused(trained, tmp_path, shared_data, tiny, smollm2_cut):
    code, output = _train("causal2vec", "--out", str(tmp_path / "x"), "--init-from", str(trained),
                          "--data-dir", str(shared_data), *tiny)
    assert code == 2 and "is a checkpoint of 'causal-eos'" in output and "--init-lora-from" in output
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--init-from", str(trained),
                          "--data-dir", str(shared_data), *tiny, "--backbone", "some/other-model")
    assert code == 2 and f"was trained on backbone '{smollm2_cut}'" in output
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--init-from", str(tmp_path / "nothing"),
                          "--data-dir", str(shared_data), *tiny)
    assert code == 3 and "no checkpoint there" in output
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--init-lora-from", str(trained),
                          "--data-dir", str(shared_data), *tiny)
    assert code == 2 and "continue it with --init-from" in output
    assert not (tmp_path / "x").exists()


def test_init_lora_from_another_method_copies_the_adapter(trained, tmp_path, shared_data, tiny, smollm2_cut):
    from safetensors.torch import load_file

    from embedders.backbone import lora_state_dict
    from embedders.registry import trainable_methods

    out = tmp_path / "g"
    code, output = _train("gircse", "--out", str(out), "--steps", "1", "--no-dev", "--init-lora-from", str(trained),
                          "--set", "train_soft_tokens=2", "--data-dir", str(shared_data), *tiny)
    assert code == 0, output
    log = json.loads((out / "train_log.json").read_text())
    assert log["init_lora_method"] == "causal-eos"
    # The copy itself, before any step: build the model the way the command does.
    from app.commands.train import _build_from_lora

    model, _ = _build_from_lora(trainable_methods()["gircse"], 32, smollm2_cut, {}, str(trained), "cpu")
    source = load_file(str(trained / "adapter.safetensors"))
    copied = lora_state_dict(model.backbone)
    assert set(source) == set(copied)
    for key, value in source.items():
        assert (copied[key].float() - value.float()).abs().max() < 1e-6


def test_set_validates_fields(tmp_path, shared_data, tiny):
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--set", "nope=1", "--data-dir",
                          str(shared_data), *tiny)
    assert code == 2 and "not a settable field" in output and "template" in output
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--set", "template=bogus", "--data-dir",
                          str(shared_data), *tiny)
    assert code == 2 and "template must be one of prompteol, eos" in output
    # The same key twice with two values: the last won without a word.
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--set", "temperature=0.1",
                          "--set", "temperature=0.2", "--data-dir", str(shared_data), *tiny)
    assert code == 2 and "--set temperature is given twice, '0.1' and '0.2': give it once" in output
    assert not (tmp_path / "x").exists()
    code, output = _train("nomethod", "--out", str(tmp_path / "x"))
    assert code == 2 and "trainable: causal-eos, causal2vec, gircse, inbedder, instemb" in output
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--dev-samples", "2", *tiny)
    assert code == 2 and "--dev-samples is for the instruction dev suite" in output
    code, output = _train("inbedder", "--out", str(tmp_path / "x"), "--dev-samples", "0", *tiny)
    assert code == 2 and "--dev-samples must be at least 1" in output
    code, output = _train("inbedder", "--out", str(tmp_path / "x"), "--grad-cache", "4", *tiny, "--tasks", "banking77")
    assert code == 2 and "--grad-cache: inbedder has no cached-gradient path" in output
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--grad-cache", "0", *tiny)
    assert code == 2 and "grad_cache must be >= 1" in output
    assert not (tmp_path / "x").exists()  # refused before anything was written


def test_the_seed_fixes_the_fresh_weights(tmp_path, shared_data, tiny):
    """Two runs of one command start from the same LoRA and head weights (the command reproduces them)."""
    from safetensors.torch import load_file

    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        code, output = _train("causal2vec", "--out", str(out), "--steps", "1", "--stop-after", "1", "--no-dev",
                              "--lr", "1e-9", "--set", "mlp_hidden=16", "--data-dir", str(shared_data), *tiny)
        assert code == 0, output
        outs.append(out)
    for file in ("adapter.safetensors", "heads.safetensors"):
        a, b = (load_file(str(o / file)) for o in outs)
        assert all((a[k].float() - b[k].float()).abs().max() == 0 for k in a), file


@pytest.mark.parametrize(("method", "flag", "value", "message"), [
    ("inbedder", "--dev-corpus", "whole", "--dev-corpus is for the corpus dev suite"),
    ("causal-eos", "--dev-corpus", "all", "--dev-corpus must be 'sample' or 'whole'"),
    ("causal-eos", "--dev-sts-pairs", "five", "--dev-sts-pairs must be 'all' or a number of pairs >= 10"),
    ("instemb", "--dev-sts-pairs", "all", "--dev-sts-pairs is for the corpus dev suite"),
])
def test_dev_options_are_checked_before_any_model_loads(tmp_path, method, flag, value, message):
    code, output = _train(method, "--out", str(tmp_path / "x"), flag, value)
    assert code == 2 and message in output
    assert not (tmp_path / "x").exists()


def test_grad_cache_trains_a_corpus_method_and_records_it(tmp_path, shared_data, tiny):
    out = tmp_path / "gc"
    args = list(tiny)
    args[args.index("--batch-size") + 1] = "4"
    code, output = _train("causal-eos", "--out", str(out), "--steps", "2", "--no-dev", "--grad-cache", "2",
                          "--data-dir", str(shared_data), *args)
    assert code == 0, output
    log = json.loads((out / "train_log.json").read_text())
    assert log["config"]["grad_cache"] == 2 and log["batch_size"] == 4 and log["steps_done"] == 2
    assert all(h["loss"] > 0 for h in log["history"])


def test_out_that_holds_other_files_is_refused_and_nothing_is_lost(tmp_path, shared_data, tiny, trained):
    """A save replaces its whole directory: --out naming a folder of the user's files deleted
    them (and a file was replaced by a checkpoint); both are refused before anything loads.
    An existing checkpoint may be replaced, as a continuation in place does."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious")
    code, output = _train("causal-eos", "--out", str(folder), "--steps", "1", "--no-dev", *tiny)
    assert code == 2 and "holds other files (notes.txt)" in output, output
    assert (folder / "notes.txt").read_text() == "precious"
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, output = _train("causal-eos", "--out", str(afile), "--steps", "1", "--no-dev", *tiny)
    assert code == 2 and "is a file" in output and afile.read_text() == "x"
    code, output = _train("causal-eos", "--out", str(tmp_path / "ok"), "--last-out", str(folder), "--steps", "1",
                          "--no-dev", *tiny)
    assert code == 2 and "--last-out" in output and "holds other files" in output
    import shutil

    again = tmp_path / "again"
    shutil.copytree(trained, again)
    code, output = _train("causal-eos", "--out", str(again), "--init-from", str(again), "--steps", "1", "--no-dev",
                          "--data-dir", str(shared_data), *tiny)
    assert code == 0, output
    mode = (again / "adapter.safetensors").stat().st_mode & 0o777
    assert mode & 0o044 == 0o044 and again.stat().st_mode & 0o055 == 0o055  # readable by others (umask 022)


def test_non_finite_numbers_and_a_damaged_config_are_refused(tmp_path, shared_data, tiny):
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--lr", "nan", "--no-dev", *tiny)
    assert code == 2 and "lr must be a positive number, got nan" in output
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--set", "temperature=inf", *tiny)
    assert code == 2 and "--set temperature='inf': expected a finite number" in output
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "facet_config.json").write_text("garbage")
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--init-from", str(damaged), *tiny)
    assert code == 4 and "facet_config.json is not valid JSON" in output and "Traceback" not in output
    assert not (tmp_path / "x").exists()


def test_a_checkpoint_without_its_config_is_damaged_not_unknown(tmp_path, trained, tiny):
    """The training exploration of the sixth session of 2026-12-05: a checkpoint folder whose
    facet_config.json was lost was "unknown embedder ...: not a registered name" (exit 2) to
    `facet embed` and `facet eval`, and "no checkpoint there" (exit 3) to --init-from, though
    its weights were there; evaluation.md gives exit 4 to a checkpoint whose config is missing."""
    import shutil

    from tests.app.cli_runner import invoke_cli

    lost = tmp_path / "lost"
    shutil.copytree(trained, lost)
    (lost / "facet_config.json").unlink()
    said = f"{lost} holds adapter.safetensors but no facet_config.json: the checkpoint is damaged"
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--init-from", str(lost), *tiny)
    assert code == 4 and said in output, output
    for args in (("embed", "-e", str(lost), "hello"), ("soup", str(lost), str(trained), "--out",
                                                        str(tmp_path / "soup"))):
        done = invoke_cli(*args)
        assert done.returncode == 4 and said in done.stderr, (args, done.returncode, done.stderr)
    done = invoke_cli("embed", "-e", str(tmp_path / "nowhere"), "hello")
    assert done.returncode == 2 and "unknown embedder" in done.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "soup").exists()


def test_a_run_that_saved_nothing_does_not_claim_a_save(tmp_path, trained):
    """Interrupted before its first save (say, during the step-0 dev evaluation), a run said
    "keeping the best checkpoint so far ... saved to OUT" with no OUT written."""
    from app.commands.train import summary

    log = json.loads((trained / "train_log.json").read_text())
    said = summary({**log, "steps_done": 0, "history": [], "stopped": "interrupted", "best": None},
                   tmp_path / "never-written")
    assert said.splitlines()[-1] == (f"nothing saved to {tmp_path / 'never-written'}: the run stopped "
                                     "before its first checkpoint")
    assert f"to {trained}" in summary(log, trained)


def test_an_interrupted_run_says_its_last_out_was_not_written(tmp_path, trained):
    """Ctrl-C or SIGTERM skips `--last-out` (an interrupt may land inside an optimizer step),
    and the summary said nothing: an earlier run's weights there read as this run's."""
    from app.commands.train import summary

    log = {**json.loads((trained / "train_log.json").read_text()), "stopped": "interrupted"}
    said = summary(log, trained, trained).splitlines()[-1]
    assert said == (f"the last weights were not saved to {trained} (it holds an earlier run's "
                    "weights): a run stopped by Ctrl-C or SIGTERM saves only its best"), said
    fresh = summary(log, trained, tmp_path / "new-last").splitlines()[-1]
    assert fresh == (f"the last weights were not saved to {tmp_path / 'new-last'}: a run stopped "
                     "by Ctrl-C or SIGTERM saves only its best"), fresh
    assert "last weights" not in summary(log, trained)  # no --last-out: nothing said


def test_a_continuation_in_place_keeps_the_runs_behind_the_weights(trained, tmp_path, shared_data, tiny):
    """`--out X --init-from X` wrote a fresh log: the history the old one held (its
    `earlier_runs`, notes, the run itself) was gone, even when the start weights were kept."""
    import shutil

    ck = tmp_path / "ck"
    shutil.copytree(trained, ck)
    log = json.loads((ck / "train_log.json").read_text())
    first = {"command": "facet train causal-eos --out ck (a first run)", "steps_done": 7}
    log.update(earlier_runs=[first], note="kept at its best dev step")
    (ck / "train_log.json").write_text(json.dumps(log))
    code, output = _train("causal-eos", "--out", str(ck), "--init-from", str(ck), "--steps", "1", "--no-dev",
                          "--data-dir", str(shared_data), *tiny)
    assert code == 0, output
    after = json.loads((ck / "train_log.json").read_text())
    assert after["earlier_runs"][0] == first
    previous = after["earlier_runs"][1]
    assert previous["command"] == log["command"] and previous["note"] == "kept at its best dev step"
    assert previous["dev_curve"] == log["dev_curve"] and "history" not in previous
    assert after["weights_steps"] == log["weights_steps"] + 1
    # What the earlier run was, not only its command and curve: its commit and machine, its
    # training and method settings (a continuation's summary dropped them).
    for key in ("environment", "config", "method_config"):
        assert previous[key] == log[key], key
    assert previous["method_config"]["max_length"] == 32 and "temperature" in previous["method_config"]
    assert after["method_config"]["temperature"] == log["method_config"]["temperature"]


def test_a_short_runs_summary_says_what_it_has(tmp_path, trained):
    """Of a run of 4 steps: "mean loss first 10 steps 3.1047 -> last 10 3.1047"; "(1 steps in
    all)"; and its s/step (the steps alone) beside seconds that hold the dev scoring too read as
    the progress bar's contradiction."""
    from app.commands.train import summary

    log = json.loads((trained / "train_log.json").read_text())
    history = [{"step": i + 1, "loss": 3.0 - i / 10} for i in range(4)]
    said = summary({**log, "history": history, "steps_done": 4, "seconds": 93.0,
                    "seconds_per_step": 8.723, "stopped": "time budget", "weights_steps": 1,
                    "best": {**log["dev_curve"][0], "step": 1}}, trained).splitlines()
    assert said[0] == ("trained causal-eos: 4 steps in 93.0s (8.723 s/step trained, dev scoring "
                       "besides, time budget); loss 3.0000 at the first step -> 2.7000 at the last"), said
    assert said[-1] == f"saved the step-1 weights (1 step in all) to {trained}", said
    many = summary({**log, "history": [{"step": i, "loss": 1.0} for i in range(20)], "steps_done": 20},
                   trained).splitlines()[0]
    assert many.endswith("mean loss first 10 steps 1.0000 -> last 10 1.0000"), many


def test_a_killed_run_behind_the_weights_is_not_recorded_as_running(tmp_path):
    """kill -9 leaves the log of the run's last save, "stopped": "running"; a continuation
    carried "running" into its history for good."""
    from app.commands.train import KILLED_RUN, _prior_runs

    (tmp_path / "train_log.json").write_text(json.dumps(
        {"command": "facet train causal-eos --out k5", "steps_done": 4, "weights_steps": 4,
         "stopped": "running", "earlier_runs": [{"stopped": "time budget"}]}))
    runs = _prior_runs(tmp_path)["earlier_runs"]
    assert [r["stopped"] for r in runs] == ["time budget", KILLED_RUN]


def test_init_from_keeps_the_checkpoints_max_length_unless_given(trained, tmp_path, shared_data, tiny):
    """--max-length defaulted to 128, which every --init-from continuation wrote into the checkpoint
    (at its step-0 save, even with no step trained): a continuation in place reset a served budget of
    96 or 256 to 128. Not given, the checkpoint's own is kept; given, it is used."""
    assert json.loads((trained / "facet_config.json").read_text())["config"]["max_length"] == 32
    i = tiny.index("--max-length")
    args = [*tiny[:i], *tiny[i + 2:]]
    kept, given = tmp_path / "kept", tmp_path / "given"
    code, output = _train("causal-eos", "--out", str(kept), "--init-from", str(trained), "--steps", "1", "--no-dev",
                          "--data-dir", str(shared_data), *args)
    assert code == 0, output
    assert json.loads((kept / "facet_config.json").read_text())["config"]["max_length"] == 32
    code, output = _train("causal-eos", "--out", str(given), "--init-from", str(trained), "--steps", "1", "--no-dev",
                          "--data-dir", str(shared_data), *args, "--max-length", "24")
    assert code == 0, output
    assert json.loads((given / "facet_config.json").read_text())["config"]["max_length"] == 24


@pytest.mark.parametrize(("args", "message"), [
    (["--time-budget-min", "0"], "--time-budget-min must be a positive number of minutes, got 0.0"),
    (["--time-budget-min", "-1"], "--time-budget-min must be a positive number of minutes, got -1.0"),
    (["--time-budget-min", "nan"], "--time-budget-min must be a positive number of minutes, got nan"),
    (["--eval-every-min", "nan"], "--eval-every-min must be a positive number of minutes, got nan"),
    (["--eval-every-min", "inf"], "--eval-every-min must be a positive number of minutes, got inf"),
    (["--teacher", "minilm", "--teacher-weight", "nan"], "--teacher-weight must be a finite number >= 0, got nan"),
    (["--teacher", "minilm", "--teacher-weight", "inf"], "--teacher-weight must be a finite number >= 0, got inf"),
    (["--teacher", "minilm", "--teacher-weight", "-1"], "--teacher-weight must be a finite number >= 0, got -1.0"),
    (["--seed", "-1"], "--seed must be between 0 and 2**32 - 1, got -1"),
    (["--batch-size", "0"], "--batch-size must be >= 2 (the other texts of a batch are its negatives), got 0"),
    (["--batch-size", "1"], "--batch-size must be >= 2 (the other texts of a batch are its negatives), got 1"),
    (["--tasks", "snli:nan,stsb"], "--tasks: weight of 'snli' must be a positive finite number, got 'nan'"),
    (["--tasks", "snli:inf"], "--tasks: weight of 'snli' must be a positive finite number, got 'inf'"),
    (["--tasks", "snli:1e309"], "--tasks: weight of 'snli' must be a positive finite number, got '1e309'"),
    (["--tasks", "snli:1e308,stsb:1e308"], "--tasks: the --tasks weights add up past the largest number"),
    (["--tasks", "nope"], "--tasks: unknown training source 'nope'"),
    # An unset variable (it trained the default mix), a source twice (the last weight won),
    # weights leaving nothing to an unweighted source (the fourth session of 2026-12-07).
    (["--tasks", ""], "--tasks is empty: name the training sources"),
    (["--tasks", " "], "--tasks is empty: name the training sources"),
    (["--tasks", "snli:0.9,stsb:0.1,snli:0.01"], "--tasks: source 'snli' is given twice"),
    (["--tasks", "snli,"], "--tasks: an empty source in 'snli,'"),
    (["--tasks", "snli:0.5,stsb:0.5,scifact"], "--tasks: the weights add up to 1, leaving no share"),
    (["--eval-every-min", "5", "--no-dev"], "--eval-every-min times the dev evaluations, and --no-dev runs none"),
    (["--lora-layers", "20-10"], "--lora-layers must be 'all' or 'A-B' with 0 <= A <= B, got '20-10'"),
])
def test_bad_numbers_are_refused_before_any_model_loads(tmp_path, args, message):
    """A time budget of 0 was ignored (all steps ran), a negative one stopped after one step and NaN
    meant none; --eval-every-min NaN/inf and --teacher-weight NaN/inf passed (the latter ending in a
    FloatingPointError traceback); --seed -1 was numpy's traceback; --batch-size 0 was refused only
    after the model and data loaded, as `batch_size`; a reversed --lora-layers range adapted every
    layer. All are refused by option name before anything loads (here: before the data root is
    even looked at, which does not exist)."""
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--data-dir", str(tmp_path / "nodata"), *args)
    assert code == 2 and message in output and "Traceback" not in output, output
    assert not (tmp_path / "x").exists()


def test_nested_out_and_last_out_or_the_current_folder_are_refused_before_anything_loads(tmp_path, monkeypatch):
    """--last-out holding --out: the end-of-run save replaced the whole --last-out folder,
    deleting the best checkpoint inside it ("nothing saved to .../best"); --out . trained, then
    failed its first save on a traceback ("PosixPath('.') has an empty name"), nothing saved.
    --tasks snli:nan passed and failed the first step once model and data had loaded."""
    nest = tmp_path / "nest"
    for args in ((["--out", str(nest / "best"), "--last-out", str(nest)]),
                 (["--out", str(nest), "--last-out", str(nest / "sub" / "last")])):
        code, output = _train("causal-eos", *args, "--data-dir", str(tmp_path / "nodata"))
        assert code == 2 and "must not hold one another" in output and "Traceback" not in output, output
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    for args, flag in ((["--out", "."], "--out"), (["--out", ".."], "--out"),
                       (["--out", "../elsewhere", "--last-out", "."], "--last-out")):
        code, output = _train("causal-eos", *args, "--data-dir", str(tmp_path / "nodata"))
        assert code == 2 and f"{flag} " in output and "is the current folder or holds it" in output, output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here"] and not any((tmp_path / "here").iterdir())


def test_an_out_that_cannot_be_written_is_refused_before_anything_loads(tmp_path):
    """An --out or --last-out that cannot be written (under /proc, under a file) was found at save
    time, as a traceback; for --last-out after the whole run, losing its end weights."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    for args, flag in ((["--out", "/proc/facet-no/ck"], "--out"),
                       (["--out", str(afile / "ck")], "--out"),
                       (["--out", str(tmp_path / "ok"), "--last-out", "/proc/facet-no"], "--last-out")):
        code, output = _train("causal-eos", *args, "--data-dir", str(tmp_path / "nodata"))
        assert code == 2 and f"{flag} " in output and "cannot be written" in output, output
    assert afile.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_an_existing_checkpoint_in_out_is_kept_unless_continued_or_forced(trained, tmp_path):
    """--out replaced an existing checkpoint without asking, at the step-0 save within seconds, even
    one of another method (a Causal-EOS adapter replaced by an untrained Causal2Vec). It is refused
    unless it is the --init-from checkpoint (continuing in place) or --force is given."""
    import shutil

    victim = tmp_path / "victim"
    shutil.copytree(trained, victim)
    nodata = str(tmp_path / "nodata")
    code, output = _train("causal2vec", "--out", str(victim), "--data-dir", nodata)
    assert code == 2 and "already holds a 'causal-eos' checkpoint (training 'causal2vec')" in output, output
    code, output = _train("causal-eos", "--out", str(victim), "--data-dir", nodata)
    assert code == 2 and "already holds a 'causal-eos' checkpoint" in output and "--force" in output, output
    code, output = _train("causal-eos", "--out", str(victim), "--init-from", str(trained), "--data-dir", nodata)
    assert code == 2 and "already holds" in output  # continuing ANOTHER checkpoint into it replaces it too
    # Past the check (to the missing data root): in place, or forced.
    for args in (["--init-from", str(victim)], ["--force"]):
        code, output = _train("causal-eos", "--out", str(victim), *args, "--data-dir", nodata)
        assert code == 3 and "datasets not found" in output, output
    assert (victim / "adapter.safetensors").read_bytes() == (trained / "adapter.safetensors").read_bytes()


def test_a_last_out_holding_another_methods_checkpoint_is_kept_unless_forced(trained, tmp_path):
    """--last-out replaced any checkpoint at the run's end without a word, even one of another
    method (`--last-out checkpoints/gircse` for a typo replaced the shipped GIRCSE). Another
    method's, or one whose method cannot be read, is refused unless --force; one of the same
    method is the run's last weights, replaced as before."""
    import shutil

    victim = tmp_path / "victim"
    shutil.copytree(trained, victim)
    nodata = str(tmp_path / "nodata")
    common = ["--out", str(tmp_path / "new"), "--last-out", str(victim), "--data-dir", nodata]
    code, output = _train("causal2vec", *common)
    assert code == 2 and f"--last-out {victim} already holds a 'causal-eos' checkpoint (training " \
        "'causal2vec')" in " ".join(output.split()) and "--force" in output, output
    # Past the check (to the missing data root): the same method, or forced.
    for method, args in (("causal-eos", []), ("causal2vec", ["--force"])):
        code, output = _train(method, *common, *args)
        assert code == 3 and "datasets not found" in output, output
    (victim / "facet_config.json").write_text("{not json")
    code, output = _train("causal-eos", *common)
    assert code == 2 and "whose method cannot be read" in output, output
    assert (victim / "adapter.safetensors").read_bytes() == (trained / "adapter.safetensors").read_bytes()


def test_lora_r_0_with_nothing_else_to_train_is_a_clean_error(tmp_path, shared_data, tiny):
    """--lora-r 0 ("frozen LLM") for Causal-EOS, which has no heads, left nothing to train: a
    ValueError traceback once the model and the data had loaded."""
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--no-dev", "--data-dir", str(shared_data),
                          *tiny, "--lora-r", "0")
    assert code == 2 and "causal-eos has nothing to train with --lora-r 0" in output, output
    assert "Traceback" not in output and not (tmp_path / "x").exists()


@pytest.mark.parametrize("layers", ["40-41", "1-5"])
def test_lora_layers_past_the_backbone_are_refused_before_it_loads(tmp_path, smollm2_cut, layers):
    """A range wholly past the backbone's layers was peft's raw "Target modules {'q_proj'} not found
    in the base model" once the model had loaded; one partly past them (1-5 of 2 layers) trained
    layer 1 alone and saved layers 1-5 in the config. Both are refused from the backbone's config,
    by option name and layer count, before the data root is even looked at (it does not exist)."""
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--data-dir", str(tmp_path / "nodata"),
                          *TOY, "--backbone", smollm2_cut, "--lora-layers", layers)
    assert code == 2 and "Traceback" not in output, output
    assert f"--lora-layers {layers} is past the last layer of backbone" in output and "2 layers (0-1)" in output
    assert not (tmp_path / "x").exists()
    code, output = _train("causal-eos", "--out", str(tmp_path / "x"), "--data-dir", str(tmp_path / "nodata"),
                          *TOY, "--backbone", smollm2_cut, "--lora-layers", "0-1")
    assert code == 3 and "datasets not found" in output, output  # the last layer itself is fine


@pytest.mark.parametrize(("method", "refused"), [
    ("causal-eos", True), ("gircse", True), ("inbedder", True), ("causal2vec", False), ("instemb", False)])
def test_lora_r_0_is_refused_up_front_for_methods_with_no_heads_to_train(tmp_path, method, refused):
    """--lora-r 0 left nothing to train for the methods with no heads of their own, and was refused
    only once the model had loaded. Causal2Vec (its projector) and InStEmb (its look-ahead
    embeddings) still train with a frozen LLM: they pass the check (to the missing data root)."""
    code, output = _train(method, "--out", str(tmp_path / "x"), "--data-dir", str(tmp_path / "nodata"),
                          "--lora-r", "0")
    if refused:
        assert code == 2 and f"{method} has nothing to train with --lora-r 0" in output, output
    else:
        assert code == 3 and "datasets not found" in output, output
    assert "Traceback" not in output and not (tmp_path / "x").exists()


def test_a_log_write_killed_midway_does_not_block_a_continuation_in_place(trained, tmp_path, shared_data, tiny):
    """A run killed while replacing its log (the not-improved path writes it inside the checkpoint)
    leaves `.train_log.json.tmp` there; the next `--init-from X --out X` refused X as holding
    "other files" that the save would delete."""
    import shutil

    ck = Path(shutil.copytree(trained, tmp_path / "ck"))
    before = json.loads((ck / "train_log.json").read_text())["weights_steps"]
    (ck / ".train_log.json.tmp").write_text('{"method": "causal-eos", "hist')  # cut mid-write
    code, output = _train("causal-eos", "--out", str(ck), "--init-from", str(ck), "--steps", "1", "--no-dev",
                          "--data-dir", str(shared_data), *tiny)
    assert code == 0, output
    assert json.loads((ck / "train_log.json").read_text())["weights_steps"] == before + 1
    assert not (ck / ".train_log.json.tmp").exists()


def test_a_checkpoint_a_killed_swap_left_aside_is_refused_as_existing(trained, tmp_path):
    """A kill between a save's two renames leaves the checkpoint as `.NAME.old` and no `--out`:
    the check found no checkpoint there and the run (recovering it only later) replaced it
    without --force. It is put back first, then refused like any existing checkpoint."""
    import shutil

    aside = tmp_path / ".victim.old"
    shutil.copytree(trained, aside)
    code, output = _train("causal-eos", "--out", str(tmp_path / "victim"), "--data-dir", str(tmp_path / "nodata"))
    assert code == 2 and "already holds a 'causal-eos' checkpoint" in output and "--force" in output, output
    assert not aside.exists()
    restored = tmp_path / "victim" / "adapter.safetensors"
    assert restored.read_bytes() == (trained / "adapter.safetensors").read_bytes()


def test_a_relative_backbone_folder_is_saved_absolute_and_loads_from_anywhere(tmp_path, shared_data, smollm2_cut,
                                                                              monkeypatch):
    from embedders import load_embedder

    folder = Path(smollm2_cut)
    monkeypatch.chdir(folder.parent)
    out = tmp_path / "rel"
    code, output = _train("causal-eos", "--out", str(out), "--steps", "1", "--no-dev", "--data-dir", str(shared_data),
                          *TOY, "--backbone", folder.name)
    assert code == 0, output
    config = json.loads((out / "facet_config.json").read_text())["config"]
    assert config["backbone"] == str(folder.resolve())  # it was saved as typed: loadable only from there
    monkeypatch.chdir(tmp_path)
    assert load_embedder(str(out), device="cpu").encode(["a test"]).shape == (1, 576)
    # Continuing it with the folder named relative from elsewhere is the same backbone.
    monkeypatch.chdir(folder.parent.parent)
    code, output = _train("causal-eos", "--out", str(tmp_path / "more"), "--steps", "1", "--no-dev", "--init-from",
                          str(out), "--data-dir", str(shared_data), *TOY, "--backbone",
                          str(Path(folder.parent.name) / folder.name))
    assert code == 0, output


def test_training_questions_that_leave_no_room_are_left_out_and_logged(tmp_path, shared_data, tiny, caplog):
    """At --max-length 40 an InBedder run stopped at the first long SQuAD question ("the
    instruction is too long for this embedder ... shorten the instruction")."""
    out = tmp_path / "inb"
    with caplog.at_level("WARNING", logger="app.commands.train"):
        code, output = _train("inbedder", "--out", str(out), "--steps", "3", "--no-dev", "--data-dir",
                              str(shared_data), *tiny, "--max-length", "40", "--tasks", "squad,banking77")
    assert code == 0, output
    left_out = json.loads((out / "train_log.json").read_text())["left_out"]
    assert set(left_out) == {"squad"} and left_out["squad"] > 0
    assert f"the examples asking them are left out (squad: {left_out['squad']:,}); --max-length" in caplog.text
    # None left: refused before training, with the --max-length that keeps them.
    code, output = _train("instemb", "--out", str(tmp_path / "none"), "--steps", "1", "--no-dev", "--data-dir",
                          str(shared_data), *tiny, "--max-length", "20", "--tasks", "banking77")
    assert code == 2 and ("--max-length 20 leaves no room for the text under any training question of the mix: "
                          "use --max-length") in output, output
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(("method", "suite_instruction"), [("instemb", "CLINC domain"),
                                                           ("causal-eos", "SciFact query")])
def test_a_max_length_the_dev_suites_instructions_leave_no_room_under_is_refused_up_front(
        method, suite_instruction, tmp_path, shared_data, tiny):
    """`facet train instemb --max-length 28` with dev on trained, then stopped at its first
    CLINC dev evaluation: "the instruction is too long for this embedder ... shorten the
    instruction", an instruction the user never gave. Refused before the data loads, with the
    --max-length that leaves the text 16 tokens; one token of room trains and evaluates."""
    tasks = ["--tasks", "banking77"] if method == "instemb" else []
    code, output = _train(method, "--out", str(tmp_path / "short"), "--steps", "1", "--data-dir",
                          str(shared_data), *tiny, "--max-length", "20", *tasks)
    assert code == 2, output
    said = re.search(rf"--max-length 20 leaves no room for text under the dev suite's instructions \(the "
                     rf"longest, {suite_instruction}'s, takes (\d+) tokens with the template(?:, and (\d+) "
                     r"more are reserved)?\): use "
                     r"--max-length (\d+) or more, or --no-dev", " ".join(output.split()))
    assert said, output
    assert not (tmp_path / "short").exists()
    cost, reserved, advised = int(said.group(1)), int(said.group(2) or 0), int(said.group(3))
    assert advised == cost + reserved + 16
    cost += reserved
    # Exactly the prompt's length is refused; one more token (the text's) trains and evaluates.
    code, output = _train(method, "--out", str(tmp_path / "full"), "--steps", "1", "--data-dir",
                          str(shared_data), *tiny, "--max-length", str(cost), *tasks)
    assert code == 2 and f"--max-length {cost} leaves no room for text under the dev suite's" in output, output
    dev = ["--dev-size", "10", *(["--dev-samples", "1"] if method == "instemb" else [])]
    code, output = _train(method, "--out", str(tmp_path / "room"), "--steps", "1", "--data-dir",
                          str(shared_data), *tiny, "--max-length", str(cost + 1), *tasks, *dev)
    assert code == 0, output
    assert json.loads((tmp_path / "room" / "train_log.json").read_text())["dev_curve"], output


def test_continuing_a_checkpoint_that_recorded_its_backbone_relative_records_it_absolute(
        trained, tmp_path, shared_data, smollm2_cut, monkeypatch):
    """A checkpoint of before 2026-12-05 recorded `--backbone cut` as typed; its continuation
    kept the relative name, loadable only from that folder."""
    import shutil

    folder = Path(smollm2_cut)
    old = tmp_path / "old"
    shutil.copytree(trained, old)
    meta = json.loads((old / "facet_config.json").read_text())
    meta["config"]["backbone"] = folder.name  # as recorded then
    (old / "facet_config.json").write_text(json.dumps(meta))
    monkeypatch.chdir(folder.parent)
    out = tmp_path / "cont"
    code, output = _train("causal-eos", "--out", str(out), "--steps", "1", "--no-dev", "--init-from", str(old),
                          "--data-dir", str(shared_data), *TOY, "--backbone", folder.name)
    assert code == 0, output
    assert json.loads((out / "facet_config.json").read_text())["config"]["backbone"] == str(folder.resolve())
    # From another folder, the same folder named by its absolute path is the same backbone (it
    # was refused: "trained on backbone 'cut', not '/.../cut'").
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, output = _train("causal-eos", "--out", str(tmp_path / "cont2"), "--steps", "1", "--no-dev", "--init-from",
                          str(old), "--data-dir", str(shared_data), *TOY, "--backbone", str(folder.resolve()))
    assert code == 0, output
    # Another folder is still another backbone.
    other = tmp_path / "other" / "x"
    shutil.copytree(folder, other)
    code, output = _train("causal-eos", "--out", str(tmp_path / "cont3"), "--steps", "1", "--no-dev", "--init-from",
                          str(old), "--data-dir", str(shared_data), *TOY, "--backbone", str(other))
    assert code == 2 and f"was trained on backbone {folder.name!r}, not {str(other)!r}" in output, output
