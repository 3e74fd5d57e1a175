from __future__ import annotations

import json

import pytest

from embedders import (
    CheckpointError,
    DuplicateRegistrationError,
    UnknownEmbedderError,
    list_embedders,
    load_checkpoint,
    load_embedder,
    register_embedder,
)
from embedders.errors import InvalidInputError
from embedders.registry import register_method, unregister_embedder


def test_builtin_names_listed():
    names = {i.name for i in list_embedders()}
    assert {"minilm", "backbone-mean", "backbone-prompteol"} <= names


def test_unknown_name_lists_valid_ones():
    with pytest.raises(UnknownEmbedderError) as info:
        load_embedder("no-such-embedder")
    message = str(info.value)
    assert "no-such-embedder" in message
    for name in ("minilm", "backbone-mean", "backbone-prompteol"):
        assert name in message
    assert "no checkpoints folder" not in message  # the checkout's checkpoints/ is there
    # Options whose bracket is not closed: said (it was "unknown embedder" with no cause; the
    # training CLI exploration of the fourth session of 2026-12-07).
    with pytest.raises(UnknownEmbedderError, match=r"^unknown embedder 'gircse\[soft_tokens=10' \(its "
                                                   r"'\[' is not closed: options go in one pair of "
                                                   r"brackets, gircse\[key=value\]\)"):
        load_embedder("gircse[soft_tokens=10")


def test_unknown_name_without_a_checkpoints_folder_says_how_to_name_them(tmp_path):
    """An installed (non-editable) package has no checkpoints/ beside it: `causal2vec` was
    unknown and the valid names simply lacked the trained ones."""
    from embedders.registry import set_checkpoint_dir

    set_checkpoint_dir(tmp_path / "absent")
    try:
        with pytest.raises(UnknownEmbedderError, match=r"no checkpoints folder at .*absent.*set "
                                                       r"FACET_CHECKPOINT_DIR"):
            load_embedder("causal2vec")
    finally:
        set_checkpoint_dir(None)
    from embedders.registry import embedder_names  # the default folder is back

    assert "causal2vec" in embedder_names()


