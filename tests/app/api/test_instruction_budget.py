"""An instruction that leaves the text too little of the embedder's budget is refused on every
edge, as one that leaves it nothing was: the command line (one line, exit 2), the API (400),
the UI (a message naming the instruction) and LangChain (``InvalidRequestError``). Before, it
was read and the text cut to a token or two, with only a log line that blamed the text."""

from __future__ import annotations

import pytest

from app.errors import InvalidRequestError
from tests.app.api.conftest import COLLECTION
from tests.app.cli_runner import invoke_cli

# 130 words: 130 of minilm's 256 tokens, over the 127 (half of 254) an instruction may take;
# the old rule refused only an instruction of 254 tokens or more.
LONG = " ".join(
    (
        "Find customer reviews that describe a product or service experience in detail "
        "paying attention to what happened " * 10
    ).split()[:130]
)
SAID = "the instruction is too long for this embedder: it takes 130 of the 256 tokens"
LIMIT = "at most 127 tokens"


def test_the_cli_refuses_it_in_one_line(tmp_path) -> None:
    result = invoke_cli(
        "embed", "--embedder", "minilm", "--instruction", LONG, "a cat", env={"FACET_DATA_DIR": str(tmp_path / "data")}
    )
    assert result.returncode == 2 and result.stdout == "", result
    assert SAID in result.stderr and LIMIT in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_api_answers_400(client) -> None:
    for path, body in [
        ("/v1/embeddings", {"input": ["a cat"], "model": "minilm", "instruction": LONG, "role": "query"}),
        ("/search", {"query": "my card was declined", "collection": COLLECTION, "instruction": LONG, "k": 3}),
    ]:
        r = client.post(path, json=body)
        assert r.status_code == 400, r.text
        message = r.json()["error"]["message"]
        assert SAID in message and LIMIT in message and "facet " not in message, message


def test_langchain_raises_invalid_request_error(facet) -> None:
    from app.integrations.langchain import FacetEmbeddings, FacetRetriever

    embeddings = FacetEmbeddings(model="minilm", query_instruction=LONG, facet=facet)
    with pytest.raises(InvalidRequestError, match=SAID):
        embeddings.embed_query("my card was declined")
    retriever = FacetRetriever(collection=COLLECTION, instruction=LONG, k=3, facet=facet)
    with pytest.raises(InvalidRequestError, match=LIMIT):
        retriever.invoke("my card was declined")


def test_the_ui_names_the_instruction(facet, tmp_path) -> None:
    gr = pytest.importorskip("gradio")
    from ui.handlers import UiHandlers

    handlers = UiHandlers(facet, facet.settings, tmp_path / "exports")
    with pytest.raises(gr.Error, match=SAID):
        handlers.search("my card was declined", LONG, COLLECTION, "minilm", 3, "", False, None, False, "dense")
    with pytest.raises(gr.Error, match=f"Instruction B: {SAID}"):
        handlers.compare("my card was declined", "Find messages about fees", LONG, COLLECTION, "minilm", 3, "")
