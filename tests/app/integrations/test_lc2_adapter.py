"""The LangChain adapter, found by using it (a real uvicorn serving a real minilm collection):

- HTTP mode built a TLS context per call (certifi's bundle, ~30 ms; in ``ainvoke`` on the event
  loop): it is built once per process;
- ``score_threshold`` nan/inf over HTTP was the JSON encoder's bare ValueError;
- a deep copy of a retriever or FacetEmbeddings with ``facet=`` failed ("cannot pickle
  '_thread.lock'"), and pickling it said no more;
- ``embed_documents("hello")`` embedded each character;
- ``FacetEmbeddings(modell=...)`` was pydantic's raw ValidationError;
- the 401's hint said FACET_API_KEY was "unset here" when it was set;
- ``rerank_depth=-1`` and ``k=True`` taken, ``timeout=None`` refused, no ``exact``."""

from __future__ import annotations

import copy
import pickle
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from pydantic import ValidationError

from app.core import Facet
from app.errors import AuthenticationError, InvalidRequestError
from app.integrations import langchain as lc
from app.integrations.langchain import FacetEmbeddings, FacetRetriever

from ..served import TOPUP_RECORDS, records_served

COLLECTION = "lc2"
KEY = "lc2-key"
QUERY = "my top-up failed"
RECORDS = TOPUP_RECORDS


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory) -> Iterator[tuple[Facet, str]]:
    """(a facade over a small collection, the URL of a real uvicorn serving it with a key)."""
    with records_served(minilm, tmp_path_factory.mktemp("lc2"), RECORDS, COLLECTION, api_key=KEY) as both:
        yield both


def remote(served: tuple[Facet, str], **settings: Any) -> FacetRetriever:
    return FacetRetriever(collection=COLLECTION, base_url=served[1], **{"api_key": KEY, **settings})


def local(served: tuple[Facet, str], **settings: Any) -> FacetRetriever:
    return FacetRetriever(collection=COLLECTION, facet=served[0], **settings)


async def test_http_calls_build_the_tls_context_once(served, monkeypatch) -> None:
    """Each call built an httpx client and with it a TLS context (certifi's bundle loaded,
    ~30 ms even for http://, on the event loop in ``ainvoke``): counted, not timed."""
    made: list[Any] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    monkeypatch.setattr(lc, "_SSL_CONTEXT", None, raising=False)  # built afresh here
    retriever = remote(served, k=2)
    for i in range(4):
        assert len(retriever.invoke(f"{QUERY} {i}")) == 2
        assert len(await retriever.ainvoke(f"{QUERY} {i}")) == 2
    assert len(await FacetRetriever(collection=COLLECTION, base_url=served[1], api_key=KEY,
                                    k=1).ainvoke(QUERY)) == 1
    assert len(made) <= 1, f"{len(made)} TLS contexts built for 9 searches"
    # The same verification as httpx's default: certificates and host names checked.
    context = lc._ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


async def test_a_non_finite_score_threshold_is_the_in_process_refusal_over_http(served) -> None:
    """Over HTTP: ValueError "Out of range float values are not JSON compliant"."""
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(InvalidRequestError, match="must be a finite number") as inproc:
            local(served).invoke(QUERY, score_threshold=value)
        for how in ("setting", "option"):
            retriever = remote(served, **({"score_threshold": value} if how == "setting" else {}))
            with pytest.raises(InvalidRequestError) as over_http:
                options: dict[str, Any] = {"score_threshold": value} if how == "option" else {}
                retriever.invoke(QUERY, **options)
            assert str(over_http.value) == str(inproc.value), how
        with pytest.raises(InvalidRequestError, match="must be a finite number"):
            await remote(served).ainvoke(QUERY, score_threshold=value)


def test_a_deep_copy_shares_the_facade_and_pickling_one_says_why_not(served) -> None:
    """``copy.deepcopy`` and ``model_copy(deep=True)`` raised "TypeError: cannot pickle
    '_thread.lock'" (the facade's); pickle the same, naming nothing."""
    facet = served[0]
    retriever = local(served, k=2, filter={"intent": "top_up_failed"})
    for copied in (copy.deepcopy(retriever), retriever.model_copy(deep=True)):
        assert copied.facet is facet
        assert copied.filter == retriever.filter and copied.filter is not retriever.filter
        assert [d.page_content for d in copied.invoke(QUERY)] == [RECORDS[0]["text"]]
    embeddings = FacetEmbeddings(model="minilm", query_instruction="Find the intent", facet=facet)
    for copied_e in (copy.deepcopy(embeddings), embeddings.model_copy(deep=True)):
        assert copied_e.facet is facet
        assert copied_e.embed_query("top-up") == pytest.approx(embeddings.embed_query("top-up"))
    for made in (retriever, embeddings):
        with pytest.raises(TypeError, match=r"made with facet= cannot be pickled.*without facet="):
            pickle.dumps(made)
    # Without a facade (HTTP mode, or Facet.shared() where it is loaded) it pickles.
    http = remote(served, k=1)
    assert pickle.loads(pickle.dumps(http)).invoke(QUERY)[0].page_content == RECORDS[0]["text"]


