"""The facade agrees with the HTTP API on what a bad argument is, so every edge (CLI, HTTP,
Python ``Facet``) refuses it the same way.

* A collection name that is none (empty, blank, ``café``): HTTP refused it (400 "collection is
  empty" / "invalid collection name"), the facade called it unknown: `facet jobs -c ""`,
  `facet jobs -c café`, `facet documents café`, `facet delete café -d x -y` exited 3 "unknown
  collection", ``jobs("")`` was a ``NotFoundError``, ``job(1, "")`` "job 1 is not of collection
  ''", while `facet search -c café` and `facet delete café` said "invalid collection name" (2).
* An unknown model's ``param``: None for ``search(embedder=...)``, ``embed``, ``index``,
  ``submit_index``, ``upload``, a cluster's nested search, where ``cluster`` and a blank
  embedder named the field.
* ``role``: ``embed(role="Query")`` (and `facet embed --role Query`) was read as a query, where
  ``POST /v1/embeddings`` refused it (400): now refused everywhere, ``param`` ``role``.

Real minilm, SQLite, the edge store; the CLI in process (CliRunner), the app in process
(TestClient).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.api.errors import domain_status
from app.core import Facet
from app.encoding import EmbedderCache
from app.errors import FacetError, InvalidRequestError, UnknownModelError
from app.services.clustering import ClusterRequest
from app.services.indexing import IndexOptions
from app.services.search import SearchRequest
from app.settings import FacetSettings
from embedders.contract import Role
from tests.app.api.conftest import serving_facet
from tests.app.cli_runner import invoke_cli

COLLECTION = "c1"
EMPTY = "collection is empty: give a collection's name, or leave the parameter out"
INVALID = "invalid collection name "
MINILM = IndexOptions(embedder="minilm")


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("parity_src")
    (root / "a.txt").write_text("My card was declined at the shop.")
    (root / "b.txt").write_text("Card fees rise in May.")
    return root


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory, src) -> Iterator[Facet]:
    """A facade over a data folder holding ``c1`` (its job 1)."""
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path_factory.mktemp("parity") / "data",
                                chunk_tokens=64, chunk_overlap=8), embedders=cache)
    facet.index(src, COLLECTION, MINILM)
    yield facet
    facet.close()


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory, src) -> Iterator[TestClient]:
    facet = serving_facet(tmp_path_factory.mktemp("parity_api") / "data", minilm,
                          chunk_tokens=64, chunk_overlap=8)
    facet.index(src, COLLECTION, MINILM)
    with TestClient(create_app(facet)) as client:
        yield client
    facet.close()


def _raised(call: Callable[[], Any]) -> FacetError:
    with pytest.raises(FacetError) as info:
        call()
    return info.value


# ------------------------------------------------------------------- collection names

# (method, call): each takes a collection name; the optional ones read "" as "none given".
OPTIONAL: list[tuple[str, Callable[[Facet, str], Any]]] = [
    ("jobs", lambda f, n: f.jobs(n)),
    ("job", lambda f, n: f.job(1, n)),
    ("cancel_job", lambda f, n: f.cancel_job(1, n)),
]
REQUIRED: list[tuple[str, Callable[[Facet, str], Any]]] = [
    ("documents", lambda f, n: f.documents(n)),
    ("remove_documents", lambda f, n: f.remove_documents(n, ["x"])),
    ("check_removal", lambda f, n: f.check_removal(n, ["x"])),
    ("removal_parts", lambda f, n: f.removal_parts(n, ["x"])),
    ("orphan_collection", lambda f, n: f.orphan_collection(n)),
    ("delete_collection", lambda f, n: f.delete_collection(n)),
    ("upload_folder", lambda f, n: f.upload_folder(n)),
    ("search", lambda f, n: f.search(SearchRequest("card", n))),
    ("submit_index", lambda f, n: f.submit_index("/nonexistent", n, MINILM)),
]


@pytest.mark.parametrize("name", ["", "   "])
@pytest.mark.parametrize("method,call", OPTIONAL, ids=[m for m, _ in OPTIONAL])
def test_an_empty_optional_collection_is_refused_as_empty(facet, method, call, name) -> None:
    """``jobs("")`` was a NotFoundError "unknown collection ''", ``job(1, "")`` "job 1 is not
    of collection '' but of 'c1'": the API's 400 now, with its words."""
    e = _raised(lambda: call(facet, name))
    assert type(e) is InvalidRequestError, (type(e), str(e))
    assert str(e) == EMPTY and e.param == "collection"


@pytest.mark.parametrize("name", ["café", "a/b", "-x"])
@pytest.mark.parametrize("method,call", OPTIONAL + REQUIRED, ids=[m for m, _ in OPTIONAL + REQUIRED])
def test_a_name_the_store_refuses_is_invalid_on_every_method(facet, method, call, name) -> None:
    e = _raised(lambda: call(facet, name))
    assert type(e) is InvalidRequestError, (type(e), str(e))
    assert str(e).startswith(f"{INVALID}{name!r}") and e.param == "collection"


@pytest.mark.parametrize("method,call", REQUIRED, ids=[m for m, _ in REQUIRED])
def test_an_empty_required_collection_is_an_invalid_name(facet, method, call) -> None:
    e = _raised(lambda: call(facet, ""))
    assert type(e) is InvalidRequestError and str(e).startswith(f"{INVALID}''")
    assert e.param == "collection"


def test_collection_names_no_field_as_its_not_found_does(facet) -> None:
    """``collection(name)``: the HTTP path names it (``GET /collections/{name}``), so no
    ``param``, as its NotFoundError; invalid, not unknown."""
    e = _raised(lambda: facet.collection("café"))
    assert type(e) is InvalidRequestError and str(e).startswith(f"{INVALID}'café'")
    assert e.param is None
    assert facet.collection(COLLECTION).name == COLLECTION  # a good name still answers


