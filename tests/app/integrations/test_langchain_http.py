"""FacetRetriever over HTTP (``base_url=``) against a real ``facet serve`` subprocess: the same
documents as in process, the API's errors as the domain errors, a server down named; the
search's note surfaced (both modes); a bad setting a FacetError; the examples' one-line exits.

The server owns a small collection's data folder; the in-process facade the results are
compared with owns a copy of it (one process per folder)."""

from __future__ import annotations

import datetime
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.runnables import RunnableLambda

from app.commands.demo import SAMPLE_FILE
from app.core import Facet
from app.encoding import EmbedderCache
from app.errors import AuthenticationError, FacetError, InvalidRequestError, NotFoundError, UnavailableError
from app.integrations.langchain import FacetRetriever, to_document
from app.services.search import SearchRequest
from app.settings import FacetSettings

from ..served import facet_serve, free_port

ROOT = Path(__file__).resolve().parents[3]
COLLECTION = "bank"
INTENT = "Find messages with the same customer intent"
# An inner space, as a server may be given one (it reads the token after "Bearer "): the
# retriever once refused what the server accepted.
KEY = "test key"
QUERY = "my card payment was declined"


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory) -> Iterator[tuple[str, Facet]]:
    """(the server's URL, an in-process facade over a copy of its data folder)."""
    base = tmp_path_factory.mktemp("lchttp")
    sample = base / "bank.jsonl"
    with SAMPLE_FILE.open(encoding="utf-8") as f:  # 2 messages of every 4th intent: 78
        sample.write_text("".join(line for i, line in enumerate(f) if i % 8 < 2), encoding="utf-8")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet.for_serving(FacetSettings(data_dir=base / "served"), embedders=cache) as facet:
        facet.index(sample, COLLECTION)
    shutil.copytree(base / "served", base / "local")
    local = Facet.for_serving(FacetSettings(data_dir=base / "local"), embedders=cache)
    try:
        with facet_serve({"FACET_DATA_DIR": str(base / "served"), "FACET_API_KEY": KEY,
                          "FACET_UI_MOUNT": "false", "FACET_DEFAULT_EMBEDDER": "minilm"}, start_s=120) as url:
            yield url, local
    finally:
        local.close()


def both(served: tuple[str, Facet], **settings: Any) -> tuple[FacetRetriever, FacetRetriever]:
    """The same retriever over HTTP and in process."""
    url, facet = served
    return (FacetRetriever(collection=COLLECTION, base_url=url, api_key=KEY, **settings),
            FacetRetriever(collection=COLLECTION, facet=facet, **settings))


SERVED = r"; this server does not serve [^:]*: FACET_API_MODELS sets what it serves\)"


def assert_same(remote: list, local: list) -> None:
    """Same texts, doc ids, scores (1e-4) and metadata keys and values."""
    assert remote and len(remote) == len(local)
    assert [d.page_content for d in remote] == [d.page_content for d in local]
    for r, lo in zip(remote, local, strict=True):
        assert set(r.metadata) == set(lo.metadata)
        for key, value in lo.metadata.items():
            if isinstance(value, float):
                assert r.metadata[key] == pytest.approx(value, abs=1e-4), key
            elif key == "note" and value:
                # The server says which embedder its weak-instruction note offers it does not
                # serve (FACET_API_MODELS), where in process both load: the rest is the same.
                assert re.sub(SERVED, ")", r.metadata[key]) == re.sub(SERVED, ")", value), key
            else:
                assert r.metadata[key] == value, key


