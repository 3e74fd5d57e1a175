"""What docs/api.md and README.md list of the API is what the app serves.

docs/api.md's list of operationIds left out ``listDocuments`` and ``removeDocuments``, and
README.md's route summary ``POST /jobs/{id}/cancel``, ``DELETE /collections/{name}/documents``
and ``GET /v1/models/{id}``."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.routing import APIRoute

ROOT = Path(__file__).resolve().parents[3]


def _served_operation_ids(client) -> set[str]:
    spec = client.get("/openapi.json").json()
    return {op["operationId"] for path in spec["paths"].values() for op in path.values()
            if isinstance(op, dict) and "operationId" in op}


def test_the_documented_operation_ids_are_the_apps(client) -> None:
    text = " ".join((ROOT / "docs" / "api.md").read_text().split())
    listed = re.search(r"each operation has a short `operationId`, (.*?) \(until", text)
    assert listed is not None, "docs/api.md's operationId list not found"
    documented = re.findall(r"`([A-Za-z]+)`", listed.group(1))
    assert len(documented) == len(set(documented)), documented
    assert set(documented) == _served_operation_ids(client)


def test_the_readme_names_every_route(client) -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    summary = re.search(r"`POST /v1/embeddings` is OpenAI-compatible(.*?)Bad input", text)
    assert summary is not None, "README.md's route summary not found"
    named = {(m, re.sub(r"\{[^}]*\}", "{}", p))
             for m, p in re.findall(r"`(GET|POST|DELETE|PUT|PATCH) (/[^` ]*)`", summary.group(1))}
    named.add(("POST", "/v1/embeddings"))
    served = {(method, re.sub(r"\{[^}]*\}", "{}", route.path))
              for route in client.app.routes if isinstance(route, APIRoute) and route.include_in_schema
              for method in route.methods if method != "HEAD"}
    assert served - named == set(), "routes README.md does not name"
    assert named - served == set(), "routes README.md names that are not served"