async def test_embed_documents_refuses_a_bare_string(served) -> None:
    """``embed_documents("hello")`` returned 5 vectors, one per character; "just a string"
    said "texts[4] is empty"."""
    embeddings = FacetEmbeddings(model="minilm", facet=served[0])
    said = "embed_documents takes a list of texts, got a str (use embed_query for one)"
    for text in ("hello", "just a string"):
        with pytest.raises(InvalidRequestError) as refused:
            embeddings.embed_documents(text)  # type: ignore[arg-type]
        assert str(refused.value) == said
        with pytest.raises(InvalidRequestError, match=r"takes a list of texts, got a str"):
            await embeddings.aembed_documents(text)  # type: ignore[arg-type]
    assert len(embeddings.embed_documents(["hello"])) == 1
    assert len(embeddings.embed_documents(("a", "b"))) == 2  # type: ignore[arg-type]  # a tuple too


def test_a_misspelt_embeddings_setting_names_the_one_meant(served) -> None:
    """``FacetEmbeddings(modell="minilm")`` raised pydantic's ValidationError, where
    FacetRetriever names the setting meant."""
    with pytest.raises(InvalidRequestError) as misspelt:
        FacetEmbeddings(modell="minilm")
    assert not isinstance(misspelt.value, ValidationError)
    assert str(misspelt.value).startswith(
        "FacetEmbeddings got unknown setting(s) modell (modell -> model); it takes model, ")
    with pytest.raises(InvalidRequestError, match=r"model_name \(model_name -> model\)"):
        FacetEmbeddings(model_name="minilm")
    with pytest.raises(InvalidRequestError, match=r"FacetEmbeddings setting model=5: "):
        FacetEmbeddings(model=5)
    # The retriever's refusal names a close spelling too.
    with pytest.raises(InvalidRequestError, match=r"unknown setting\(s\) colection \(colection -> collection\)"):
        FacetRetriever(colection=COLLECTION)


def test_the_401_hint_says_what_is_the_case(served, monkeypatch) -> None:
    """With ``api_key=""`` and FACET_API_KEY set, the hint said the variable was "unset here"."""
    url = served[1]
    monkeypatch.setenv("FACET_API_KEY", "a-key-not-sent")
    with pytest.raises(AuthenticationError, match="HTTP 401") as set_aside:
        FacetRetriever(collection=COLLECTION, base_url=url, api_key="").invoke(QUERY)
    message = str(set_aside.value)
    assert "api_key='' sends none, FACET_API_KEY is set here but not read" in message
    assert "unset" not in message
    monkeypatch.delenv("FACET_API_KEY")
    with pytest.raises(AuthenticationError, match="HTTP 401") as neither:
        FacetRetriever(collection=COLLECTION, base_url=url, api_key="").invoke(QUERY)
    assert "api_key='' sends none, and FACET_API_KEY is unset here" in str(neither.value)
    unset = FacetRetriever(collection=COLLECTION, base_url=url)  # read now: unset
    monkeypatch.setenv("FACET_API_KEY", KEY)  # set after: not read, and not said to be unset
    with pytest.raises(AuthenticationError, match="HTTP 401") as late:
        unset.invoke(QUERY)
    assert "FACET_API_KEY, which was unset or empty when this retriever was made" in str(late.value)
    assert "unset here" not in str(late.value)


def test_number_settings_are_checked_when_made_and_timeout_none_waits(served) -> None:
    """``rerank_depth=-1`` was taken when made (k=0 is not); ``k=True`` read as 1;
    ``timeout=None`` refused though httpx reads it as no timeout."""
    with pytest.raises(InvalidRequestError,
                       match=r"^FacetRetriever option rerank_depth=-1: Input should be from 1 to 1000"):
        local(served, rerank_depth=-1)
    with pytest.raises(InvalidRequestError, match=r"^FacetRetriever option rerank_depth=-1: "):
        local(served).invoke(QUERY, rerank_depth=-1)
    for name in ("k", "rerank_depth", "score_threshold", "timeout"):
        with pytest.raises(InvalidRequestError, match=rf"{name}=True: Input should be a number, not a boolean"):
            local(served, **{name: True})
    with pytest.raises(InvalidRequestError, match=r"option k=True: .*not a boolean"):
        local(served).invoke(QUERY, k=True)
    assert local(served, k="2").k == 2  # strings are still read as before
    waits = remote(served, timeout=None, k=2)
    assert waits.timeout is None and len(waits.invoke(QUERY)) == 2


async def test_exact_is_an_option_in_both_modes(served) -> None:
    """``facet search --exact`` and POST /search's ``exact`` had no retriever option."""
    facet = served[0]
    seen: list[bool] = []

    class Spy:  # the real facade, each request's ``exact`` noted
        def search(self, request: Any) -> Any:
            seen.append(request.exact)
            return facet.search(request)

    retriever = FacetRetriever(collection=COLLECTION, facet=Spy(), k=2, exact=True)
    exact = retriever.invoke(QUERY)
    retriever.invoke(QUERY, exact=False)
    retriever.invoke(QUERY, exact=None)  # None keeps the retriever's, as for group_by_document
    await retriever.ainvoke(QUERY)
    assert seen == [True, False, True, True]
    over_http = remote(served, k=2, exact=True)
    assert over_http._http_request(QUERY, {})["json"]["exact"] is True
    assert over_http._http_request(QUERY, {"exact": False})["json"]["exact"] is False
    assert [d.page_content for d in over_http.invoke(QUERY)] == [d.page_content for d in exact]
    assert [d.page_content for d in await remote(served, k=2).ainvoke(QUERY, exact=True)] == [
        d.page_content for d in exact]
