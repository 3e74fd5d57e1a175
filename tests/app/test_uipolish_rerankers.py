"""`facet ui` checks FACET_UI_RERANKERS at start, as it checks FACET_API_MODELS: a reranker name
that cannot be served was offered by the Search tab and found only when a user picked it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from app.errors import InvalidRequestError
from tests.app.cli_runner import invoke_cli

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ui(tmp_path: Path, rerankers: str):  # type: ignore[no-untyped-def]
    import gradio

    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_API_KEY": "", "FACET_UI_AUTH": "",
           "FACET_UI_RERANKERS": rerankers}
    with mock.patch.object(gradio.Blocks, "block_thread", return_value=None):
        return invoke_cli("ui", "--port", str(_free_port()), "--preload", "", env=env)


@pytest.mark.parametrize(("rerankers", "said"), [
    ('["instemb","nope"]', "error: FACET_UI_RERANKERS names 'nope', which cannot be served: "
                           "unknown embedder 'nope'"),
    ('["instemb[bogus=1]"]', "error: FACET_UI_RERANKERS names 'instemb[bogus=1]', which cannot "
                             "be served: embedder 'instemb' has no option 'bogus'; options:"),
])
def test_the_ui_refuses_a_reranker_it_cannot_serve_at_start(tmp_path: Path, rerankers: str,
                                                            said: str) -> None:
    ui = _ui(tmp_path, rerankers)
    assert ui.returncode == 2, ui
    assert ui.stderr.startswith(said), ui.stderr
    assert ui.stderr.count("\n") == 1  # one line
    if "nope" in rerankers:
        assert "Valid names:" in ui.stderr and "inbedder" in ui.stderr  # what is accepted
    assert "Facet UI on" not in ui.stdout
    assert not (tmp_path / "data" / "facet.db").exists()  # before the data folder opened


def test_served_rerankers_and_none_pass_the_check() -> None:
    from app.api.server import check_ui_rerankers
    from app.settings import FacetSettings

    check_ui_rerankers(FacetSettings(ui_rerankers=["instemb", "inbedder", "instemb[max_length=64]"]))
    check_ui_rerankers(FacetSettings(ui_rerankers=[]))  # the Search tab offers no reranker
    with pytest.raises(InvalidRequestError, match="FACET_UI_RERANKERS names 'inbeder'"):
        check_ui_rerankers(FacetSettings(ui_rerankers=["inbeder"]))


@pytest.mark.parametrize("kept", [[], ["instemb"]])
def test_the_default_offers_the_rerankers_the_checkpoint_folder_holds(tmp_path: Path, kept) -> None:
    """A FACET_CHECKPOINT_DIR of the user's own checkpoints without instemb and inbedder stopped
    `facet serve` and `facet ui`: "FACET_UI_RERANKERS names 'instemb', which cannot be served",
    a setting never set. Unset, its default is offered as far as it loads; set, it is checked."""
    import shutil

    folder = tmp_path / "mine"
    folder.mkdir()
    for name in kept:
        shutil.copytree(ROOT / "checkpoints" / name, folder / name)
    code = ("from app.api.server import check_ui_rerankers\n"
            "from app.core import ui_rerankers\n"
            "from app.settings import FacetSettings, apply_settings\n"
            "apply_settings(FacetSettings())\n"
            "check_ui_rerankers(FacetSettings())\n"
            "print(ui_rerankers(FacetSettings()))\n"
            "check_ui_rerankers(FacetSettings(ui_rerankers=['inbedder']))\n")
    env = {**os.environ, "FACET_CHECKPOINT_DIR": str(folder), "FACET_DATA_DIR": str(tmp_path / "d")}
    env.pop("FACET_UI_RERANKERS", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.stdout == f"{kept}\n", done.stderr
    assert "FACET_UI_RERANKERS names 'inbedder', which cannot be served" in done.stderr


def test_serve_refuses_them_where_it_mounts_the_ui_as_the_ui_does(tmp_path: Path) -> None:
    # `facet serve` mounts the UI at /ui by default (FACET_UI_MOUNT): its Search tab offered
    # the name all the same, and only `facet ui` refused it (a verification, 2026-12-01).
    rerankers = '["instemb","nope"]'
    ui = _ui(tmp_path, rerankers)
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_API_KEY": "",
           "FACET_UI_RERANKERS": rerankers}
    serve = invoke_cli("serve", "--port", str(_free_port()), "--preload", "", env=env)
    assert ui.returncode == serve.returncode == 2, (ui, serve)
    assert ui.stderr == serve.stderr, (ui.stderr, serve.stderr)
    assert not (tmp_path / "data" / "facet.db").exists()  # refused before the data folder opened
    # Without the UI mounted nothing offers them: not checked, as before
    from app.api import create_app
    from app.settings import FacetSettings

    create_app(settings=FacetSettings(data_dir=tmp_path / "data", ui_mount=False,
                                      ui_rerankers=["nope"]))
    with pytest.raises(InvalidRequestError, match="FACET_UI_RERANKERS names 'nope'"):
        create_app(settings=FacetSettings(data_dir=tmp_path / "data", ui_rerankers=["nope"]))
