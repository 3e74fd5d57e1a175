"""``FacetEmbeddings`` given bytes, a list holding a non-str or a non-str query: a
``TypeError`` naming the call, what it got and what it takes (``embed_documents(b"abc")``
said "texts[0] is int (97), not a string", a list that was never given)."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core")

from app.errors import InvalidRequestError
from app.integrations.langchain import FacetEmbeddings


@pytest.fixture
def embeddings(facet) -> FacetEmbeddings:
    return FacetEmbeddings(model="minilm", facet=facet)


@pytest.mark.parametrize(("given", "said"), [
    (b"abc", r"^embed_documents takes a list of texts \(str\), got bytes \(b'abc'\): decode "),
    (bytearray(b"ab"), r"^embed_documents takes a list of texts \(str\), got bytearray "),
    (["a", 3], r"^embed_documents takes a list of texts \(str\); texts\[1\] is int \(3\)$"),
    (["a", b"b"], r"^embed_documents takes a list of texts \(str\); texts\[1\] is bytes "
                  r"\(b'b'\); decode it first"),
    (None, r"^embed_documents takes a list of texts \(str\), got NoneType \(None\)$"),
])
async def test_embed_documents_refuses_what_is_not_a_list_of_str(embeddings, given, said) -> None:
    with pytest.raises(TypeError, match=said) as refused:
        embeddings.embed_documents(given)
    assert isinstance(refused.value, InvalidRequestError)  # as the bare str's refusal
    with pytest.raises(TypeError, match=said):
        await embeddings.aembed_documents(given)


@pytest.mark.parametrize(("given", "said"), [
    (b"q", r"^embed_query takes one text \(a str\), got bytes \(b'q'\): decode it first"),
    (5, r"^embed_query takes one text \(a str\), got int \(5\)$"),
    (["q"], r"^embed_query takes one text \(a str\), got list \(\['q'\]\): use embed_documents"),
])
async def test_embed_query_refuses_a_non_str(embeddings, given, said) -> None:
    with pytest.raises(TypeError, match=said):
        embeddings.embed_query(given)
    with pytest.raises(TypeError, match=said):
        await embeddings.aembed_query(given)


def test_texts_still_embed(embeddings) -> None:
    with pytest.raises(TypeError, match="got a str"):  # the bare str: a TypeError now too
        embeddings.embed_documents("hello")
    assert len(embeddings.embed_documents(("a", "b"))) == 2
    assert len(embeddings.embed_query("card")) == 384