def test_http_documents_equal_the_in_process_ones(served) -> None:
    """Same query and settings, same documents: texts, doc ids, scores, every metadata key
    (payload fields, mode, more_chunks...), and the point ``id`` the server sends."""
    for settings in ({}, {"instruction": INTENT, "k": 5}, {"mode": "lexical", "k": 3},
                     {"group_by_document": True, "k": 6, "mode": "dense"},
                     {"filter": {"intent": "declined_card_payment"}, "k": 2},
                     {"rerank": "minilm", "k": 2, "instruction": INTENT}):
        remote, local = both(served, **settings)
        docs, here = remote.invoke(QUERY), local.invoke(QUERY)
        assert_same(docs, here)
        assert [d.id for d in docs] == [d.id for d in here] and all(d.id for d in docs)
    assert {d.metadata["mode"] for d in docs} == {"dense"}
    assert all(d.metadata["rerank_score"] is not None for d in docs)
    # A date is its ISO text both ways (over HTTP it was refused before sending): no document
    # holds a field 'seen', so both find nothing.
    remote, local = both(served, k=2, filter={"intent": "declined_card_payment",
                                              "seen": datetime.date(2024, 5, 1)})
    assert remote.invoke(QUERY) == local.invoke(QUERY) == []


async def test_per_call_options_and_ainvoke_over_http(served) -> None:
    remote, local = both(served, instruction=INTENT, k=5)
    calls: list[dict[str, Any]] = [
        {"k": 2, "instruction": "Find messages about exchange rates"},
        {"filter": {"intent": ["declined_card_payment", "card_arrival"]}, "k": "3"},
        {"instruction": None, "mode": "hybrid"},
        {"score_threshold": local.invoke(QUERY)[1].metadata["score"]},
        {"group_by_document": "true", "mode": None, "k": None},
    ]
    for options in calls:
        docs = remote.invoke(QUERY, **options)
        assert_same(docs, local.invoke(QUERY, **options))
        assert_same(await remote.ainvoke(QUERY, **options), docs)
    assert len(remote.invoke(QUERY, k=2)) == 2
    many = await remote.abatch([QUERY, "exchange rate", "top up failed"])
    assert [len(d) for d in many] == [5, 5, 5]
    # A bad per-call value: the same refusal in both modes, before anything is sent.
    for bad in ({"k": 0}, {"top_k": 3}, {"filter": [("intent", "x")]}):
        with pytest.raises(InvalidRequestError) as want:
            local.invoke(QUERY, **bad)
        with pytest.raises(InvalidRequestError, match=f"^{re.escape(str(want.value))}$"):
            remote.invoke(QUERY, **bad)


async def test_api_errors_are_the_domain_errors_in_process_search_raises(served, monkeypatch) -> None:
    url, facet = served
    monkeypatch.delenv("FACET_API_KEY", raising=False)  # api_key=None reads it
    missing = FacetRetriever(collection="nope", base_url=url, api_key=KEY)
    with pytest.raises(NotFoundError) as local:
        FacetRetriever(collection="nope", facet=facet).invoke(QUERY)
    with pytest.raises(NotFoundError, match=f"nope.*HTTP 404 from {url}/search") as remote:
        missing.invoke(QUERY)
    assert str(local.value) in str(remote.value)  # the server's message, then where it came from
    with pytest.raises(NotFoundError, match="HTTP 404"):
        await missing.ainvoke(QUERY)
    # The server's own 400 (its body validation): InvalidRequestError naming the field.
    with pytest.raises(InvalidRequestError, match=r"rerank_depth.*HTTP 400 .*param rerank_depth"):
        FacetRetriever(collection=COLLECTION, base_url=url, api_key=KEY, rerank="minilm",
                       rerank_depth=0).invoke(QUERY)
    with pytest.raises(AuthenticationError, match=r"API key.*HTTP 401.*api_key=") as nokey:
        FacetRetriever(collection=COLLECTION, base_url=url).invoke(QUERY)
    assert isinstance(nokey.value, FacetError)
    # OpenAI clients' base URL works too: /v1 is dropped.
    assert FacetRetriever(collection=COLLECTION, base_url=f"{url}/v1/", api_key=KEY).invoke(QUERY)
    with pytest.raises(InvalidRequestError, match="not both"):
        FacetRetriever(collection=COLLECTION, base_url=url, facet=facet)


