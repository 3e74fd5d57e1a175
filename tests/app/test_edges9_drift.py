"""Edges whose copies of one rule drifted apart (2026-11-30 maintainer review):

* `facet ui` on a non-loopback host without a login said nothing (`facet serve` warns);
* `facet ui` served a FACET_API_MODELS name that cannot be served (`facet serve` exits 2);
* `facet eval` read deeply nested JSON into a RecursionError traceback (`facet cluster`: one line);
* the broker URL's ``?password=`` was printed in clear by `facet index --background` and
  `facet worker` (`app.remote.check_broker`).
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from unittest import mock

import pytest

from app.errors import DataError, UnavailableError
from tests.app.cli_runner import invoke_cli

DEEP = "[" * 100_000 + "]" * 100_000  # past json's recursion limit


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- facet ui: the login warning and FACET_API_MODELS -----------------------------------------


def _ui(tmp_path: Path, host: str, **env: str):  # type: ignore[no-untyped-def]
    """`facet ui --host HOST` started for real, its Gradio loop returning at once."""
    import gradio

    base = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_API_KEY": "", "FACET_UI_AUTH": ""}
    with mock.patch.object(gradio.Blocks, "block_thread", return_value=None):
        return invoke_cli("ui", "--host", host, "--port", str(_free_port()), "--preload", "",
                          env=base | env)


def test_the_ui_warns_when_anyone_may_use_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="app.commands.ui"):
        result = _ui(tmp_path, "0.0.0.0")
    assert result.returncode == 0, result
    warned = [r.getMessage() for r in caplog.records if r.name == "app.commands.ui"]
    assert len(warned) == 1, caplog.text
    assert warned[0].startswith("listening on 0.0.0.0 without a login: anyone who can reach this "
                                "port can read, index into and delete every collection"), warned
    assert "FACET_UI_AUTH=" in warned[0] and "127.0.0.1" in warned[0]


@pytest.mark.parametrize(("host", "env"), [
    ("0.0.0.0", {"FACET_UI_AUTH": "ann:a-long-password"}),
    ("0.0.0.0", {"FACET_API_KEY": "a-long-api-key"}),  # the login's password then
    ("127.0.0.1", {}),
    ("localhost", {}),
])
def test_the_ui_does_not_warn_with_a_login_or_on_loopback(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        host: str, env: dict[str, str]) -> None:
    from app.commands.ui import _warn_open
    from app.settings import FacetSettings
    from ui.app import ui_auth

    settings = FacetSettings(data_dir=tmp_path / "data", **{k[6:].lower(): v for k, v in env.items()})
    with caplog.at_level(logging.WARNING, logger="app.commands.ui"):
        _warn_open(host, settings, login=ui_auth(settings) is not None)
    assert caplog.records == []


def test_the_ui_refuses_api_models_it_cannot_serve_as_serve_does(tmp_path: Path) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_API_MODELS": '["minilm","nope"]'}
    ui = _ui(tmp_path, "127.0.0.1", **env)  # it started (and would have blocked) before
    serve = invoke_cli("serve", "--port", str(_free_port()), "--preload", "", env=env)
    assert ui.returncode == serve.returncode == 2, (ui, serve)
    assert ui.stderr == serve.stderr, (ui.stderr, serve.stderr)
    assert ui.stderr.startswith("error: FACET_API_MODELS names 'nope', which cannot be served"), ui.stderr
    assert "Facet UI on" not in ui.stdout
    assert not (tmp_path / "data" / "facet.db").exists()  # refused before the data folder opened


# -- facet eval: JSON nested too deeply ------------------------------------------------------------


def test_eval_loaders_refuse_deep_json_as_cluster_does(tmp_path: Path) -> None:
    from app.evaluation import loaders

    goalex = tmp_path / "goalex"
    goalex.mkdir()
    (goalex / "data.json").write_text(DEEP)
    (goalex / "labels.json").write_text('{"labels": [0, 1]}')
    with pytest.raises(DataError, match=r"goalex/data\.json: JSON nested too deeply to read \(lists "
                                        r"or objects inside each other more than about \d+ levels "
                                        r"deep\); flatten it"):
        loaders.load_goalex(goalex)

    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "text": "one"}\n' + DEEP + "\n")
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "one?"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(DataError, match=r"corpus\.jsonl, line 2: JSON nested too deeply to read"):
        loaders.load_beir(beir)

    from app.services.clustering import read_label_file

    (tmp_path / "labels.json").write_text(DEEP)
    with pytest.raises(DataError) as cluster:
        read_label_file(tmp_path / "labels.json")
    with pytest.raises(DataError) as evaluation:
        loaders._read_json(tmp_path / "labels.json")
    assert str(cluster.value) == str(evaluation.value)  # one message, from one place


def test_facet_eval_says_deep_json_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "deep"
    folder.mkdir()
    (folder / "data.json").write_text(DEEP)
    (folder / "labels.json").write_text("[0, 1]")
    result = invoke_cli("eval", "minilm", "--task", f"goalex:{folder}", "-o", str(tmp_path / "out"),
                        env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 4, result
    assert result.stderr.startswith(f"error: {folder / 'data.json'}: JSON nested too deeply to read"), \
        result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr


# -- the broker URL's password ---------------------------------------------------------------------


def _closed_broker() -> str:
    return f"redis://127.0.0.1:{_free_port()}/0?password=s3cretPW"


def test_check_broker_masks_a_password_in_the_query(tmp_path: Path) -> None:
    from app.remote import check_broker
    from app.settings import FacetSettings

    settings = FacetSettings(data_dir=tmp_path / "data", broker_url=_closed_broker(), broker_timeout_s=1)
    with pytest.raises(UnavailableError) as info:
        check_broker(settings)
    assert "s3cretPW" not in str(info.value)
    assert "?password=*** (ConnectionError: " in str(info.value), info.value


@pytest.mark.parametrize("args", [("index", "{src}", "-c", "bg", "--background"), ("worker",)])
def test_the_cli_never_prints_the_brokers_password(tmp_path: Path, args: tuple[str, ...]) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("card payment declined")
    result = invoke_cli(*(a.format(src=src) for a in args),
                        env={"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_BROKER_URL": _closed_broker(),
                             "FACET_BROKER_TIMEOUT_S": "1"})
    assert result.returncode != 0, result
    assert "cannot reach the broker at redis://127.0.0.1:" in result.stderr, result.stderr
    assert "s3cretPW" not in result.stdout + result.stderr, result.stderr
    assert "?password=***" in result.stderr


def test_encode_on_workers_without_a_broker_names_both_settings(tmp_path: Path) -> None:
    """``FACET_ENCODE_ON_WORKERS=true`` without a broker said only "no broker configured: set
    FACET_BROKER_URL": not the setting that asked for workers, nor how to encode here."""
    from app.remote import celery_client
    from app.settings import FacetSettings

    with pytest.raises(UnavailableError) as asked:
        celery_client(FacetSettings(data_dir=tmp_path / "data", encode_on_workers=True))
    assert str(asked.value) == (
        "no broker configured: set FACET_BROKER_URL (e.g. redis://localhost:6379/0) to use workers "
        "(FACET_ENCODE_ON_WORKERS=true sends queries to them), or set FACET_ENCODE_ON_WORKERS=false "
        "to encode in this process")
    with pytest.raises(UnavailableError) as plain:  # (a worker or `--background` asked for them)
        celery_client(FacetSettings(data_dir=tmp_path / "data"))
    assert "ENCODE_ON_WORKERS" not in str(plain.value)
