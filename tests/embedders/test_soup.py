"""Model soups (``embedders.training.soup`` and ``facet soup``): the stored adapter is the
weighted average of the ingredients' LoRA updates, heads are averaged, mismatches are refused.

Real checkpoints over SmolLM2 cut to two layers (tests/conftest.py), their LoRA factors set
to seeded random values so the updates are not zero as a fresh adapter's are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from app.cli import cli
from embedders.errors import CheckpointError, InvalidInputError
from embedders.training.soup import make_soup


def _checkpoint(root: Path, name: str, seed: int, backbone: str, method: str = "causal2vec", **config) -> Path:
    from embedders.backbone import LoraSettings
    from embedders.registry import trainable_methods

    spec = trainable_methods()[method]
    lora = LoraSettings(r=2, alpha=4, target_modules=("q_proj", "v_proj"))
    config = spec.model_class.config_class(lora=lora, backbone=backbone, max_length=32, **config)
    model = spec.model_class(config, device="cpu")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param_name, param in [*model.backbone.model.named_parameters(), *model.heads.named_parameters()]:
            if "lora_" in param_name or param in set(model.heads.parameters()):
                param.copy_(0.05 * torch.randn(param.shape, generator=generator))
    return model.save(root / name)


def _updates(path: Path) -> dict[str, torch.Tensor]:
    """Each adapted weight's LoRA update (scale * B @ A) as saved."""
    lora = json.loads((path / "facet_config.json").read_text())["config"]["lora"]
    state = load_file(str(path / "adapter.safetensors"))
    return {k: lora["alpha"] / lora["r"] * state[k.replace("lora_A", "lora_B")].float() @ state[k].float()
            for k in state if "lora_A" in k}


@pytest.fixture(scope="module")
def pair(tmp_path_factory, smollm2_cut) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("soup")
    return _checkpoint(root, "a", 1, smollm2_cut), _checkpoint(root, "b", 2, smollm2_cut)


def test_the_exact_rank_soup_stores_the_weighted_average_of_the_updates_and_heads(pair, tmp_path):
    a, b = pair
    report = make_soup([a, b], tmp_path / "soup", weights=[3, 1], rank=4)
    assert report.exact_rank == 4 and report.rank == 4 and report.energy_kept > 0.9999 and report.duplicates == []
    assert report.weights == [0.75, 0.25] and report.modules == 4  # q and v in two layers
    ua, ub, us = _updates(a), _updates(b), _updates(tmp_path / "soup")
    for key in ua:
        expected = 0.75 * ua[key] + 0.25 * ub[key]
        assert torch.allclose(us[key], expected, atol=2e-3 * expected.abs().max().item()), key
    ha, hb, hs = (load_file(str(p / "heads.safetensors")) for p in (a, b, tmp_path / "soup"))
    assert set(hs) == set(ha)
    for key in ha:
        assert torch.allclose(hs[key].float(), 0.75 * ha[key].float() + 0.25 * hb[key].float(), atol=1e-3)
    meta = json.loads((tmp_path / "soup" / "facet_config.json").read_text())
    assert meta["config"]["lora"]["r"] == 4 and meta["config"]["lora"]["alpha"] == 8  # the scale (2) is kept
    log = json.loads((tmp_path / "soup" / "train_log.json").read_text())
    assert log["soup"]["ingredients"] == [str(a), str(b)]


def test_a_truncated_soup_keeps_the_rank_and_reports_what_it_lost(pair, tmp_path):
    from embedders import load_embedder

    report = make_soup(list(pair), tmp_path / "soup")  # rank 2 of an exact rank 4
    assert report.rank == 2 and report.exact_rank == 4 and 0.3 < report.energy_kept < 1.0
    vectors = load_embedder(str(tmp_path / "soup"), device="cpu").encode(["a soup"])
    assert vectors.shape[0] == 1 and torch.isfinite(torch.as_tensor(vectors)).all()


def test_a_soup_of_one_checkpoint_with_itself_is_that_checkpoint(pair, tmp_path):
    from embedders import load_embedder

    a = pair[0]
    report = make_soup([a, a], tmp_path / "same")
    assert report.energy_kept > 0.9999 and report.duplicates == [[0, 1]]
    texts = ["one sentence", "and another one"]
    before = load_embedder(str(a), device="cpu").encode(texts)
    after = load_embedder(str(tmp_path / "same"), device="cpu").encode(texts)
    assert (before * after).sum(-1).min() > 0.999