def test_a_checkpoints_folder_of_none_or_of_one_checkpoint_says_so(tmp_path):
    """FACET_CHECKPOINT_DIR set to an empty folder, or to one checkpoint instead of the folder
    holding it, registered nothing, and neither the unknown-name error nor `facet embedders`
    said why."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from embedders.registry import checkpoint_dir_note, set_checkpoint_dir

    assert checkpoint_dir_note() is None  # the checkout's checkpoints/ names some
    one = Path(__file__).resolve().parents[2] / "checkpoints" / "causal-eos"
    (tmp_path / "empty").mkdir()

    def embedders(folder: Path | None) -> subprocess.CompletedProcess[str]:
        # A process of its own: the settings set the registry's folder for the process.
        env = {**os.environ, "FACET_DATA_DIR": str(tmp_path / "data")}
        env.pop("FACET_CHECKPOINT_DIR", None)
        if folder is not None:
            env["FACET_CHECKPOINT_DIR"] = str(folder)
        return subprocess.run([sys.executable, "-m", "app", "embedders"], capture_output=True,
                              text=True, env=env, timeout=300)

    for folder, said in ((tmp_path / "empty", r"holds no checkpoint folder .*set FACET_CHECKPOINT_DIR"),
                         (one, rf"is itself one checkpoint.*the folder holding it \({one.parent}\)")):
        set_checkpoint_dir(folder)
        try:
            with pytest.raises(UnknownEmbedderError, match=said):
                load_embedder("causal2vec")
        finally:
            set_checkpoint_dir(None)
        listed = embedders(folder)
        assert listed.returncode == 0, listed.stderr
        assert "minilm" in listed.stdout and "causal2vec" not in listed.stdout
        assert listed.stderr.startswith("note: the checkpoints folder "), listed.stderr
    listed = embedders(None)
    assert "causal2vec" in listed.stdout and "note:" not in listed.stderr, listed.stderr
    # Checkpoints there but skipped (a name taken, a damaged config): each is warned of, and
    # "holds no checkpoint folder" is not said.
    (tmp_path / "skipped").mkdir()
    (tmp_path / "skipped" / "minilm").symlink_to(one)
    (tmp_path / "skipped" / "bad").mkdir()
    (tmp_path / "skipped" / "bad" / "facet_config.json").write_text("not json")
    set_checkpoint_dir(tmp_path / "skipped")
    try:
        assert checkpoint_dir_note() is None
    finally:
        set_checkpoint_dir(None)
    listed = embedders(tmp_path / "skipped")
    assert "not registered: the name 'minilm' is taken" in listed.stderr, listed.stderr
    assert "note:" not in listed.stderr, listed.stderr


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_empty_or_none_name(bad):
    with pytest.raises(UnknownEmbedderError, match="non-empty name or path"):
        load_embedder(bad)


def test_duplicate_registration_rejected():
    register_embedder("dup-test", lambda **_: None, "test")  # type: ignore[arg-type,return-value]
    try:
        with pytest.raises(DuplicateRegistrationError, match="already registered"):
            register_embedder("dup-test", lambda **_: None, "test")  # type: ignore[arg-type,return-value]
    finally:
        unregister_embedder("dup-test")
    with pytest.raises(DuplicateRegistrationError, match="already has a loader"):
        register_method("encoder-mean", lambda *a: None)  # type: ignore[arg-type,return-value]


def test_bad_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match=r"facet_config\.json is missing"):
        load_checkpoint(tmp_path)
    (tmp_path / "facet_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(tmp_path)
    (tmp_path / "facet_config.json").write_text(json.dumps({"method": "mystery"}))
    with pytest.raises(CheckpointError, match="names method 'mystery'"):
        load_checkpoint(tmp_path)


def test_a_config_value_its_method_refuses_is_a_checkpoint_error(tmp_path):
    import shutil

    from embedders.registry import check_embedder, checkpoint_dir

    damaged = tmp_path / "ck"
    shutil.copytree(checkpoint_dir() / "causal-eos", damaged)
    meta = json.loads((damaged / "facet_config.json").read_text())
    for field, value, message in [("template", "nope", "template must be one of"),
                                  ("max_length", 8, "max_length must be at least 16")]:
        bad = {**meta, "config": {**meta["config"], field: value}}
        (damaged / "facet_config.json").write_text(json.dumps(bad))
        for check in (check_embedder, load_embedder):  # read without weights, and loaded
            with pytest.raises(CheckpointError, match=f"ck/facet_config.json: .*{message}"):
                check(str(damaged))
    (damaged / "facet_config.json").write_text(json.dumps({**meta, "config": None}))
    with pytest.raises(CheckpointError, match='has no "config" object'):
        check_embedder(str(damaged))
    with pytest.raises(UnknownEmbedderError, match="unknown embedder 'minlm'"):
        check_embedder("minlm")
    check_embedder("minilm[instruction_weight=0]")  # options are checked when it loads
    check_embedder(str(checkpoint_dir() / "causal-eos"))


def test_a_packaged_name_is_taken_before_anything_loads() -> None:
    """A plugin registering 'minilm' before the first lookup was accepted; the packaged
    registration then failed half-way, and gircse, backbone-mean and every checkpoint were
    'unknown' for the rest of the process. A fresh interpreter, as a plugin meets it."""
    import ast
    import subprocess
    import sys

    script = (
        "from embedders import DuplicateRegistrationError, register_embedder\n"
        "from embedders.registry import embedder_names\n"
        "try:\n"
        "    register_embedder('minilm', lambda **kw: None, 'mine')\n"
        "    print('accepted')\n"
        "except DuplicateRegistrationError as e:\n"
        "    print('refused:', e)\n"
        "register_embedder('mine', lambda **kw: None, 'mine')\n"
        "print(sorted(embedder_names()))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0].startswith("refused: an embedder named 'minilm' is already registered (by "
                             "embedders.builtin)")
    assert {"minilm", "gircse", "backbone-mean", "causal2vec", "mine"} <= set(ast.literal_eval(out[1]))


def test_damaged_weight_files_are_checkpoint_errors(tmp_path):
    """A truncated or empty adapter / heads file, or a config whose LoRA rank is not the
    file's, was a SafetensorError / RuntimeError traceback (exit 1, and out of the facade)."""
    import shutil

    from embedders.registry import checkpoint_dir

    for name, file, damage, message in [
        ("causal-eos", "adapter.safetensors", "truncate", "adapter.safetensors cannot be read"),
        ("causal-eos", "adapter.safetensors", "empty", "adapter.safetensors cannot be read"),
        ("causal2vec", "heads.safetensors", "truncate", "heads.safetensors cannot be read"),
        ("causal-eos", "facet_config.json", "rank", "does not fit the LoRA settings"),
    ]:
        ck = tmp_path / f"{name}-{damage}"
        shutil.copytree(checkpoint_dir() / name, ck)
        if damage == "truncate":
            (ck / file).write_bytes((ck / file).read_bytes()[:1000])
        elif damage == "empty":
            (ck / file).write_bytes(b"")
        else:
            meta = json.loads((ck / file).read_text())
            meta["config"]["lora"]["r"] = 4
            (ck / file).write_text(json.dumps(meta))
        with pytest.raises(CheckpointError, match=message) as info:
            load_embedder(str(ck))
        assert len(str(info.value).splitlines()) == 1  # not torch's hundreds of size mismatches


