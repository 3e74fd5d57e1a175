"""Options one edge took and another did not: ``"k": 0`` in ``POST /cluster`` (the CLI's and
the UI's "choose k by silhouette"), and ``facet search --score-threshold`` / ``--exact`` (the
facade's, the API's and LangChain's ``score_threshold`` and ``exact``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import jsonschema
import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from tests.app.api.conftest import serving_facet
from tests.app.cli_runner import invoke_cli

TEXTS = ["card lost", "card stolen", "card missing", "rate of exchange", "exchange rates", "currency rate"]


@pytest.fixture(scope="module")
def client(minilm, tmp_path_factory) -> Iterator[TestClient]:
    facet = serving_facet(tmp_path_factory.mktemp("edge_gaps") / "data", minilm)
    with TestClient(create_app(facet)) as c:
        yield c
    facet.close()


def test_cluster_k_0_chooses_k_as_omitting_it_does(client) -> None:
    """``"k": 0`` was refused ("k: Input should be greater than or equal to 2")."""
    body = {"instruction": "topic", "texts": TEXTS}
    omitted = client.post("/cluster", json=body)
    zero = client.post("/cluster", json=body | {"k": 0})
    assert zero.status_code == omitted.status_code == 200, zero.text
    assert zero.json()["k_chosen"] is True
    assert zero.json()["labels"] == omitted.json()["labels"]
    assert zero.json()["k"] == omitted.json()["k"]


@pytest.mark.parametrize("k", [1, -3])
def test_cluster_k_below_2_is_refused_saying_how_to_choose(client, k) -> None:
    r = client.post("/cluster", json={"instruction": "topic", "texts": TEXTS, "k": k})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "k"
    assert "0 or omit k to choose it by silhouette" in error["message"], error


def test_openapi_says_k_0_or_omitted_chooses(client) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ClusterBody"]
    k = schema["properties"]["k"]
    # 0 (choose), 2 and more, or null; 1 is refused by the server, and the schema says so.
    accepts = jsonschema.Draft202012Validator(k).is_valid
    assert [accepts(v) for v in (0, 2, 7, None, 1, -1, 2.5)] == [True] * 4 + [False] * 3, k
    assert "0 or omitted: chosen by silhouette" in k["description"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Callable[..., object]:
    """``facet ARGS`` over a tiny minilm collection of six one-line documents."""
    root = tmp_path_factory.mktemp("edge_gaps_cli")
    env = {"FACET_DATA_DIR": str(root / "data")}
    src = root / "notes"
    src.mkdir()
    for i, text in enumerate(TEXTS):
        (src / f"n{i}.txt").write_text(f"My {text} today.")
    indexed = invoke_cli("index", str(src), "-c", "notes", "--embedder", "minilm", env=env)
    assert indexed.returncode == 0, indexed.stderr

    def invoke(*args: str):
        return invoke_cli(*args, env=env)

    return invoke


def _search(run, *args: str) -> dict:
    found = run("search", "my bank card was stolen", "-c", "notes", "--json", *args)
    assert found.returncode == 0, found.stderr or found.stdout
    return json.loads(found.stdout)


def test_search_score_threshold_drops_the_results_below_it(run) -> None:
    every = _search(run, "--mode", "dense")["results"]
    assert len(every) == len(TEXTS)
    scores = [r["score"] for r in every]
    threshold = (scores[1] + scores[2]) / 2  # between the second and the third
    kept = _search(run, "--score-threshold", str(threshold))
    assert [r["doc_id"] for r in kept["results"]] == [r["doc_id"] for r in every[:2]]
    assert all(r["score"] >= threshold for r in kept["results"])
    # As in the API: a threshold is on the cosine scale, so auto searches dense.
    assert kept["mode"] == "dense"
    none = run("search", "my bank card was stolen", "-c", "notes", "--score-threshold", "1.01")
    assert none.returncode == 0 and "no results" in none.stdout, none.stdout


def test_search_exact_gives_the_approximate_top_hits_on_a_tiny_collection(run) -> None:
    approximate = _search(run, "--mode", "dense", "-k", "3")["results"]
    exact = _search(run, "--mode", "dense", "-k", "3", "--exact")["results"]
    assert [r["doc_id"] for r in exact] == [r["doc_id"] for r in approximate]
    assert [r["score"] for r in exact] == pytest.approx([r["score"] for r in approximate], abs=1e-5)
    assert "n1" in exact[0]["doc_id"]  # "card stolen"


def test_search_help_names_both_options(run) -> None:
    shown = run("search", "--help")
    assert shown.returncode == 0
    assert "--score-threshold" in shown.stdout and "--exact" in shown.stdout