def test_api_key_none_reads_facet_api_key(served, monkeypatch) -> None:
    """Next to a `facet serve` with FACET_API_KEY set, a retriever without ``api_key=`` got a 401
    and the key had to be passed by hand (the OpenAI client reads OPENAI_API_KEY itself)."""
    url, facet = served
    monkeypatch.setenv("FACET_API_KEY", KEY)
    remote = FacetRetriever(collection=COLLECTION, base_url=url, k=3)
    local = FacetRetriever(collection=COLLECTION, facet=facet, k=3)
    assert_same(remote.invoke(QUERY), local.invoke(QUERY))
    # Read when made: a later change of the environment does not reach this retriever.
    monkeypatch.setenv("FACET_API_KEY", "another-key")
    assert len(remote.invoke(QUERY)) == 3
    assert KEY not in repr(remote) and KEY not in str(remote.model_dump())
    # In process the key is not read (nothing is sent anywhere).
    assert FacetRetriever(collection=COLLECTION, facet=facet).api_key is None
    # Spaces around it are not part of it, as the server reads its own settings (a key written
    # "KEY " in an env file: the server used KEY, the retriever sent "KEY " and got 401s).
    monkeypatch.setenv("FACET_API_KEY", f" {KEY}  ")
    assert FacetRetriever(collection=COLLECTION, base_url=url).api_key == KEY


def test_a_key_read_from_a_file_works_and_a_key_no_header_can_carry_is_refused_unprinted(
        served, monkeypatch, tmp_path) -> None:
    """A key given as ``Path("key.txt").read_text()`` ends in a line break: httpx refused the
    header, and the retriever said "no Facet server answered ... start one with `facet serve`"
    with the server up and the whole key in the message (LangChain's callbacks and traces
    record it); a key with a letter outside ASCII raised a bare UnicodeEncodeError."""
    url, facet = served
    (tmp_path / "key.txt").write_text(f"{KEY}\n")
    remote = FacetRetriever(collection=COLLECTION, base_url=url, k=3, api_key=(tmp_path / "key.txt").read_text())
    assert_same(remote.invoke(QUERY), FacetRetriever(collection=COLLECTION, facet=facet, k=3).invoke(QUERY))
    for bad, at in (("sk-live-0123\t456789", 13), ("sk-live-0123\n456789", 13), ("sk-live-01234ä56789", 14)):
        with pytest.raises(InvalidRequestError, match=rf"HTTP header cannot carry \(character {at}:") as e:
            FacetRetriever(collection=COLLECTION, base_url=url, api_key=bad)
        assert e.value.param == "api_key" and "0123" not in str(e.value)


def test_an_infinite_timeout_waits_and_one_no_socket_takes_is_refused(served) -> None:
    """``timeout=math.inf`` (or 1e12) passed, and ``invoke`` then raised a bare OverflowError
    ("timestamp out of range for platform time_t") while ``ainvoke`` answered."""
    url, _ = served
    forever = FacetRetriever(collection=COLLECTION, base_url=url, api_key=KEY, k=2, timeout=float("inf"))
    assert forever.timeout is None and len(forever.invoke(QUERY)) == 2
    with pytest.raises(InvalidRequestError, match=r"timeout.*at most 1e\+09 seconds, or None"):
        FacetRetriever(collection=COLLECTION, base_url=url, api_key=KEY, timeout=1e12)


