"""Retrieval-augmented generation with Facet and LangChain, fully offline.

1. Index the bundled BANKING77 sample (``app/sample_corpus``, CC BY 4.0) into a collection
   (a temporary data folder unless ``--data-dir`` is given).
2. Retrieve with an instruction through ``FacetRetriever``: the instruction says what the
   question is after, so the embedder reads it that way.
3. Answer with the packaged SmolLM2-135M-Instruct (transformers, greedy decoding, its chat
   template), loaded by ``embedders.backbone.load_decoder``: no model hub, no network. The
   model reads the documents printed (one search); an answer stopped by ``--max-new-tokens``
   ends with "…" and says so.

Run::

    python examples/rag.py
    python examples/rag.py "Why was my transfer not received?" \\
        --instruction "Find customer messages about transfers that did not arrive" --k 5
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from app.cli import quiet_libraries
from app.commands.demo import SAMPLE_FILE
from app.core import Facet
from app.errors import FacetError
from app.integrations.langchain import FacetRetriever
from app.settings import FacetSettings

QUESTION = "What problems do customers have with card payments?"
INSTRUCTION = "Find customer messages that report a problem with a card payment"
COLLECTION = "rag-banking77"

# A 135M model follows a concrete task ("summarise these messages") far better than an open
# question over a context; this wording was the most grounded of the few tried.
PROMPT = ChatPromptTemplate.from_messages([
    ("user", "Question: {question}\nSummarise in one sentence what these customers are "
             "complaining about.\n\n{context}"),
])


def format_docs(docs: list[Document]) -> str:
    """One numbered line per retrieved message."""
    return "\n".join(f"{i}. {d.page_content}" for i, d in enumerate(docs, 1))


class SmolLM:
    """SmolLM2-135M-Instruct answering chat messages greedily (deterministic)."""

    def __init__(self, max_new_tokens: int = 80) -> None:
        from embedders.backbone import DEFAULT_DECODER, load_decoder

        backbone = load_decoder(DEFAULT_DECODER, device="cpu")
        self.model, self.tokenizer = backbone.model, backbone.tokenizer
        self.max_new_tokens = max_new_tokens

    def __call__(self, prompt: Any) -> str:
        import torch

        roles = {"system": "system", "human": "user", "ai": "assistant"}
        messages = [{"role": roles.get(m.type, "user"), "content": m.content}
                    for m in prompt.to_messages()]
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                 return_tensors="pt", return_dict=True)
        with torch.inference_mode():
            out = self.model.generate(**ids, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      repetition_penalty=1.1,
                                      pad_token_id=self.tokenizer.eos_token_id)
        new = out[0, ids["input_ids"].shape[1]:]
        answer: str = self.tokenizer.decode(new, skip_special_tokens=True).strip()
        if len(new) >= self.max_new_tokens and int(new[-1]) != self.tokenizer.eos_token_id:
            # Stopped by the limit, not by the model: say so (it read as a finished answer).
            answer += f"…\n(cut at {self.max_new_tokens} tokens: raise --max-new-tokens)"
        return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", nargs="?", default=QUESTION)
    parser.add_argument("--instruction", default=INSTRUCTION)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the index here (default: a temporary folder)")
    parser.add_argument("--max-new-tokens", type=int, default=80,
                        help="the longest answer SmolLM2 writes, in tokens (one cut there ends "
                             "with \"…\" and says so)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    quiet_libraries()  # as the CLI: no "Loading weights" bar per model (README's transcript)
    try:
        run(args)
    except FacetError as e:  # a bad --k, a data folder another process holds: one line
        sys.exit(f"error: {e}")


def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="facet-rag-") as tmp, \
            Facet.open(FacetSettings(data_dir=args.data_dir or Path(tmp))) as facet:
        # Before indexing: a bad setting (--k 0) is refused at once.
        retriever = FacetRetriever(collection=COLLECTION, instruction=args.instruction, k=args.k,
                                   facet=facet)
        started = time.perf_counter()
        report = facet.index(SAMPLE_FILE, COLLECTION)
        print(f"indexed {report.docs_indexed + report.docs_skipped} messages into "
              f"{COLLECTION!r} ({time.perf_counter() - started:.1f}s)")
        llm = SmolLM(max_new_tokens=args.max_new_tokens)
        # The chain is given the documents retrieved (and printed) below: one search, and
        # the model reads exactly those.
        chain = (RunnablePassthrough.assign(context=lambda x: format_docs(x["docs"]))
                 | PROMPT | RunnableLambda(llm))

        docs = retriever.invoke(args.question)
        print(f"\nquestion: {args.question}\ninstruction: {args.instruction}\nretrieved:")
        for d in docs:
            print(f"  {d.metadata['score']:.3f}  [{d.metadata['intent']}] {d.page_content}")
        started = time.perf_counter()
        answer = chain.invoke({"question": args.question, "docs": docs})
        print(f"\nanswer ({time.perf_counter() - started:.1f}s, SmolLM2-135M-Instruct):\n{answer}")


if __name__ == "__main__":
    main()
