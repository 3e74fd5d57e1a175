"""Settings that passed validation and then crashed or silently misbehaved: each is now refused
when the settings are read (one line from every command), or, where it is legitimate, warned
about. Real minilm, edge store and SQLite for the indexing cases."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.core import Facet
from app.errors import InvalidRequestError
from app.services.indexing import IndexOptions
from app.settings import FacetSettings, InvalidSettingError

ROOT = Path(__file__).resolve().parents[2]
# 300 words of one sentence: at 200 tokens with the default overlap, 2 chunks.
LONG = " ".join(f"word{i % 7} sentence" for i in range(150))


def _refused(monkeypatch, tmp_path, **env: str) -> InvalidSettingError:
    """The error ``FacetSettings()`` raises with ``env`` set (FACET_ added to each name)."""
    monkeypatch.setenv("FACET_DATA_DIR", str(tmp_path / "data"))
    for name, value in env.items():
        monkeypatch.setenv(f"FACET_{name.upper()}", value)
    with pytest.raises(InvalidSettingError) as caught:
        FacetSettings()
    return caught.value


def _cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``facet ARGS`` as its own process (a private data folder), as a user runs it."""
    import os

    environ = {**os.environ, "FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1", **env}
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=120, env=environ, cwd=ROOT)


# -- chunk overlap ---------------------------------------------------------------------------


def test_an_overlap_not_smaller_than_the_chunk_stops_a_command_with_one_line(tmp_path) -> None:
    """FACET_CHUNK_OVERLAP=500 was cut to 199: a one-token stride, 101 chunks for a 300-word
    document instead of 2 (17 s instead of 1), and nothing said so."""
    result = _cli(tmp_path, "collections", FACET_CHUNK_OVERLAP="500")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert ("FACET_CHUNK_OVERLAP='500': chunk overlap must be >= 0 and smaller than "
            "the chunk size (200, FACET_CHUNK_TOKENS), got 500") in result.stderr


@pytest.mark.parametrize(("tokens", "overlap"), [("200", "200"), ("64", "64"), ("20", "32"), ("200", "-3")])
def test_an_overlap_setting_is_checked_against_the_chunk_setting(monkeypatch, tmp_path, tokens,
                                                                  overlap) -> None:
    error = _refused(monkeypatch, tmp_path, chunk_tokens=tokens, chunk_overlap=overlap)
    assert error.errors()[0]["loc"] == ("chunk_overlap",)
    assert f"smaller than the chunk size ({tokens}, FACET_CHUNK_TOKENS), got {overlap}" in str(error)


def test_the_default_overlap_fits_small_chunks(monkeypatch, tmp_path) -> None:
    """Unset, the overlap is 32 but at most a quarter of the chunk: FACET_CHUNK_TOKENS=20 with
    the default 32 is no error (the user set neither number wrong) and no one-token stride."""
    monkeypatch.setenv("FACET_CHUNK_TOKENS", "20")
    settings = FacetSettings(data_dir=tmp_path / "data")
    assert settings.chunk_overlap is None
    assert [settings.chunk_overlap_for(n) for n in (1, 20, 64, 128, 200, 4096)] == [0, 5, 16, 32, 32, 32]
    assert FacetSettings(data_dir=tmp_path, chunk_overlap=10).chunk_overlap_for(20) == 10