def test_mismatched_ingredients_are_refused_before_anything_is_written(pair, tmp_path, smollm2_cut):
    a, b = pair
    other_method = _checkpoint(tmp_path, "eos", 3, smollm2_cut, method="causal-eos")
    with pytest.raises(InvalidInputError, match="one method"):
        make_soup([a, other_method], tmp_path / "x")
    other_template = _checkpoint(tmp_path, "eos-template", 5, smollm2_cut, template="eos")
    with pytest.raises(InvalidInputError, match="template"):
        make_soup([a, other_template], tmp_path / "x")
    with pytest.raises(CheckpointError, match="at least two"):
        make_soup([a], tmp_path / "x")
    with pytest.raises(CheckpointError, match="one of the ingredients"):
        make_soup([a, b], b)
    with pytest.raises(ValueError, match="weights"):
        make_soup([a, b], tmp_path / "x", weights=[1.0])
    with pytest.raises(ValueError, match="non-negative"):
        make_soup([a, b], tmp_path / "x", weights=[1.0, -1.0])
    assert not (tmp_path / "x").exists()


def test_facet_soup_writes_a_checkpoint_and_refuses_bad_input(pair, tmp_path):
    a, b = pair
    runner = CliRunner()
    result = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "s"), "--weights", "1,1"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["weights"] == [0.5, 0.5] and "counts twice" not in result.output
    twice = runner.invoke(cli, ["soup", str(a), str(a), "--out", str(tmp_path / "aa")])
    assert twice.exit_code == 0 and "counts twice" in twice.output
    again = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "s")])
    assert again.exit_code == 2 and "--force" in again.output
    forced = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "s"), "--rank", "4", "--force"])
    assert forced.exit_code == 0, forced.output
    assert json.loads((tmp_path / "s" / "facet_config.json").read_text())["config"]["lora"]["r"] == 4
    missing = runner.invoke(cli, ["soup", str(a), str(tmp_path / "nowhere"), "--out", str(tmp_path / "t")])
    assert missing.exit_code == 3 and "no checkpoint" in missing.output
    bad = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "t"), "--weights", "1,x"])
    assert bad.exit_code == 2 and "comma-separated" in bad.output
    # Each finite, their sum not: normalised to zeros, it wrote a zero soup and called it fine.
    huge = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "t"), "--weights", "1e308,1e308"])
    assert huge.exit_code == 2 and "too large to add up" in huge.output
    inf = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "t"), "--weights", "inf,1"])
    assert inf.exit_code == 2 and "must be finite numbers" in inf.output
    # A slip said as one (exit 2), not taken as something else: one ingredient was a checkpoint
    # error (exit 4), an empty --weights the uniform default.
    alone = runner.invoke(cli, ["soup", str(a), "--out", str(tmp_path / "t")])
    assert alone.exit_code == 2 and "at least two checkpoints; 1 given" in alone.output, alone.output
    for empty in ("", " "):
        blank = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "t"), "--weights", empty])
        assert blank.exit_code == 2 and "comma-separated" in blank.output, blank.output
    (tmp_path / "afile").write_text("x")
    into_file = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "afile")])
    assert into_file.exit_code == 2 and "is a file" in into_file.output
    assert not (tmp_path / "t").exists()
    assert (tmp_path / "s" / "adapter.safetensors").stat().st_mode & 0o044 == 0o044  # not 0600


def test_a_different_served_budget_is_reported_and_the_first_ones_kept(pair, tmp_path, smollm2_cut):
    """A shipped checkpoint serves the budget chosen on dev (256) while a run continued from it
    says the 96 it trained at: the weights are comparable, so the soup is made at the first's."""
    a, _ = pair
    longer = _checkpoint(tmp_path, "long", 4, smollm2_cut)
    meta = json.loads((longer / "facet_config.json").read_text())
    meta["config"]["max_length"] = 64
    (longer / "facet_config.json").write_text(json.dumps(meta))
    report = make_soup([longer, a], tmp_path / "soup")
    assert report.config_differences["max_length"] == [64, 32]
    assert json.loads((tmp_path / "soup" / "facet_config.json").read_text())["config"]["max_length"] == 64


def test_a_rank_past_the_exact_average_is_refused_and_the_steps_behind_are_kept(pair, tmp_path):
    """--rank 500 wrote a 101 MB adapter of zero directions (rank 16's vectors) and a huge
    rank ran for minutes; `facet train --init-from` a soup counted 0 steps behind it."""
    import shutil

    with pytest.raises(ValueError, match="over the exact average's rank, 4"):
        make_soup(list(pair), tmp_path / "big", rank=5)
    assert not (tmp_path / "big").exists()
    a, b = (Path(shutil.copytree(p, tmp_path / p.name)) for p in pair)
    (a / "train_log.json").write_text(json.dumps({"weights_steps": 120}))
    (b / "train_log.json").write_text(json.dumps({"steps_done": 200}))
    make_soup([a, b], tmp_path / "soup")
    log = json.loads((tmp_path / "soup" / "train_log.json").read_text())
    assert log["weights_steps"] == 200


