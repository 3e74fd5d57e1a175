"""Small rough edges of settings and errors: ``FACET_DEVICE``/``FACET_DTYPE`` in any case (as
``FACET_BULK_PIECE_MS`` takes ``OFF``), a bad ``FACET_BULK_PIECE_MS`` naming ``off``, a
CUDA-less ``FACET_DEVICE=cuda`` naming the setting, and /cluster's too-large k naming its
param. Real minilm and store."""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from app.api import create_app
from app.encoding import EmbedderCache
from app.errors import InvalidRequestError, UnavailableError
from app.settings import FacetSettings, get_settings
from embedders.backbone import pick_device
from tests.app.api.conftest import serving_facet


def test_device_and_dtype_are_read_in_any_case(environment) -> None:
    """``CUDA`` and ``BF16`` were refused; they are stored lower-case, as torch reads them."""
    environment.setenv("FACET_DEVICE", "CUDA:1")
    environment.setenv("FACET_DTYPE", " BF16 ")
    settings = FacetSettings()
    assert (settings.device, settings.dtype) == ("cuda:1", "bf16")
    environment.setenv("FACET_DEVICE", "Gpu")
    with pytest.raises(InvalidRequestError, match=r"FACET_DEVICE='Gpu': .*use cpu, cuda"):
        get_settings()


def test_the_embedders_read_facet_dtype_in_any_case(environment) -> None:
    """The settings accept ``BF16``; the backbone, which reads FACET_DTYPE itself, must too (a
    decoder's load said "unknown dtype 'BF16'")."""
    environment.setenv("FACET_DTYPE", "BF16")
    assert pick_device("cpu").dtype is torch.bfloat16


@pytest.mark.parametrize("value", ["abc", "fast"])
def test_a_bulk_piece_ms_that_is_not_a_number_names_off(environment, value) -> None:
    """pydantic's "unable to parse string as a number" did not say 'off' was allowed."""
    environment.setenv("FACET_BULK_PIECE_MS", value)
    with pytest.raises(InvalidRequestError) as caught:
        get_settings()
    assert f"FACET_BULK_PIECE_MS={value!r}" in str(caught.value)
    assert "'off' or 0" in str(caught.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_cuda_without_a_gpu_names_the_setting() -> None:
    """The embedders' "use device='cpu'" is a Python argument; a CLI or API user sets
    FACET_DEVICE (EmbedderCache is built on settings.device). The server's configuration, not
    the request: an UnavailableError (503, exit 7), not a DataError (a 422 "unreadable data")."""
    with pytest.raises(UnavailableError) as caught:
        EmbedderCache("cuda").get("minilm")
    message = str(caught.value)
    assert "no CUDA GPU is available; use the cpu device (FACET_DEVICE=cpu)" in message
    assert "device='cpu'" not in message


def test_a_k_over_the_texts_names_k_as_the_param(tmp_path, minilm) -> None:
    """The 400 said "(omit k)" but its param was null, unlike every field that fails validation."""
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        with TestClient(create_app(facet)) as client:
            r = client.post("/cluster", json={"instruction": "x", "texts": ["a", "b"], "k": 5})
    finally:
        facet.close()
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "k" and error["type"] == "invalid_request_error", error
    assert error["message"].endswith("(omit k)"), error