def test_small_chunks_with_the_default_overlap_index_a_sane_number_of_chunks(cache, tmp_path) -> None:
    """FACET_CHUNK_TOKENS=20 indexed 281 chunks of a 300-word document (overlap 19 of 20)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "long.txt").write_text(LONG)
    with Facet(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=20), embedders=cache) as facet:
        report = facet.index(tmp_path / "src", "small")
        info = facet.collection("small")
        assert (info.chunk_size, info.chunk_overlap) == (20, 5)
        # About 300+ tokens at a stride of 15: a few dozen chunks, not hundreds.
        assert 10 < report.chunks_written < 40, report.chunks_written
        # A job's own --chunk-tokens takes the same default.
        facet.index(tmp_path / "src", "job", IndexOptions(chunk_size=40))
        assert facet.collection("job").chunk_overlap == 10


def test_a_jobs_chunk_size_is_checked_against_the_overlap_setting(cache, tmp_path) -> None:
    """FACET_CHUNK_OVERLAP=50 with --chunk-tokens 40 was cut to 39 without a word."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "long.txt").write_text(LONG)
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_overlap=50)
    with Facet(settings, embedders=cache) as facet:
        with pytest.raises(InvalidRequestError, match=r"smaller than the chunk size \(40\), got 50 "
                                                      r"\(FACET_CHUNK_OVERLAP\)"):
            facet.index(tmp_path / "src", "c", IndexOptions(chunk_size=40))
        with pytest.raises(InvalidRequestError, match=r"chunk size \(40\), got 40"):
            facet.index(tmp_path / "src", "c", IndexOptions(chunk_size=40, chunk_overlap=40))
        assert facet.index(tmp_path / "src", "c", IndexOptions(chunk_size=40, chunk_overlap=8)).chunks_written


# -- device and dtype ------------------------------------------------------------------------


def test_an_unknown_device_stops_a_command_with_one_line(tmp_path) -> None:
    """FACET_DEVICE=gpu passed the settings and ended in torch's RuntimeError traceback when
    the first model loaded (a worker at its start)."""
    result = _cli(tmp_path, "collections", FACET_DEVICE="gpu")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "FACET_DEVICE='gpu': use cpu, cuda, cuda:N" in result.stderr


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "cuda1", "cpu cuda"])
def test_devices_torch_cannot_read_are_refused(monkeypatch, tmp_path, device) -> None:
    error = _refused(monkeypatch, tmp_path, device=device)
    assert error.errors()[0]["loc"] == ("device",)


def test_devices_torch_reads_are_kept_and_empty_is_automatic(tmp_path) -> None:
    for device in ("cpu", "cuda", "cuda:1", "mps", "xpu:0"):
        assert FacetSettings(data_dir=tmp_path, device=device).device == device
    assert FacetSettings(data_dir=tmp_path, device="").device is None  # ${FACET_DEVICE:-}


def test_an_unknown_dtype_is_refused_even_for_an_encoder(monkeypatch, tmp_path) -> None:
    """FACET_DTYPE=abc went unnoticed with minilm (encoders run float32) and was an error only
    once a decoder loaded."""
    error = _refused(monkeypatch, tmp_path, dtype="abc")
    assert error.errors()[0]["loc"] == ("dtype",)
    assert "use one of float32, fp32, bfloat16, bf16, float16, fp16" in str(error)
    monkeypatch.setenv("FACET_DTYPE", "bf16")
    assert FacetSettings().dtype == "bf16"


def test_the_dtype_names_are_the_ones_the_backbone_maps() -> None:
    from app.settings import DTYPE_NAMES
    from embedders.backbone import DTYPES, pick_device

    assert set(DTYPE_NAMES) == set(DTYPES)
    assert all(pick_device("cpu", name).dtype == DTYPES[name] for name in DTYPE_NAMES)


# -- numbers -----------------------------------------------------------------------------------

FLOATS = ["api_max_body_mb", "ui_max_upload_mb", "lease_ttl_s", "broker_timeout_s", "worker_timeout_s",
          "store_wait_s", "batch_wait_ms", "max_document_mb", "stream_document_mb", "bulk_piece_ms",
          "min_free_mb", "worker_parse_cache_mb", "query_cache_mb"]


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
@pytest.mark.parametrize("field", FLOATS)
def test_no_float_setting_takes_inf_or_nan(monkeypatch, tmp_path, field, value) -> None:
    """FACET_LEASE_TTL_S=inf, FACET_API_MAX_BODY_MB=inf, FACET_MAX_DOCUMENT_MB=nan... each
    passed and was an OverflowError/ValueError traceback where it became a number of bytes or
    a timeout."""
    error = _refused(monkeypatch, tmp_path, **{field: value})
    assert error.errors()[0]["loc"] == (field,)


def test_every_float_setting_is_in_the_list_above() -> None:
    floats = {name for name, f in FacetSettings.model_fields.items() if "float" in str(f.annotation)}
    assert floats == set(FLOATS)