def test_a_good_name_is_still_read(facet) -> None:
    assert [j.collection for j in facet.jobs(COLLECTION)] == [COLLECTION]
    assert facet.job(1, COLLECTION).id == 1
    assert len(facet.documents(COLLECTION)) == 2
    assert facet.orphan_collection(COLLECTION) is None


@pytest.mark.parametrize("args,said", [
    (["jobs", "-c", ""], EMPTY),
    (["jobs", "1", "-c", ""], EMPTY),
    (["jobs", "-c", "café"], INVALID),
    (["documents", "café"], INVALID),
    (["delete", "café", "-d", "x", "-y"], INVALID),
    # (these said so already: the same words and exit)
    (["search", "x", "-c", "café"], INVALID),
    (["delete", "café", "-y"], INVALID),
    (["collections", "café"], INVALID),
])
def test_the_cli_refuses_them_alike_with_exit_2(tmp_path, args, said) -> None:
    done = invoke_cli(*args, env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert said in done.stderr and "unknown collection" not in done.stderr


@pytest.mark.parametrize("path,name", [
    ("/jobs?collection=", ""), ("/jobs?collection=%20", " "), ("/jobs?collection=caf%C3%A9", "café"),
    ("/jobs/1?collection=", ""), ("/jobs/1?collection=caf%C3%A9", "café"),
])
def test_http_and_the_facade_answer_a_job_listing_alike(facet, served, path, name) -> None:
    """The same status, message and ``param`` over HTTP and from the facade."""
    call = (lambda: facet.job(1, name)) if path.startswith("/jobs/1") else (lambda: facet.jobs(name))
    e = _raised(call)
    answer = served.get(path)
    assert answer.status_code == domain_status(e)[0] == 400
    body = answer.json()["error"]
    assert (body["message"], body["param"]) == (str(e), e.param)


def test_http_answers_for_a_path_name_are_unchanged(served) -> None:
    """``GET``/``DELETE /collections/café`` and its documents: 400, the store's words, no
    ``param`` (the path names it), as before the facade checked the name."""
    for method, path in [("GET", "/collections/caf%C3%A9"), ("DELETE", "/collections/caf%C3%A9"),
                         ("GET", "/collections/caf%C3%A9/documents"),
                         ("DELETE", "/collections/caf%C3%A9/documents?key=x")]:
        answer = served.request(method, path)
        assert answer.status_code == 400, (method, path, answer.text)
        body = answer.json()["error"]
        assert body["message"].startswith(f"{INVALID}'café'") and body["param"] is None


# ------------------------------------------------------------------- unknown models

UNKNOWN_MODELS: list[tuple[str, Callable[[Facet, Path], Any], str]] = [
    ("search", lambda f, s: f.search(SearchRequest("x", COLLECTION, embedder="nomodel")), "embedder"),
    ("search rerank", lambda f, s: f.search(SearchRequest("x", COLLECTION, rerank="nomodel")), "rerank"),
    ("embed", lambda f, s: f.embed(["x"], embedder="nomodel"), "embedder"),
    ("embedder", lambda f, s: f.embedder("nomodel"), "embedder"),
    ("index", lambda f, s: f.index(s, "c2", IndexOptions(embedder="nomodel")), "embedder"),
    ("submit_index", lambda f, s: f.submit_index(s, "c2", IndexOptions(embedder="nomodel")),
     "embedder"),
    ("upload", lambda f, s: f.upload("c3", [s / "a.txt"], embedder="nomodel"), "embedder"),
    ("cluster", lambda f, s: f.cluster(ClusterRequest("topic", texts=["a", "b", "c"],
                                                      embedder="nomodel")), "embedder"),
    ("cluster search", lambda f, s: f.cluster(ClusterRequest(
        "topic", search=SearchRequest("x", COLLECTION, embedder="nomodel"))), "search.embedder"),
]


@pytest.mark.parametrize("what,call,param", UNKNOWN_MODELS, ids=[w for w, _, _ in UNKNOWN_MODELS])
def test_an_unknown_model_names_its_field(facet, src, what, call, param) -> None:
    e = _raised(lambda: call(facet, src))
    assert isinstance(e, UnknownModelError), (type(e), str(e))
    assert "'nomodel'" in str(e) and e.param == param
    assert "c2" not in {c.name for c in facet.collections()}  # refused before anything ran


# ------------------------------------------------------------------- embed's role

@pytest.mark.parametrize("role", ["Query", "QUERY", "Document", " query", "nope", 5])
def test_a_role_is_exactly_query_or_document(facet, role) -> None:
    e = _raised(lambda: facet.embed(["x"], role=role))
    assert type(e) is InvalidRequestError and e.param == "role"
    assert str(e).startswith(f"unknown role {role!r}; use one of: query, document")


def test_the_roles_as_written_still_embed(facet) -> None:
    assert facet.embed(["x"], role="query").role == "query"
    assert facet.embed(["x"], role=Role.QUERY).role == "query"
    assert facet.embed(["x"], role="document").role == "document"
    assert facet.embed(["x"]).role == "document"


def test_http_and_the_cli_refuse_a_capitalised_role_too(served, tmp_path) -> None:
    answer = served.post("/v1/embeddings", json={"model": "minilm", "input": ["hi"],
                                                 "role": "Query"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "role"
    done = invoke_cli("embed", "hi", "--role", "Query", env={"FACET_DATA_DIR": str(tmp_path)})
    assert done.returncode == 2, (done.returncode, done.stdout[:200], done.stderr)
    assert "unknown role 'Query'; use one of: query, document" in done.stderr