def test_a_soup_that_fails_midway_leaves_the_old_checkpoint_whole(pair, tmp_path, monkeypatch):
    """`facet soup --force` deleted the old checkpoint's files first and wrote the new ones in place:
    a kill or a full disk midway left neither (no config: not even a checkpoint). It is now written
    beside and swapped in like a training save. The failure is injected (a disk that fills after
    the adapter is written): a real kill at the right moment cannot be timed in a test."""
    import errno

    import embedders.training.soup as soup_module

    a, b = pair
    out = tmp_path / "soup"
    make_soup([a, b], out)
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    real_save = soup_module.save_file

    def save_then_fill_the_disk(tensors, filename, *args, **kwargs):
        real_save(tensors, filename, *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(soup_module, "save_file", save_then_fill_the_disk)
    with pytest.raises(OSError, match="No space left"):
        make_soup([a, b], out, rank=4)
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["soup"]  # no partial write left behind


def test_facet_soup_never_replaces_an_ingredient_other_files_or_an_unforced_checkpoint(pair, tmp_path):
    """--out naming an ingredient was first told to pass --force (which then refused it anyway);
    a folder holding other files got the soup's files mixed in (now the whole folder is swapped,
    which would delete them); a checkpoint left as `.NAME.old` by a soup killed between its
    renames was replaced without --force."""
    import shutil

    a, b = pair
    runner = CliRunner()
    ingredient = Path(shutil.copytree(b, tmp_path / "b"))
    before = {f.name: f.read_bytes() for f in ingredient.iterdir()}
    for extra in ([], ["--force"]):
        result = runner.invoke(cli, ["soup", str(a), str(ingredient), "--out", str(ingredient), *extra])
        assert result.exit_code == 2 and "is one of the ingredients" in result.output, result.output
        assert "--force" not in result.output
    assert {f.name: f.read_bytes() for f in ingredient.iterdir()} == before
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    result = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(notes), "--force"])
    assert result.exit_code == 2 and "holds other files (todo.txt)" in result.output, result.output
    assert [p.name for p in notes.iterdir()] == ["todo.txt"]
    with pytest.raises(CheckpointError, match="holds one of the ingredients"):  # the folder above one
        make_soup([a, ingredient], tmp_path)
    made = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "s")])
    assert made.exit_code == 0, made.output
    (tmp_path / "s").rename(tmp_path / ".s.old")  # killed between the swap's two renames
    again = runner.invoke(cli, ["soup", str(a), str(b), "--out", str(tmp_path / "s")])
    assert again.exit_code == 2 and "already holds a checkpoint" in again.output, again.output
    assert (tmp_path / "s" / "facet_config.json").is_file()


def _copy_with(src: Path, dst: Path, *, adapter=None, heads=None, lora=None) -> Path:
    """``src`` copied to ``dst`` with its adapter tensors, heads or LoRA config changed."""
    import shutil

    from safetensors.torch import save_file

    shutil.copytree(src, dst)
    if adapter is not None:
        state = load_file(str(dst / "adapter.safetensors"))
        save_file({k: adapter(k, v).contiguous() for k, v in state.items()}, str(dst / "adapter.safetensors"))
    if heads is not None:
        state = load_file(str(dst / "heads.safetensors"))
        save_file({k: heads(v).contiguous() for k, v in state.items()}, str(dst / "heads.safetensors"))
    if lora is not None:
        meta = json.loads((dst / "facet_config.json").read_text())
        meta["config"]["lora"].update(lora)
        (dst / "facet_config.json").write_text(json.dumps(meta))
    return dst