@pytest.mark.parametrize(("field", "value"), [
    ("max_document_mb", "-1"),  # every file "over the -1.0 MiB per-document limit"
    ("max_document_mb", "0"),
    ("index_batch_chunks", "0"),  # accepted, while --batch-chunks 0 is refused
    ("index_batch_chunks", "-1"),
    ("chunk_tokens", "0"),
    ("lease_ttl_s", "1e12"),  # datetime overflow in the lease's expiry
    ("worker_timeout_s", "1e300"),  # thread timeouts overflow
    ("batch_wait_ms", "3600000"),  # every query waiting an hour for company
])
def test_out_of_range_numbers_are_refused(monkeypatch, tmp_path, field, value) -> None:
    error = _refused(monkeypatch, tmp_path, **{field: value})
    assert error.errors()[0]["loc"] == (field,)


# -- vector backend ------------------------------------------------------------------------------


def test_a_url_beside_the_local_backend_is_warned_about(tmp_path, caplog) -> None:
    """FACET_VECTOR_BACKEND=local with FACET_QDRANT_URL set wrote to local files without a word."""
    with caplog.at_level(logging.WARNING, logger="app.settings"):
        FacetSettings(data_dir=tmp_path, vector_backend="local", qdrant_url="http://qdrant:6333")
    assert "FACET_VECTOR_BACKEND=local ignores FACET_QDRANT_URL=http://qdrant:6333" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="app.settings"):
        FacetSettings(data_dir=tmp_path, qdrant_url="http://qdrant:6333")
        FacetSettings(data_dir=tmp_path, vector_backend="local")
    assert "ignores" not in caplog.text


# -- compose -----------------------------------------------------------------------------------


def test_the_compose_api_may_index_the_mounted_sources(monkeypatch, tmp_path) -> None:
    """/sources was mounted on the api, but the UI's Index tab said "Server folders: none
    allowed": FACET_UI_ALLOWED_ROOTS was not set."""
    api = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["api"]
    assert any(v.endswith(":/sources:ro") for v in api["volumes"])
    monkeypatch.setenv("FACET_UI_ALLOWED_ROOTS", api["environment"]["FACET_UI_ALLOWED_ROOTS"])
    assert FacetSettings(data_dir=tmp_path).ui_allowed_roots == [Path("/sources")]