def test_split_options_parses_bracket_suffix():
    from embedders.registry import split_options

    assert split_options("checkpoints/gircse") == ("checkpoints/gircse", {})
    assert split_options("ckpt[soft_tokens=10, use_cache=false]") == (
        "ckpt", {"soft_tokens": "10", "use_cache": "false"})
    with pytest.raises(InvalidInputError, match="not key=value"):
        split_options("ckpt[soft_tokens]")
    # The last of two values silently won; a second pair of brackets was applied as well.
    with pytest.raises(InvalidInputError, match="'instruction_weight' is given twice"):
        split_options("minilm[instruction_weight=1,instruction_weight=0]")
    with pytest.raises(InvalidInputError, match="in one pair of brackets"):
        split_options("minilm[instruction_weight=0.5][instruction_weight=1]")


def test_soft_tokens_has_a_ceiling():
    """gircse[soft_tokens=2000] ran for minutes on two texts (a forward pass per soft token)."""
    with pytest.raises(InvalidInputError, match="soft_tokens must be from 1 to 64, got 2000"):
        load_embedder("gircse[soft_tokens=2000]")
    assert load_embedder("gircse[soft_tokens=64]").soft_tokens == 64  # type: ignore[attr-defined]


def test_apply_option_parses_by_type_and_runs_the_config_checks():
    from dataclasses import dataclass

    from embedders.registry import apply_option

    @dataclass
    class Cfg:
        k: int = 5
        flag: bool = True

        def __post_init__(self) -> None:
            if self.k < 1:
                raise ValueError("k must be >= 1")

    class Model:
        name = "fake"
        OPTIONS = ("k", "flag")

        def __init__(self) -> None:
            self.config = Cfg()

    model = Model()
    apply_option(model, "k", "12")  # type: ignore[arg-type]
    apply_option(model, "flag", "false")  # type: ignore[arg-type]
    assert model.config.k == 12 and model.config.flag is False
    with pytest.raises(InvalidInputError, match="k must be >= 1"):
        apply_option(model, "k", "0")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="expected a whole number"):
        apply_option(model, "k", "many")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="no option 'other'; options: flag, k"):
        apply_option(model, "other", "1")  # type: ignore[arg-type]
    assert model.config.k == 12  # a refused value leaves the option unchanged


def test_causal2vec_refuses_concat_pooling_without_its_contextual_state_in_either_order():
    """'causal2vec[context_placement=none,context_pooling=concat]' broke at the first encode
    (a shape mismatch traceback); the other order was refused."""
    for spec in ("causal2vec[context_placement=none,context_pooling=concat]",
                 "causal2vec[context_pooling=concat,context_placement=none]"):
        with pytest.raises(InvalidInputError, match="needs"):
            load_embedder(spec)
    model = load_embedder("causal2vec[context_placement=none,context_pooling=last]")
    assert model.encode(["a cat"]).shape == (1, 576)


def test_identity_marks_reduced_precision_only():
    import torch

    model = load_embedder("backbone-mean", device="cpu")
    assert "dtype" not in json.loads(model.identity)  # fp32 keys unchanged
    spec = model.backbone.spec
    try:
        model.backbone.spec = type(spec)(spec.device, torch.bfloat16)
        assert json.loads(model.identity)["dtype"] == "bfloat16"
    finally:
        model.backbone.spec = spec