def test_factors_of_another_width_or_rank_are_refused_naming_the_module(pair, tmp_path):
    """Another backbone's adapter ended in torch.cat's RuntimeError traceback; a config whose r
    disagreed with its tensors was averaged at the wrong scale, exit 0."""
    a, b = pair
    wider = _copy_with(b, tmp_path / "wider", adapter=lambda k, v: torch.cat(
        [v, v[:, :1]], dim=1) if ".lora_A." in k else v)
    with pytest.raises(InvalidInputError, match=r"adapts a \d+ -> \d+ weight where .* a soup needs "
                                              "checkpoints of the same backbone"):
        make_soup([a, wider], tmp_path / "x")
    edited = _copy_with(b, tmp_path / "edited", lora={"r": 4, "alpha": 8})
    with pytest.raises(CheckpointError, match=r"not of the rank its facet_config.json gives \(r=4\)"):
        make_soup([a, edited], tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_the_same_adapter_with_other_heads_is_no_duplicate(pair, tmp_path):
    a, _ = pair
    same = _copy_with(a, tmp_path / "same")
    other_heads = _copy_with(a, tmp_path / "other-heads", heads=lambda v: v.float().mul(2).half())
    assert make_soup([a, same], tmp_path / "s1", rank=4).duplicates == [[0, 1]]
    assert make_soup([a, other_heads], tmp_path / "s2", rank=4).duplicates == []
    # The first match of adapter alone (a) has other heads: the true duplicate after it is found.
    again = _copy_with(other_heads, tmp_path / "again")
    assert make_soup([a, other_heads, again], tmp_path / "s3", rank=6).duplicates == [[1, 2]]


def test_an_older_ingredients_relative_backbone_and_its_absolute_path_are_one_backbone(
        pair, tmp_path, monkeypatch):
    """A checkpoint of before 2026-12-05 recorded `--backbone cut` as typed: beside a newer one
    recording `/.../cut`, the soup was refused ("their configs differ in backbone") from any
    folder. Averaged, the soup records the absolute path; another backbone is still refused."""
    import shutil

    a, b = pair
    absolute = json.loads((b / "facet_config.json").read_text())["config"]["backbone"]
    assert Path(absolute).is_absolute()
    old = tmp_path / "old"
    shutil.copytree(a, old)
    meta = json.loads((old / "facet_config.json").read_text())
    meta["config"]["backbone"] = Path(absolute).name  # as recorded then
    (old / "facet_config.json").write_text(json.dumps(meta))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    make_soup([old, b], tmp_path / "soup")
    assert json.loads((tmp_path / "soup" / "facet_config.json").read_text())["config"]["backbone"] == absolute
    meta["config"]["backbone"] = "some-other-model"
    (old / "facet_config.json").write_text(json.dumps(meta))
    with pytest.raises(InvalidInputError, match="their configs differ in backbone"):
        make_soup([old, b], tmp_path / "other")


def test_same_backbone(tmp_path, monkeypatch) -> None:
    """An older checkpoint's relative folder matches an absolute model folder ending in it only
    where the relative name opens nothing here; a packaged name never matches a folder by its
    name (a two-layer copy named smollm2-135m-instruct was taken for the packaged model)."""
    from embedders.backbone import same_backbone

    for folder in ("models/cut", "models/cut2", "x/smollm2-135m-instruct", "here/bb", "there/bb"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path / "here")
    cut = str(tmp_path / "models" / "cut")
    for a, b, same in [
        ("cut", cut, True), ("models/cut", cut, True), ("cut/", cut, True), ("./cut", cut, True),
        ("cut", str(tmp_path / "models" / "cut2"), False), ("../cut", cut, False),
        ("cut", str(tmp_path / "models" / "gone" / "cut"), False),  # (no model folder there)
        ("SmolLM2-135M-Instruct", "smollm2-135m-instruct", True),
        ("smollm2-135m-instruct", "all-minilm-l6-v2", False),
        ("smollm2-135m-instruct", str(tmp_path / "x" / "smollm2-135m-instruct"), False),
        ("bb", str(tmp_path / "there" / "bb"), False),  # `bb` opens a folder here: that one is it
        ("bb", str(tmp_path / "here" / "bb"), True),
        (f"{cut}/", cut, True), ("/a/cut", "/a/./cut", True), ("/a/cut", "/b/cut", False), ("x", "x", True),
    ]:
        assert same_backbone(a, b) is same and same_backbone(b, a) is same, (a, b, same)


def test_checkpoints_with_no_adapter_or_heads_are_refused_not_souped_to_a_config(tmp_path):
    """A plugin method's checkpoints (``register_method``, weights in files of its own): the
    soup wrote their config alone and said "100% of the exact average's energy kept", and a
    ``--rank`` was ignored (the training CLI exploration of the fourth session of 2026-12-07).
    Its config is all a soup reads of such a method here: no model loads."""
    import numpy as np

    folders = []
    for name, value in (("one", 1.0), ("two", 0.0)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "facet_config.json").write_text(json.dumps(
            {"format_version": 1, "method": "hashm", "name": "hashm", "config": {}}))
        np.save(folder / "weights.npy", np.full(4, value))
        folders.append(folder)
    with pytest.raises(InvalidInputError, match=r"^nothing to average: the checkpoints hold no LoRA "
                                                r"adapter \(adapter\.safetensors\) and no heads"):
        make_soup(folders, tmp_path / "soup")
    with pytest.raises(ValueError, match=r"^rank 2 is the rank of the averaged LoRA adapter, and "
                                         r"these checkpoints have none \(r=0\)"):
        make_soup(folders, tmp_path / "soup", rank=2)
    assert not (tmp_path / "soup").exists()