def test_an_empty_api_key_sends_none_and_the_401_names_both_ways(served, monkeypatch) -> None:
    """``api_key=""`` opts out of FACET_API_KEY; the 401's hint named only ``api_key=``."""
    monkeypatch.setenv("FACET_API_KEY", KEY)
    with pytest.raises(AuthenticationError, match=r"HTTP 401.*api_key=.*FACET_API_KEY") as none:
        FacetRetriever(collection=COLLECTION, base_url=served[0], api_key="").invoke(QUERY)
    # It says that no key went, and why ("" set FACET_API_KEY aside); a wrong key, that it went.
    assert "no key was sent (api_key='' sends none" in str(none.value)
    with pytest.raises(AuthenticationError, match=r"HTTP 401.*the key sent was refused") as wrong:
        FacetRetriever(collection=COLLECTION, base_url=served[0], api_key="wrong").invoke(QUERY)
    assert "no key was sent" not in str(wrong.value)
    # Not a ValueError: a chain's fallback for a bad request (docs/api.md: `except ValueError`)
    # does not hide a wrong key, as it did while a 401 was an InvalidRequestError.
    assert not isinstance(wrong.value, ValueError) and not isinstance(none.value, ValueError)
    fallback = FacetRetriever(collection=COLLECTION, base_url=served[0], api_key="wrong"
                              ).with_fallbacks([RunnableLambda(lambda _q: [])],
                                               exceptions_to_handle=(ValueError,))
    with pytest.raises(AuthenticationError):
        fallback.invoke(QUERY)


async def test_a_server_down_is_named_quickly() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    retriever = FacetRetriever(collection=COLLECTION, base_url=url)
    started = time.monotonic()
    with pytest.raises(UnavailableError, match=rf"no Facet server answered at {url}/search.*facet serve"):
        retriever.invoke(QUERY)
    with pytest.raises(UnavailableError, match=rf"{url}/search.*facet serve"):
        await retriever.ainvoke(QUERY)
    assert time.monotonic() - started < 5


def test_the_search_note_is_logged_and_in_the_metadata(served, caplog) -> None:
    """A misspelt filter key found nothing, and the chain got an empty context with no word of
    why: the search's note ("no document has a field 'intnet'") was dropped."""
    url, facet = served
    for where in ({"facet": facet}, {"base_url": url, "api_key": KEY}):  # in process first
        retriever = FacetRetriever(collection=COLLECTION, filter={"intnet": "x"}, **where)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="app.integrations.langchain"):
            assert retriever.invoke(QUERY) == []
        notes = [r.getMessage() for r in caplog.records if r.name == "app.integrations.langchain"]
        assert len(notes) == 1 and "no document has a field 'intnet'" in notes[0], notes
    # With results, each document carries the note (its metadata's "note"); none without one.
    response = facet.search(SearchRequest(QUERY, COLLECTION, top_k=1))
    doc = to_document(response.results[0], COLLECTION, response.mode, "older term vectors")
    assert doc.metadata["note"] == "older term vectors"
    assert "note" not in both(served, k=1)[0].invoke(QUERY)[0].metadata


def test_a_bad_setting_is_an_invalid_request_worded_as_the_per_call_one(served) -> None:
    """``FacetRetriever(k=0)`` raised pydantic's ValidationError, ``invoke(q, k=0)``
    InvalidRequestError."""
    retriever = FacetRetriever(collection=COLLECTION, facet=served[1])
    for name, value in (("k", 0), ("mode", "fast"), ("group_by_document", "maybe")):
        with pytest.raises(InvalidRequestError) as per_call:
            retriever.invoke(QUERY, **{name: value})
        with pytest.raises(InvalidRequestError) as setting:
            FacetRetriever(collection=COLLECTION, facet=served[1], **{name: value})
        assert str(setting.value) == str(per_call.value)
    assert str(setting.value).startswith("FacetRetriever option group_by_document='maybe': ")
    with pytest.raises(InvalidRequestError, match="setting collection is required"):
        FacetRetriever(k=2)  # type: ignore[call-arg]
    with pytest.raises(InvalidRequestError, match=r"setting timeout=0: .*greater than 0"):
        FacetRetriever(collection=COLLECTION, base_url="http://x", timeout=0)