def test_shipped_checkpoints_have_registered_names_from_any_directory(tmp_path, monkeypatch):
    """`load_embedder("inbedder")` must not depend on the working directory."""
    from embedders.registry import checkpoint_dir, list_embedders

    shipped = sorted(p.name for p in checkpoint_dir().iterdir() if (p / "facet_config.json").is_file())
    assert shipped, f"no checkpoints under {checkpoint_dir()}"
    monkeypatch.chdir(tmp_path)
    kinds = {i.name: i.kind for i in list_embedders()}
    for name in shipped:
        assert kinds.get(name) == "checkpoint", name


def test_checkpoint_dir_setting_registers_another_folder(tmp_path):
    from embedders.registry import embedder_names, set_checkpoint_dir

    folder = tmp_path / "mine" / "my-model"
    folder.mkdir(parents=True)
    (folder / "facet_config.json").write_text(json.dumps(
        {"method": "backbone-mean", "name": "my-model", "backbone": "smollm2-135m-instruct"}))
    try:
        set_checkpoint_dir(tmp_path / "mine")
        assert "my-model" in embedder_names()
        assert "minilm" in embedder_names()  # baselines stay
    finally:
        set_checkpoint_dir(None)
    assert "my-model" not in embedder_names()


def test_a_folder_without_a_readable_config_is_refused_by_loading_and_by_soup(tmp_path):
    from embedders.errors import CheckpointError
    from embedders.registry import load_checkpoint, read_checkpoint_config
    from embedders.training.soup import make_soup

    empty, broken = tmp_path / "empty", tmp_path / "broken"
    empty.mkdir()
    broken.mkdir()
    (broken / "facet_config.json").write_text("{not json")
    for read in (read_checkpoint_config, load_checkpoint):
        with pytest.raises(CheckpointError, match=r"is not a Facet checkpoint: facet_config\.json is missing"):
            read(empty)
        with pytest.raises(CheckpointError, match="is not valid JSON"):
            read(broken)
    with pytest.raises(CheckpointError, match="is not a Facet checkpoint"):
        make_soup([empty, broken], tmp_path / "soup")
    assert not (tmp_path / "soup").exists()  # nothing written


def test_loads_registered_only_for_the_name_itself_or_its_own_checkpoint_directory(tmp_path) -> None:
    from embedders.registry import checkpoint_dir, loads_registered

    registered = sorted(p for p in checkpoint_dir().iterdir() if (p / "facet_config.json").is_file())
    assert registered, "the committed checkpoints are registered by folder name"
    folder = registered[0]
    assert loads_registered(folder.name, folder.name)
    assert loads_registered(str(folder), folder.name)  # the registered checkpoint by its path
    assert not loads_registered(f"{folder.name}[max_length=64]", folder.name)  # options: another model
    copy = tmp_path / folder.name
    copy.mkdir()
    (copy / "facet_config.json").write_text((folder / "facet_config.json").read_text())
    assert not loads_registered(str(copy), folder.name)  # another directory with the same name
    assert loads_registered("minilm", "minilm") and loads_registered("MiniLM", "minilm")
    assert not loads_registered("minilm", "no-such-name")


def test_saved_name_reads_the_name_without_loading(minilm, minilm_namesake) -> None:
    from embedders.registry import list_embedders, saved_name

    assert saved_name("minilm") == saved_name("minilm[instruction_weight=1]") == minilm.name
    assert saved_name(str(minilm_namesake[0])) == minilm_namesake[1].name == "minilm"
    registered = {info.name: info for info in list_embedders()}
    for name, info in registered.items():  # a checkpoint's from its config, a baseline's as registered
        assert saved_name(name) == name, info.description
    with pytest.raises(UnknownEmbedderError, match=r"unknown embedder 'no-such-model\[max_length=3\]'"):
        saved_name("no-such-model[max_length=3]")


def test_checkpoint_folders_differing_only_in_case_are_named_not_silently_merged(tmp_path, caplog):
    """`--embedder myeos` loaded the folder "MyEOS" (another method) with no word about
    "myeos", which no name could reach."""
    import logging

    from embedders.registry import list_embedders, set_checkpoint_dir

    for folder, method in (("MyEOS", "causal-eos"), ("myeos", "causal2vec")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "facet_config.json").write_text(json.dumps(
            {"method": method, "name": method, "backbone": "smollm2-135m-instruct"}))
    try:
        with caplog.at_level(logging.WARNING, logger="embedders.registry"):
            set_checkpoint_dir(tmp_path)
            info = {i.name: i for i in list_embedders()}["myeos"]
    finally:
        set_checkpoint_dir(None)
    assert info.path == (tmp_path / "MyEOS").resolve()
    assert any(f"{tmp_path / 'myeos'} not registered" in r.message and "differ only in case" in
               r.message for r in caplog.records), caplog.text


