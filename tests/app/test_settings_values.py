"""One rule for every ``FACET_*`` value: surrounding whitespace ignored (a space around
FACET_DATA_DIR made a new, empty data folder), an empty value the default (but for folders,
refused), choices in any case, and a bad value one line naming the variable and what it takes
(no pydantic "Value error, " prefix; the booleans' words; a JSON object's example for the
object setting). A data folder that is a broken link says so."""

from __future__ import annotations

import pytest

from app.errors import InvalidRequestError
from app.settings import FacetSettings, get_settings
from tests.app.cli_runner import invoke_cli

_FOLDERS = ("data_dir", "model_cache_dir", "checkpoint_dir", "shared_data_dir")
_EMPTY_REFUSED = (*_FOLDERS, "api_allowed_roots")  # (an empty value refused, not the default)




def _refusal(environment: pytest.MonkeyPatch, name: str, value: str) -> str:
    environment.setenv(name, value)
    get_settings.cache_clear()
    with pytest.raises(InvalidRequestError) as caught:
        get_settings()
    return str(caught.value)


def test_spaces_around_the_data_folder_are_not_part_of_it(tmp_path, monkeypatch) -> None:
    """`FACET_DATA_DIR=" /x/data" facet collections` made "./ /x/data" in the working directory
    (and "data " for a trailing space) and said "no collections yet"."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    result = invoke_cli("collections", env={"FACET_DATA_DIR": f" {data} \t"})
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    assert (data / "facet.db").is_file()
    # A name that does end in a space is still reachable: "name /." (pathlib drops the ".").
    monkeypatch.setenv("FACET_DATA_DIR", f"{tmp_path}/spaced /.")
    assert FacetSettings().data_dir == tmp_path / "spaced "


@pytest.mark.parametrize("blank", ["", "  "])
def test_an_empty_value_is_the_default_for_every_setting_but_the_folders(environment, blank) -> None:
    """FACET_INDEX_THREADS= and FACET_CHUNK_OVERLAP= were errors, FACET_UI_RERANKERS= "cannot be
    read", FACET_API_KEY= the key "", while FACET_DEVICE= meant automatic. (Not the folders, nor
    FACET_API_ALLOWED_ROOTS, whose default is any path: refused, tests/app/test_settings_bounds.py.)"""
    environment.delenv("FACET_API_ALLOWED_HOSTS", raising=False)  # (the suite's TestClient host: conftest)
    defaults = FacetSettings()
    for name in FacetSettings.model_fields:
        if name in _EMPTY_REFUSED:
            continue
        environment.setenv(f"FACET_{name.upper()}", blank)
    settings = FacetSettings()
    for name in FacetSettings.model_fields:
        assert getattr(settings, name) == getattr(defaults, name), name
    assert "FACET_CHECKPOINT_DIR='': is empty" in _refusal(environment, "FACET_CHECKPOINT_DIR", blank)


def test_surrounding_spaces_and_case_are_ignored_alike(environment) -> None:
    """" 5 " was a chunk size but " true " no boolean; CUDA a device but Edge no backend."""
    for name, value in {"CHUNK_TOKENS": " 5 ", "UI_MOUNT": " false ", "ENCODE_ON_WORKERS": "\tYes ",
                        "DEVICE": " CUDA:1 ", "VECTOR_BACKEND": " Edge ",
                        "QDRANT_URL": " http://qdrant:6333 ", "API_MODELS": ' [" minilm "] '}.items():
        environment.setenv(f"FACET_{name}", value)
    settings = FacetSettings()
    assert (settings.chunk_tokens, settings.ui_mount, settings.encode_on_workers) == (5, False, True)
    assert (settings.device, settings.vector_backend) == ("cuda:1", "edge")
    assert (settings.qdrant_url, settings.api_models) == ("http://qdrant:6333", ["minilm"])


@pytest.mark.parametrize(("name", "value", "message"), [
    ("FACET_UI_MOUNT", "maybe", "FACET_UI_MOUNT='maybe': use true or false (or yes/no, on/off, 1/0)"),
    ("FACET_VECTOR_BACKEND", "qdrant", "FACET_VECTOR_BACKEND='qdrant': use edge, local or server"),
    ("FACET_CHUNK_OVERLAP", "500", "FACET_CHUNK_OVERLAP='500': chunk overlap must be >= 0 and "
                                   "smaller than the chunk size (200, FACET_CHUNK_TOKENS), got 500"),
    ("FACET_UI_EXAMPLES", '["a"]', "FACET_UI_EXAMPLES=['a']: Input should be a valid dictionary "
                                   "(an object is written as JSON, e.g. "
                                   "'{\"name\": [\"first\", \"second\"]}')"),
    ("FACET_UI_EXAMPLES", "a", "FACET_UI_EXAMPLES='a' cannot be read (an object is written as JSON"),
    # The key whose value is wrong, not its value alone ("FACET_UI_EXAMPLES='one'").
    ("FACET_UI_EXAMPLES", '{"c1": "one"}', "FACET_UI_EXAMPLES (key 'c1')='one': Input should be a "
                                           "valid list"),
])
def test_a_bad_value_is_one_line_that_says_what_the_setting_takes(environment, name, value,
                                                                  message) -> None:
    """The overlap's message began "Value error, ", a bad boolean named no word it takes, a bad
    FACET_VECTOR_BACKEND passed until the store opened, and FACET_UI_EXAMPLES (an object) was
    shown how to write a list."""
    said = _refusal(environment, name, value)
    assert message in said and "\n" not in said
    assert "Value error" not in said and "a list is written" not in said


def test_a_data_folder_that_is_a_broken_link_says_so(environment, tmp_path) -> None:
    """A dangling symlink as FACET_DATA_DIR was "cannot be used: File exists"."""
    link = tmp_path / "data-link"
    link.symlink_to(tmp_path / "gone")
    said = _refusal(environment, "FACET_DATA_DIR", str(link))
    assert f"FACET_DATA_DIR='{link}': is a broken link to {tmp_path / 'gone'}" in said
    said = _refusal(environment, "FACET_DATA_DIR", str(link / "sub"))
    assert f"is inside {link}, which is a broken link to {tmp_path / 'gone'}" in said
    assert not (tmp_path / "gone").exists()


def test_the_settings_repr_shows_no_secret() -> None:
    """`print(settings)`, a debugger or a traceback with locals showed the API key, the UI's
    passwords and every URL's password as set."""
    from app.settings import FacetSettings

    settings = FacetSettings(api_key="sekret-key", ui_auth="ana:pw-one,bo:pw-two", qdrant_api_key="qkey",
                             database_url="postgresql://u:dbpass@db.example/facet",
                             broker_url="redis://:redispass@redis.example:6379/0",
                             result_backend="redis://:backendpass@r2.example:6379/1",
                             qdrant_url="https://user:qpass@q.example:6333")
    for shown in (repr(settings), str(settings)):
        for secret in ("sekret-key", "pw-one", "pw-two", "qkey", "dbpass", "redispass", "backendpass",
                       "qpass"):
            assert secret not in shown, (secret, shown)
        assert "api_key='***'" in shown and "database_url='postgresql://u:***@db.example/facet'" in shown
    assert settings.api_key == "sekret-key"  # the values themselves are as set
    assert "api_key=None" in repr(FacetSettings())
