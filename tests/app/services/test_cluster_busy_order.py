"""`facet cluster --collection` refuses an unknown or busy collection before anything imports torch.

Its ``--explain`` is inbedder by default, and ``ClusterService.validate`` checked the explainer's
name first, through the model registry, which imports torch (about 4 s on 2 cores): a collection
another process held (an edge store's folder lock) was refused after 8.5 s, an unknown one after
the same import. The collection is now looked at first (as `facet search` does: ``refuse_if_busy``);
``validate`` called alone (the API's and the workers' early refusal) still checks the explainer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.errors import InvalidRequestError, NotFoundError, UnknownModelError
from app.services.clustering import ClusterRequest, ClusterService
from app.services.indexing import IndexService

from .conftest import ROOT, locked_by_another_process, write_corpus

# Runs the CLI's main in a fresh process and says, as it exits, whether torch was imported.
_CLI = (
    "import json, sys\n"
    "from app.cli import main\n"
    "sys.argv = ['facet', 'cluster', '--collection', sys.argv[1], '--instruction', 'What is it about?']\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as e:\n"
    "    print(json.dumps({'code': e.code, 'torch': 'torch' in sys.modules}))\n"
)


def _facet_cluster(data: Path, collection: str) -> tuple[dict[str, object], str]:
    """`facet cluster --collection COLLECTION` (default ``--explain``) on ``data``: what it
    exited with and whether torch was imported, and its stderr."""
    env = dict(
        os.environ, PYTHONPATH=str(ROOT), FACET_DATA_DIR=str(data), FACET_STORE_WAIT_S="0.3", OMP_NUM_THREADS="1"
    )
    done = subprocess.run(
        [sys.executable, "-c", _CLI, collection], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.fixture
def indexed(make_ctx, tmp_path: Path):
    """A context whose collection ``c`` holds two small documents, let go of (another process
    may lock it)."""
    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx(store_wait_s=0.3)
    IndexService(ctx).index(tmp_path / "src", "c")
    ctx.store.release("c")
    return ctx


def test_cli_refuses_a_busy_collection_before_torch(indexed) -> None:
    data = indexed.settings.data_dir
    with locked_by_another_process(data, "c", shown_as="facet serve") as holder:
        exited, stderr = _facet_cluster(data, "c")
    assert f"collection 'c' is open in pid {holder.pid}" in stderr, stderr
    assert exited["code"] not in (0, None)
    assert exited["torch"] is False, "torch was imported before the busy collection was refused"


def test_cli_refuses_an_unknown_collection_before_torch(indexed) -> None:
    exited, stderr = _facet_cluster(indexed.settings.data_dir, "nope")
    assert "unknown collection 'nope' (known: c)" in stderr, stderr
    assert exited["code"] not in (0, None)
    assert exited["torch"] is False, "torch was imported before the unknown collection was refused"


def test_a_bad_collection_is_said_before_a_bad_explainer(indexed) -> None:
    """Both wrong: the collection source is refused for its collection (``cluster``'s order)."""
    request = ClusterRequest("What is it about?", collection="nope", explainer="no-such-model")
    with pytest.raises(NotFoundError, match="unknown collection 'nope'") as refused:
        ClusterService(indexed).cluster(request)
    assert not isinstance(refused.value, UnknownModelError)


def test_validate_alone_still_refuses_the_explainer(indexed) -> None:
    """``validate`` does not look at the collection: an unknown or non-answering explainer is
    refused from its name, whatever the collection (the API and the workers refuse early so)."""
    service = ClusterService(indexed)
    with pytest.raises(UnknownModelError, match="unknown explainer 'no-such-model'"):
        service.validate(ClusterRequest("What is it about?", collection="nope", explainer="no-such-model"))
    with pytest.raises(InvalidRequestError, match="explainer 'minilm' does not generate answers"):
        service.validate(ClusterRequest("What is it about?", collection="c", explainer="minilm"))
    assert indexed.embedders.peek("inbedder") is None  # refused from the name: nothing loaded
