"""A checkpoint whose facet_config.json has no "config" object, or no method or backbone,
given to `facet train --init-from` / `--init-lora-from` or `facet soup` (the train exploration of
the third session of 2026-12-02): a traceback ("'NoneType' object has no attribute 'get'",
exit 1) where `facet embed` and `facet eval` said it in one line (exit 4); a config that names no
backbone, which every other command loads with the default one, was "trained on backbone None
... pass --backbone to match it", which no --backbone could. Real CLI, the shipped Causal-EOS
checkpoint copied and edited; each refusal comes before any model loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.app.cli_runner import invoke_cli

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "causal-eos"


def _edited(tmp_path: Path, name: str, edit: Any) -> Path:
    ck = tmp_path / name
    shutil.copytree(SHIPPED, ck)
    meta = json.loads((ck / "facet_config.json").read_text())
    edit(meta)
    (ck / "facet_config.json").write_text(json.dumps(meta))
    return ck


@pytest.mark.parametrize("config", [None, [1], "x"])
def test_a_config_that_is_not_an_object_is_one_error_line(tmp_path: Path, config: object) -> None:
    ck = _edited(tmp_path, "ck", lambda meta: meta.__setitem__("config", config))
    for method, flag in (("causal-eos", "--init-from"), ("gircse", "--init-lora-from")):
        done = invoke_cli("train", method, "--out", str(tmp_path / "out"), flag, str(ck),
                          "--steps", "1", "--no-dev")
        assert done.returncode == 4, (flag, done.returncode, done.stderr)
        assert done.stderr.strip() == (f"error: {flag} {ck}: {ck / 'facet_config.json'} has no "
                                       "\"config\" object; the checkpoint is damaged"), done.stderr
        assert not (tmp_path / "out").exists()
    souped = invoke_cli("soup", str(ck), str(SHIPPED), "--out", str(tmp_path / "s"))
    assert souped.returncode == 4, souped.stderr
    assert f"{ck / 'facet_config.json'} has no \"config\" object" in souped.stderr, souped.stderr
    assert "Traceback" not in souped.stderr and not (tmp_path / "s").exists()


def test_a_config_without_a_backbone_is_the_default_one_and_without_a_method_says_so(
        tmp_path: Path) -> None:
    from app.commands.train import _init_checkpoint
    from app.errors import InvalidRequestError
    from embedders.backbone import DEFAULT_DECODER

    no_backbone = _edited(tmp_path, "nb", lambda meta: meta["config"].pop("backbone"))
    path, _meta = _init_checkpoint(str(no_backbone), "causal-eos", DEFAULT_DECODER)  # (it loads so)
    assert path == no_backbone
    with pytest.raises(InvalidRequestError, match=r"was trained on backbone 'smollm2-135m-instruct', "
                                                  r"not 'other'; pass --backbone"):
        _init_checkpoint(str(no_backbone), "causal-eos", "other")
    no_method = _edited(tmp_path, "nm", lambda meta: meta.pop("method"))
    with pytest.raises(InvalidRequestError) as refused:
        _init_checkpoint(str(no_method), "instemb", DEFAULT_DECODER)
    assert str(refused.value) == (f"--init-from {no_method} is a checkpoint whose facet_config.json names "
                                  "no method; training 'instemb' needs an 'instemb' checkpoint (or "
                                  "--init-lora-from to copy only its adapter)"), refused.value


def test_a_config_value_of_the_wrong_type_names_its_field_and_file(tmp_path: Path) -> None:
    """"max_length": "abc" was "a saved CausalEOSConfig that is not valid: '<' not supported
    between instances of 'str' and 'int'", naming neither the field nor (in train) the file."""
    ck = _edited(tmp_path, "ck", lambda meta: meta["config"].__setitem__("max_length", "abc"))
    done = invoke_cli("train", "causal-eos", "--out", str(tmp_path / "out"), "--init-from", str(ck),
                      "--steps", "1", "--no-dev")
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip() == (f"error: {ck / 'facet_config.json'}: a saved CausalEOSConfig "
                                   "that is not valid: max_length is 'abc', not a whole number")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("where", "value", "said"), [
    (("prompts", "query"), 5, "prompts.query is 5, not text"),
    (("lora", "alpha"), None, "lora.alpha is None, not a whole number"),
    (("lora", "dropout"), "abc", "lora.dropout is 'abc', not a number"),
    (("lora", "target_modules"), 5, "lora.target_modules is 5, not a list of names"),
    (("lora",), [1], "lora is [1], not an object of settings"),
    (("lora", "layers"), 5, "lora.layers is 5, not a list of whole numbers"),
    (("lora", "layers"), ["a"], "lora.layers is ['a'], not a list of whole numbers"),
])
def test_a_nested_config_value_of_the_wrong_type_names_its_field(tmp_path: Path, where, value,
                                                                  said) -> None:
    """"prompts": {"query": 5} was an AttributeError traceback (exit 1) from `facet embed` and
    `facet train --init-from`; "lora": {"alpha": null} "int() argument must be ...", no field."""
    def edit(meta: dict) -> None:
        target = meta["config"]
        for key in where[:-1]:
            target = target[key]
        target[where[-1]] = value

    ck = _edited(tmp_path, "ck", edit)
    embedded = invoke_cli("embed", "--embedder", str(ck), "hello")
    assert embedded.returncode == 4, embedded.stderr
    assert f"a saved CausalEOSConfig that is not valid: {said}" in embedded.stderr, embedded.stderr
    assert "Traceback" not in embedded.stderr
    trained = invoke_cli("train", "causal-eos", "--out", str(tmp_path / "out"), "--init-from", str(ck),
                         "--steps", "1", "--no-dev")
    assert trained.returncode == 4, trained.stderr
    assert trained.stderr.strip() == (f"error: {ck / 'facet_config.json'}: a saved CausalEOSConfig "
                                      f"that is not valid: {said}")