def test_an_http_retriever_loads_no_model_nor_the_core(served) -> None:
    """A client process of a running server: no torch, no app.core, no embedder."""
    code = (
        "import sys\n"
        "from app.integrations.langchain import FacetRetriever\n"
        f"r = FacetRetriever(collection={COLLECTION!r}, base_url={served[0]!r}, api_key={KEY!r}, k=3)\n"
        f"docs = r.invoke({QUERY!r})\n"
        "print(len(docs), 'torch' in sys.modules, 'app.core' in sys.modules, "
        "'transformers' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "False", "False", "False"]


def test_the_first_ainvoke_imports_the_http_client_off_the_event_loop(served) -> None:
    """httpx (whose command-line part brings rich and pygments) and its transport are imported
    in a worker thread on the first HTTP ``ainvoke``, not on the loop's thread, where they
    stalled every other task of the loop (~170 ms, measured before)."""
    code = (
        "import asyncio, importlib.abc, sys, threading\n"
        "from app.integrations.langchain import FacetRetriever\n"
        "on_loop = set()\n"
        "class Spy(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if threading.current_thread() is threading.main_thread():\n"
        "            on_loop.add(name.partition('.')[0])\n"
        f"r = FacetRetriever(collection={COLLECTION!r}, base_url={served[0]!r}, api_key={KEY!r}, k=3)\n"
        "assert 'httpx' not in sys.modules\n"
        "sys.meta_path.insert(0, Spy())\n"
        f"docs = asyncio.run(r.ainvoke({QUERY!r}))\n"
        "print(len(docs), 'httpx' in sys.modules, sorted(on_loop & {'httpx', 'httpcore', 'h11', 'rich'}))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "True", "[]"]


def run_example(name: str, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return result, time.monotonic() - started


def test_openai_client_example_with_the_server_down_says_so_in_one_line() -> None:
    """It ran ~70 s (two `facet embed` processes, the client's retries) into an
    APIConnectionError traceback."""
    url = f"http://127.0.0.1:{free_port()}"
    result, took = run_example("openai_client.py", "--base-url", f"{url}/v1")
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1 and url in lines[0] and "facet serve" in lines[0], lines
    assert took < 20


def test_rag_example_with_k_0_says_so_in_one_line(tmp_path) -> None:
    result, took = run_example("rag.py", "--k", "0", "--data-dir", str(tmp_path / "data"))
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1 and "k=0" in lines[0] and "Traceback" not in lines[0], lines
    assert took < 30


def test_the_default_timeout_outlasts_the_servers_worker_timeout() -> None:
    """With no worker taking a server's queries, its 503 ("no worker answered on the 'query'
    queue ... start one") comes after FACET_WORKER_TIMEOUT_S (60 s): a retriever that gave up
    at 60 s said only that the server may be busy (the query-path exploration)."""
    from app.settings import FacetSettings

    assert FacetRetriever(collection="c", base_url="http://127.0.0.1:1").timeout > \
        FacetSettings().worker_timeout_s + 15


def test_a_503_is_an_unavailable_error_with_the_wait_the_server_asks_for() -> None:
    """The server's ``Retry-After`` on a 503 (an outage that may pass) as the error's
    ``retry_after_s``, as a 429's was; None where it sent none (a part that is missing). (An
    answer built with httpx, as the client receives it: no server says the first here.)"""
    import httpx

    from app.integrations.langchain import _http_error

    body = {"error": {"message": "cannot reach Qdrant at http://q:6333", "type": "server_error",
                      "param": None, "code": "unavailable"}}
    url = "http://127.0.0.1:8000/search"
    outage = _http_error(httpx.Response(503, json=body, headers={"Retry-After": "5"}), url)
    missing = _http_error(httpx.Response(503, json=body), url)
    assert type(outage) is UnavailableError and outage.retry_after_s == 5.0, outage
    assert type(missing) is UnavailableError and missing.retry_after_s is None, missing
    assert str(outage).startswith("cannot reach Qdrant at http://q:6333 (HTTP 503 from ")
