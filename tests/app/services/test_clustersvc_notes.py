"""What a clustering's note and refusals say (the cluster service, real minilm):

1. texts the embedder cut at its token budget are counted in the note (nine long texts that
   differed only in their last sentence read "1 cluster ...: only 1 distinct embedding", and
   only a log line said they were cut, advising a max_length minilm does not take);
2. an unknown explainer's refusal lists only names that generate answers, and a blank
   explainer is none, as '' is;
3. a k that is the only one a silhouette could score is not "chosen by silhouette";
4. a semicolon- (tab-, '|'-) separated .csv is refused, not read as one column of whole rows.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from app.errors import DataError, UnknownModelError
from app.services.clustering import ClusterRequest, ClusterService, read_text_file
from app.services.context import EmbedderCache, ServiceContext
from app.settings import FacetSettings

INSTRUCTION = "What does the customer want?"
# ~300 minilm tokens of one preamble, then a last sentence that differs: minilm reads 248 of
# them under the instruction, so the three embed alike.
PREAMBLE = ("Hello, I am writing to you today regarding an issue with my recent purchase from your "
            "online store which I made some time ago. ") * 12
LONG = [PREAMBLE + end for end in ("I want a refund.", "Where is my parcel?", "Please reset my password.")]


# What every clustering by minilm under an instruction now says last (its weak 0.25 blend).
WEAK = ("the instruction barely steers: minilm mixes it in at 0.25 (instemb, or the same vectors "
        "at instruction_weight=1, read it in full: docs/indexing.md)")


def _note(result) -> str:
    assert result.note is not None
    return result.note


# -- 1. texts cut at the token budget --------------------------------------------------------


def test_texts_cut_at_the_budget_are_counted_in_the_note_with_advice_minilm_can_follow(make_ctx) -> None:
    service = ClusterService(make_ctx())
    result = service.cluster(ClusterRequest(INSTRUCTION, texts=LONG, k=3))
    note = _note(result)
    assert result.k == 1 and note.startswith("1 cluster instead of the 3 asked for: only 1 distinct "
                                             "embedding (texts that differ only past where minilm "
                                             "cuts them embed alike)"), note
    assert ("3 of 3 texts are longer than minilm reads whole under the instruction (248 tokens of "
            "text) and were cut") in note, note
    assert "split the texts" in note and "max_length" not in note, note  # minilm has no such option
    # Reused embeddings say it too.
    again = service.cluster(ClusterRequest(INSTRUCTION, texts=LONG, k=2))
    assert again.encode_reused and "3 of 3 texts are longer than minilm" in _note(again)
    # Short texts: nothing said.
    short = service.cluster(ClusterRequest(INSTRUCTION, texts=["refund me", "where is my parcel",
                                                               "reset my password"], k=3))
    assert short.note is None or "were cut" not in short.note


def test_the_cut_note_names_max_length_where_the_embedder_takes_it(minilm, tmp_path: Path) -> None:
    offering = copy.copy(minilm)
    offering.OPTIONS = ("instruction_weight", "max_length")  # as causal2vec's, instemb's...
    cache = EmbedderCache("cpu")
    cache.put("minilm", offering)
    ctx = ServiceContext(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    try:
        note = _note(ClusterService(ctx).cluster(ClusterRequest(INSTRUCTION, texts=LONG, k=2)))
    finally:
        ctx.close()
    assert "3 of 3 texts are longer than minilm" in note
    assert "or raise max_length (embedder 'minilm[max_length=N]')" in note, note


# -- 2. the explainer -------------------------------------------------------------------------


def test_an_unknown_explainer_lists_only_the_names_that_explain(make_ctx) -> None:
    service = ClusterService(make_ctx())
    with pytest.raises(UnknownModelError) as refused:
        service.validate(ClusterRequest(INSTRUCTION, texts=["a", "b"], explainer="./nope"))
    message = str(refused.value)
    assert message.startswith("unknown explainer './nope'") and refused.value.param == "explainer"
    listed = message.split("Valid names: ", 1)[1]
    assert listed.startswith("inbedder (the registered models that generate answers"), message
    for embedder in ("minilm", "backbone-mean", "causal2vec", "instemb"):
        assert embedder not in listed, message


@pytest.mark.parametrize("blank", [" ", "\t", "  \n"])
def test_a_blank_explainer_is_none(make_ctx, blank: str) -> None:
    request = ClusterRequest(INSTRUCTION, texts=["refund me", "where is my parcel", "reset pw"],
                             k=2, explainer=blank)
    assert request.explainer is None
    service = ClusterService(make_ctx())
    service.validate(request)
    result = service.cluster(request)
    assert result.explainer is None and result.answers is None and result.k == 2


# -- 3. one k possible ------------------------------------------------------------------------


@pytest.mark.parametrize(("texts", "reason"), [
    (["refund me", "refund me", "where is parcel"], "only 2 distinct texts"),
    (["refund me", "where is parcel", "reset my password"], "only 3 texts"),
])
def test_the_only_possible_k_is_not_chosen_by_silhouette(make_ctx, texts: list[str], reason: str) -> None:
    result = ClusterService(make_ctx()).cluster(ClusterRequest(INSTRUCTION, texts=texts))
    assert result.k == 2 and not result.k_chosen
    assert result.silhouette is None and result.max_k_tried is None
    assert result.note == f"k = 2, not chosen by silhouette: {reason}, so 2 is the only k possible; {WEAK}"


def test_k_is_still_chosen_where_there_is_a_choice(make_ctx) -> None:
    texts = ["refund me", "where is parcel", "reset my password", "cancel my order"]
    result = ClusterService(make_ctx()).cluster(ClusterRequest(INSTRUCTION, texts=texts))
    assert result.k_chosen and result.silhouette is not None and result.max_k_tried == 3


# -- 4. csv separators --------------------------------------------------------------------------


@pytest.mark.parametrize(("header", "sep", "name"), [("text;prio", ";", "semicolon"),
                                                     ("text\tprio", "\t", "tab"),
                                                     ("text|prio", "|", "'|'")])
def test_a_csv_separated_otherwise_is_refused_not_read_whole(tmp_path: Path, header: str, sep: str,
                                                             name: str) -> None:
    path = tmp_path / "semi.csv"
    path.write_text(f"{header}\nrefund me{sep}1\nwhere parcel{sep}2\nreset pw{sep}1\n")
    with pytest.raises(DataError) as refused:
        read_text_file(path)
    assert (f"its header {header!r} looks {name}-separated, but a .csv is read as comma-separated"
            in str(refused.value) and "save it with commas" in str(refused.value)), refused.value
    # The column named as the header's text: each row exactly as written (asked for).
    assert read_text_file(path, text_column=header) == [f"refund me{sep}1", f"where parcel{sep}2",
                                                        f"reset pw{sep}1"]
    with pytest.raises(DataError, match=f"no column 'text'.*looks {re.escape(name)}-separated"):
        read_text_file(path, text_column="text")


def test_a_comma_csv_and_a_one_column_csv_read_as_before(tmp_path: Path) -> None:
    commas = tmp_path / "c.csv"
    commas.write_text("text,prio\nrefund me; now,1\nwhere parcel,2\n")
    assert read_text_file(commas) == ["refund me; now", "where parcel"]
    single = tmp_path / "one.csv"
    single.write_text("message\nrefund me; now\nwhere parcel\n")
    assert read_text_file(single) == ["refund me; now", "where parcel"]


# -- 5. copies of one text ----------------------------------------------------------------------


def test_copies_of_one_text_are_one_point_however_they_were_batched(make_ctx) -> None:
    """Forty copies of a text encoded in two batches differ in their last bits (minilm: up to
    8.6e-8), and rounding to 5 decimals did not merge them all: they counted as 2 distinct
    texts, k = 4 was kept and k-means split the copies into two clusters of 25 and 15, with no
    note (the review of the fifth session of 2026-12-04)."""
    texts = ["refund please"] * 40 + ["my card was lost", "top up failed"]
    result = ClusterService(make_ctx()).cluster(ClusterRequest(INSTRUCTION, texts=texts, k=4))
    assert result.k == 3, result.note
    assert _note(result).startswith("3 clusters instead of the 4 asked for: only 3 distinct texts")
    assert sorted(result.labels.count(c) for c in set(result.labels)) == [1, 1, 40]
    assert len({result.labels[i] for i in range(40)}) == 1