def test_checkpoint_folders_named_as_no_embedder_may_be_are_not_registered(tmp_path, caplog):
    """Folders `x,y`, `my eos`, `a#b` and `ünï` were registered and loaded by name, though such
    a name cannot be written in `--baselines a,b` (a plugin's is refused) and `a#b` broke the
    vector store; they are named and left out, loadable by their paths."""
    import logging

    from embedders.registry import list_embedders, set_checkpoint_dir

    for folder in ("x,y", "my eos", "a#b", "ünï", "fine-one"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "facet_config.json").write_text(json.dumps(
            {"method": "causal-eos", "name": "causal-eos", "backbone": "smollm2-135m-instruct"}))
    try:
        with caplog.at_level(logging.WARNING, logger="embedders.registry"):
            set_checkpoint_dir(tmp_path)
            names = {i.name for i in list_embedders()}
    finally:
        set_checkpoint_dir(None)
    assert "fine-one" in names and not names & {"x,y", "my eos", "a#b", "ünï"}
    for folder in ("x,y", "my eos", "a#b", "ünï"):
        assert any(f"{tmp_path / folder} not registered: embedder name {folder!r} is refused" in
                   r.message and "rename the folder" in r.message for r in caplog.records), folder


def test_empty_brackets_are_no_options() -> None:
    """`--embedder 'minilm[]'` said "unknown embedder 'minilm[]'" (saved_name read it as
    minilm)."""
    from embedders.registry import load_embedder, saved_name

    assert saved_name("minilm[]") == "minilm"
    assert load_embedder("minilm[]", device="cpu").name == "minilm"


def test_a_checkpoint_no_loader_serves_is_listed_as_not_loadable(tmp_path) -> None:
    """A checkpoint whose method has no loader (its plugin not installed) was listed as any
    other ("trained nosuch checkpoint") and failed only when loaded; the listing says so, and
    the loadable ones stay as they were."""
    from embedders.registry import list_embedders, set_checkpoint_dir

    for name, method in (("theirs", "nosuch-method"), ("ours", "causal-eos")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "facet_config.json").write_text(json.dumps({"method": method}))
    try:
        set_checkpoint_dir(tmp_path)
        listed = {i.name: i.description for i in list_embedders()}
        assert listed["theirs"].endswith(
            "; cannot be loaded: method 'nosuch-method' has no loader (a plugin not installed?)")
        assert "cannot be loaded" not in listed["ours"]

        # A loader registered after the folder was (a plugin imported later) is seen.
        register_method("nosuch-method", lambda directory, config, device: None)  # type: ignore[arg-type,return-value]
        listed = {i.name: i.description for i in list_embedders()}
        assert "cannot be loaded" not in listed["theirs"]
    finally:
        from embedders.registry import _LOADERS

        _LOADERS.pop("nosuch-method", None)
        set_checkpoint_dir(None)


def test_a_checkpoint_folder_whose_name_holds_brackets_takes_options(tmp_path) -> None:
    """`runs/eos[v2]` loaded as it is, but `runs/eos[v2][max_length=64]` was refused: "give the
    options in one pair of brackets", which that folder cannot."""
    import shutil

    from embedders.base import CONFIG_FILE
    from embedders.registry import check_embedder, default_checkpoint_dir, without_options

    folder = tmp_path / "eos[v2]"
    shutil.copytree(default_checkpoint_dir() / "causal-eos", folder)
    assert (folder / CONFIG_FILE).is_file()
    check_embedder(str(folder))
    check_embedder(f"{folder}[max_length=64]")
    assert without_options(f"{folder}[max_length=64]") == str(folder)
    with pytest.raises(InvalidInputError, match="has no option 'nosuch'"):
        check_embedder(f"{folder}[nosuch=1]")
    with pytest.raises(InvalidInputError, match="one pair of brackets"):  # an unknown name still is
        check_embedder(f"{tmp_path / 'other[v2]'}[max_length=64]")
