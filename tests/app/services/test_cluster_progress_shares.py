"""Clustering's answering stage: its truncation said once, and its share of the progress bar."""

from __future__ import annotations

import logging

import pytest

from app.services.clustering import ClusterRequest, ClusterService

TOPICS = ["card delivery", "exchange rates", "PIN codes"]
# Long enough that the tiny InBedder (64 tokens, prompt included) cuts every one of them.
TEXTS = [f"Message {i} about {TOPICS[i % 3]}: " + " ".join(f"{TOPICS[i % 3]} word{j}" for j in range(40))
         for i in range(12)]
INSTRUCTION = "What does the customer want?"


def _explainer_lines(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.getMessage().startswith(f"{name}: ")
            and "truncated" in r.getMessage()]


@pytest.mark.parametrize("with_progress", [True, False])
def test_the_answering_stage_says_its_truncation_once(make_ctx, tiny_inbedder_dir, monkeypatch, caplog,
                                                      with_progress) -> None:
    """`facet cluster` of 5,000 texts printed 156 "inbedder: 30 of 32 texts were longer..."
    lines, one per decoding batch of the answers, amid the progress; encoding said its one
    line at the end. The answering stage says one now, counting all its texts."""
    from app import encoding
    from app.encoding import InlineQueryEncoder
    from app.services import clustering

    ctx = make_ctx()
    assert isinstance(ctx.encoder, InlineQueryEncoder)  # the CLI's: in this (main) thread
    name = ctx.embedders.get(str(tiny_inbedder_dir)).name
    # Three pieces of 4 (with progress), three decoding batches of 4 (one call, without).
    monkeypatch.setattr(clustering, "ANSWER_STEP_TEXTS", 4)
    monkeypatch.setattr(encoding, "ANSWER_BATCH", 4)
    with caplog.at_level(logging.WARNING):
        result = ClusterService(ctx).cluster(
            ClusterRequest(INSTRUCTION, texts=TEXTS, k=2, embedder="minilm",
                           explainer=str(tiny_inbedder_dir), answer_tokens=2),
            progress=(lambda f, stage: None) if with_progress else None)
    assert result.answers is not None and len(result.answers) == 12
    lines = _explainer_lines(caplog, name)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{name}: 12 of 12 texts were longer than"), lines


def test_answering_gets_the_larger_share_of_the_bar(make_ctx, tiny_inbedder_dir) -> None:
    """The bar gave encoding and answering 0.45 each: minilm encoded 5,000 texts in ~2 min
    to 45%, then InBedder's answers took ~32 min from 45% to 90%. Answering's share is now
    the larger, by their measured cost per text; the fractions still rise to 1.0."""
    ctx = make_ctx()
    seen: list[tuple[float, str]] = []
    ClusterService(ctx).cluster(
        ClusterRequest(INSTRUCTION, texts=TEXTS, k=2, embedder="minilm",
                       explainer=str(tiny_inbedder_dir), answer_tokens=2),
        progress=lambda f, stage: seen.append((f, stage)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] == 0.0
    encoded = [f for f, stage in seen if stage == "k-means"]
    answered = [f for f, stage in seen if stage.endswith("answering 12/12 texts")]
    assert len(encoded) == 1 and len(answered) == 1
    assert next(stage for _, stage in seen if stage.startswith("encoding")) == "encoding 0/12 texts"
    encode_share, answer_share = encoded[0], answered[0] - encoded[0]
    assert answer_share > 2 * encode_share > 0, (encode_share, answer_share)
    assert answered[0] < 0.95  # naming and the map after it


def test_shares_weigh_both_models() -> None:
    """An LLM embedder (inbedder, instemb) costs more per text than minilm: its encoding gets
    a larger share; without an explainer encoding has the whole of the work's share."""
    from app.services.clustering import WORK_SHARE, stage_shares

    mini = stage_shares("minilm", "inbedder")
    llm = stage_shares("inbedder", "inbedder")
    assert mini[1] > mini[0] > 0 and llm[0] > mini[0] and llm[1] < mini[1]
    for shares in (mini, llm, stage_shares("instemb", "inbedder")):
        assert sum(shares) == pytest.approx(WORK_SHARE)
    assert stage_shares("minilm[instruction_weight=0.5]", "inbedder") == mini  # options aside
    assert stage_shares("minilm", None) == (WORK_SHARE, 0.0)
    assert stage_shares("instemb", None) == (WORK_SHARE, 0.0)


def test_answers_to_texts_in_another_script_are_said_to_be_unreliable(make_ctx, tiny_inbedder_dir) -> None:
    """The shipped InBedder answered "my card was stolen" in Chinese "cash withdrawal" and in
    Thai "201810201810", and a cluster was named so with nothing said. An explainer's answers
    to texts mostly in another script than Latin are said to be unreliable, counted; without an
    explainer, or with Latin texts only (accents and all), nothing is said."""
    from app.services.clustering import other_script_texts

    others = ["我的银行卡被偷了", "Моя карта была украдена вчера", "บัตรของฉันถูกขโมย"]
    latin = ["My card was stolen yesterday", "Ma carte a été volée hier", "Straße, Ærø and Łódź"]
    assert other_script_texts(others + latin + ["12345", "card 卡"]) == 3
    service = ClusterService(make_ctx())
    said = service.cluster(ClusterRequest(INSTRUCTION, texts=others + latin, k=2, embedder="minilm",
                                          explainer=str(tiny_inbedder_dir), answer_tokens=2))
    assert ("3 of the 6 texts are mostly in another script than Latin: the explainer "
            f"{tiny_inbedder_dir} answers in English") in (said.note or ""), said.note
    plain = service.cluster(ClusterRequest(INSTRUCTION, texts=others + latin, k=2, embedder="minilm"))
    assert "another script" not in (plain.note or "")
    english = service.cluster(ClusterRequest(INSTRUCTION, texts=latin * 2, k=2, embedder="minilm",
                                             explainer=str(tiny_inbedder_dir), answer_tokens=2))
    assert "another script" not in (english.note or "")