# -- keyword arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "said"), [
    ({"device": "tpu"}, "device='tpu': "),
    ({"max_texts_per_call": -1}, "max_texts_per_call=-1: "),
    ({"data_dir": 5}, "data_dir=5: "),
])
def test_a_bad_keyword_value_is_a_facet_error_in_one_line(monkeypatch, tmp_path, given, said) -> None:
    """``FacetSettings(device="tpu")`` in a notebook raised pydantic's multi-line
    ValidationError with an errors.pydantic.dev link, where every other bad call (a misspelt
    keyword too) is a FacetError. It is now one line naming the keyword as it was written (not
    the FACET_ variable, which the user did not set), with pydantic's list kept in errors()."""
    monkeypatch.setenv("FACET_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(InvalidRequestError) as caught:
        FacetSettings(**given)
    message = str(caught.value)
    assert message.startswith(said) and "\n" not in message and "pydantic" not in message
    assert "FACET_" not in message and isinstance(caught.value, ValueError)
    assert caught.value.errors()[0]["loc"][0] == next(iter(given))


def test_a_bad_variable_is_still_named_as_a_variable(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FACET_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FACET_DEVICE", "tpu")
    with pytest.raises(InvalidSettingError, match=r"^FACET_DEVICE='tpu': "):
        FacetSettings(api_key="k")


@pytest.mark.parametrize("name", ["API_MAX_BODY_MB", "UI_MAX_UPLOAD_MB", "MAX_DOCUMENT_MB", "STREAM_DOCUMENT_MB",
                                  "WORKER_PARSE_CACHE_MB"])
def test_a_size_no_byte_count_can_hold_is_refused_when_read(monkeypatch, tmp_path, name) -> None:
    """FACET_API_MAX_BODY_MB=1e305 was taken, and `facet serve` then failed on an OverflowError
    traceback (MB times 2**20 is infinite); the same for the other sizes in MB."""
    refused = _refused(monkeypatch, tmp_path, **{name.lower(): "1e305"})
    assert f"FACET_{name}" in str(refused), str(refused)


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_api_allowed_roots_is_refused_not_read_as_any_path(monkeypatch, tmp_path, value) -> None:
    """FACET_API_ALLOWED_ROOTS= (a compose file's unset ${ROOTS}) read as unset: POST /jobs
    could then index any path the server can read. Refused, as an empty folder setting is;
    unset, [] and a list still read as before."""
    refused = _refused(monkeypatch, tmp_path, api_allowed_roots=value)
    assert "FACET_API_ALLOWED_ROOTS" in str(refused) and "give [] for none" in str(refused), str(refused)
    monkeypatch.setenv("FACET_API_ALLOWED_ROOTS", "[]")
    assert FacetSettings().api_allowed_roots == []
    monkeypatch.delenv("FACET_API_ALLOWED_ROOTS")
    assert FacetSettings().api_allowed_roots is None
    monkeypatch.setenv("FACET_UI_ALLOWED_ROOTS", value)  # (the UI's default is none: unchanged)
    assert FacetSettings().ui_allowed_roots == []


# -- the settings review of the sixth session of 2026-12-06 ----------------------------------


@pytest.mark.parametrize(("name", "value", "said"), [
    ("query_threads", "100000", "less than or equal to 1024"),  # a segfault of `facet embed`
    ("index_threads", "99999999999", "less than or equal to 1024"),  # a job failed in its worker
    ("broker_url", "localhost:6379", "not a URL (no scheme://)"),  # read as an AMQP host
    ("broker_url", "http://redis:6379/0", "'http' is not a broker transport Celery knows"),
    ("broker_url", "redis://u:se/cret@localhost:1/0", "must be percent-encoded"),
    ("result_backend", "redis:/:se/cret@h:1/0", "not a URL (no scheme://)"),
    ("result_backend", "redis://:se/cret@h:1/0", "must be percent-encoded"),
    ("qdrant_url", "http://u:se/cret@qdrant:6333", "must be percent-encoded"),
    # Celery splits a broker URL at every ";", a password's too (its start was then in
    # Celery's error): refused at start, said how to write one (its second verification).
    ("broker_url", "redis://:abcret;cdcret@127.0.0.1:1/0", "';' as %3B"),
    ("result_backend", "redis://:pa;ss://xcret@127.0.0.1:1/0", "';' as %3B"),
    # An "@" and a "/" in a password: its host read as "ss" (the final read).
    ("broker_url", "redis://:p@ss/wordcret@h:6379/0", "an '@' follows its host"),
])
def test_threads_and_service_urls_are_checked_when_settings_are_read(
        monkeypatch, tmp_path, name: str, value: str, said: str) -> None:
    """Each was accepted: a thread count past what torch takes crashed where it was first used
    (a segfault, a Rust panic at `facet serve`'s start, a worker's traceback), and a broker URL
    that cannot be read was "cannot reach the broker" with its password in clear, or started
    `facet serve` as if it were fine. Now one line names the variable, its password masked."""
    error = _refused(monkeypatch, tmp_path, **{name: value})
    assert f"FACET_{name.upper()}" in str(error) and said in str(error), str(error)
    assert "cret" not in str(error)


@pytest.mark.parametrize(("name", "value"), [
    ("query_threads", "1024"), ("broker_url", "redis://u:p%2Fw@localhost:6379/0"),
    ("broker_url", "rediss://h:6380/0"), ("broker_url", "amqp://guest:guest@h:5672//"),
    ("broker_url", "sqla+sqlite:///celery.db"), ("result_backend", "db+sqlite:///results.db"),
    ("broker_url", "sentinel://h1:26379;sentinel://h2:26379"),  # (Celery's lists: each read)
    ("result_backend", "cache+memcached://10.0.0.1:11211;10.0.0.2:11211/"),  # (hosts: one URL)
    ("result_backend", "sentinel://:p@h1:26379/0;sentinel://:p@h2:26379/0"),
    ("qdrant_url", "qdrant:6333"),  # (no scheme: read as http://qdrant:6333, as before)
])
def test_usable_threads_and_service_urls_still_pass(monkeypatch, tmp_path, name: str, value: str) -> None:
    monkeypatch.setenv("FACET_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(f"FACET_{name.upper()}", value)
    assert str(getattr(FacetSettings(), name)) == value


def test_a_password_holding_a_slash_is_masked_wherever_a_url_is_shown() -> None:
    """``redis://u:se/cret@localhost:1/0``: "/" ends the host, so the password's start read as
    the port and the rest as the path, and the whole URL was shown ("cannot reach the broker at
    ...", `facet serve`'s start-up line). From the user info's first ":" to the last "@" is
    masked where the port cannot be read; a URL whose "@" is in its path stays as it was."""
    from app.settings import masked_url

    assert masked_url("redis://u:se/cret@localhost:1/0") == "redis://u:***@localhost:1/0"
    assert masked_url("amqp://u:a?b#c@h:5672//") == "amqp://u:***@h:5672//"
    assert masked_url("redis://:x/y@h/0") == "redis://:***@h/0"
    assert masked_url("http://host:8080/a@b") == "http://host:8080/a@b"
    # Its final read: an "@" after the host may be a password's ("p@ss/word"), whose rest was
    # shown as the host and path: masked to the last "@" (more hidden, never less).
    assert masked_url("http://u:pw@h/x@y") == "http://u:***@y"
    assert masked_url("redis://:p@ss/word@h:6379/0") == "redis://:***@h:6379/0"
    # Its verification: a blank in such a password kept it whole; a sentinel list lost a host.
    assert masked_url("redis://:my pass/word@h:6379/0") == "redis://:***@h:6379/0"
    assert masked_url("sentinel://:pw@h1:26379;sentinel://:pw@h2:26379") == (
        "sentinel://:***@h1:26379;sentinel://:***@h2:26379")
    # A ";" in a password is no list: the pieces were masked apart and the password shown.
    assert masked_url("redis://:pa;ss://xSECRET@h:1/0") == "redis://:***@h:1/0"


def test_facet_dtype_is_read_by_the_decoders_as_the_settings_read_it(monkeypatch) -> None:
    """``FACET_DTYPE=" "`` passed the settings (blank: unset) and was "unknown dtype ' '" when a
    decoder loaded; ``facet_dtype=fp16`` was taken by the settings and ignored by the decoders
    (float32 without a word)."""
    import torch

    from embedders.backbone import pick_device

    monkeypatch.setenv("FACET_DTYPE", " ")
    assert pick_device("cpu").dtype == torch.float32
    monkeypatch.delenv("FACET_DTYPE")
    monkeypatch.setenv("facet_dtype", "FP16")
    assert pick_device("cpu").dtype == torch.float16
    monkeypatch.setenv("FACET_DTYPE", "bf16")  # the exact name wins
    assert pick_device("cpu").dtype == torch.bfloat16


def test_a_relative_data_or_model_folder_is_said_with_the_folder_it_reads(tmp_path) -> None:
    """``FACET_DATA_DIR=reldata`` was read from the working folder without a word: `facet
    collections` from another folder said "no collections yet" (a second, empty data folder),
    and a relative ``FACET_MODEL_CACHE_DIR`` converted the backbone again in each folder. It is
    kept, read as the absolute folder it names from here, and a warning says which."""
    import os

    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "FACET_DATA_DIR": "reldata", "FACET_MODEL_CACHE_DIR": "models",
           "OMP_NUM_THREADS": "1"}
    env.pop("FACET_CHECKPOINT_DIR", None)
    code = "from app.settings import get_settings as g; s = g(); print(s.data_dir, s.model_cache_dir)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**env, "PYTHONPATH": str(ROOT)}, cwd=work)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(work / "reldata"), str(work / "models")]
    listed = subprocess.run([sys.executable, "-m", "app", "collections"], capture_output=True,
                            text=True, timeout=120, env={**env, "PYTHONPATH": str(ROOT)}, cwd=work)
    assert listed.returncode == 0, listed.stderr
    assert (f"FACET_DATA_DIR='reldata' is a relative path: read as {work / 'reldata'}, from the "
            "current folder") in listed.stderr, listed.stderr
    assert listed.stderr.count("is a relative path") == 2  # data and models, once each
