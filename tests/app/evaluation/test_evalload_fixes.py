"""User-data loaders and the STS score: a qrels file with a fourth column, the ids the unknown-
judgement warning names, separator and carriage-return messages, and rounding noise ranked by
Spearman (each found by running `facet eval --task beir:...,sts:...` on hand-made folders)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from app.errors import DataError
from app.evaluation import loaders, metrics
from app.evaluation.cache import EmbeddingCache
from app.evaluation.tasks import EvalContext, StsTask, tie_rounding_noise
from tests.app.evaluation.conftest import FakeEmbedder

CORPUS = "".join(f'{{"_id": "{i}", "text": "document {i}"}}\n' for i in range(4))
QUERIES = '{"_id": "q0", "text": "first"}\n{"_id": "q1", "text": "second"}\n'


def _beir(root: Path, qrels: str, corpus: str = CORPUS, queries: str = QUERIES) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(corpus)
    (root / "queries.jsonl").write_text(queries)
    (root / "qrels" / "test.tsv").write_text(qrels)
    return root


def _message(call, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError) as info:
        call(*args)
    return str(info.value)


# -- 1. a fourth qrels column ------------------------------------------------------------------


def test_a_qrels_header_naming_its_columns_is_read_by_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every 4-field line was taken for TREC's `qid 0 docid grade`, so the score became the
    document id: nDCG 68.72 instead of 54.36, no word said."""
    root = _beir(tmp_path / "b", "query-id\tcorpus-id\tscore\tannotator\nq0\t0\t1\t1\nq1\t2\t1\t1\nq1\t3\t0\t2\n")
    with caplog.at_level(logging.WARNING, logger="app.evaluation.loaders"):
        data = loaders.load_beir(root)
    assert data.qrels == {"q0": {"0": 1.0}, "q1": {"2": 1.0, "3": 0.0}}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, warnings  # said once, not per line
    assert "line 1 names column(s) 'annotator' besides query-id, corpus-id and score; ignored" in warnings[0]
    # The columns may come in any order, and a line must be as wide as the header.
    other = _beir(tmp_path / "o", "corpus-id\tquery-id\tscore\n2\tq1\t1\n")
    assert loaders.load_beir(other).qrels == {"q1": {"2": 1.0}}
    short = _beir(tmp_path / "s", "query-id\tcorpus-id\tscore\tannotator\nq0\t0\t1\t1\nq1\t2\t1\n")
    assert "test.tsv, line 3: expected 4 field(s) as line 1 names them" in _message(loaders.load_beir, short)


def test_a_headerless_four_field_line_is_trec_only_with_its_iteration_column(tmp_path: Path) -> None:
    """`q0 d0 1 1` (a BEIR line with a fourth column, no header) was read as TREC: document '1'."""
    root = _beir(tmp_path / "b", "q0\td0\t1\t1\n", corpus='{"_id": "d0", "text": "x"}\n{"_id": "1", "text": "y"}\n')
    message = _message(loaders.load_beir, root)
    assert message.startswith(f"{root / 'qrels' / 'test.tsv'}, line 1: 4 fields, and the 2nd ('d0') is not TREC's "
                              "iteration column (0 or Q0)"), message
    assert "'query-id<TAB>corpus-id<TAB>score'" in message and "TREC's 'query-id 0 corpus-id score'" in message
    assert "\n" not in message
    # TREC still reads: 0 or Q0 second, tab- or space-separated, with or without a header.
    for n, qrels in enumerate(["q0 0 1 1\nq1 0 2 0\n", "q0\tQ0\t1\t1\nq1\tQ0\t2\t0\n",
                               "qid\titer\tdocid\trel\nq0\t0\t1\t1\nq1\t0\t2\t0\n"]):
        assert loaders.load_beir(_beir(tmp_path / f"t{n}", qrels)).qrels == {"q0": {"1": 1.0}, "q1": {"2": 0.0}}


# -- 2. the warning names the ids ----------------------------------------------------------------


def test_the_unknown_judgement_warning_names_the_ids(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = _beir(tmp_path / "b", "query-id\tcorpus-id\tscore\nq0\t1\t1\nq0 \t2\t1\nq1\t9\t1\nq0 \t3\t1\n")
    with caplog.at_level(logging.WARNING, logger="app.evaluation.loaders"):
        data = loaders.load_beir(root)
    assert data.qrels == {"q0": {"1": 1.0}} and data.skipped_judgements == 3  # ids are not stripped
    assert ("3 judgement(s) name a query or document that does not exist (not found: query 'q0 ', "
            "document '9'); ignored") in caplog.text
    many = _beir(tmp_path / "m", "q0\t1\t1\n" + "".join(f"x{i}\t1\t1\n" for i in range(5)))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="app.evaluation.loaders"):
        loaders.load_beir(many)
    assert "(not found: query 'x0', query 'x1', query 'x2', ... (5 in all))" in caplog.text


# -- 3. a comma-separated qrels file --------------------------------------------------------------


def test_a_comma_separated_qrels_file_is_named(tmp_path: Path) -> None:
    for n, qrels in enumerate(["query-id,corpus-id,score\nq0,1,1\n", "q0,1,1\n"]):
        message = _message(loaders.load_beir, _beir(tmp_path / f"b{n}", qrels))
        assert message.endswith("line 1: expected 'query-id<TAB>corpus-id<TAB>score', got 1 field(s); "
                                "the line looks comma-separated; qrels are tab-separated"), message


# -- 4. STS: a stray carriage return, an empty score ---------------------------------------------


def test_an_sts_carriage_return_is_said_in_the_users_terms(tmp_path: Path) -> None:
    path = tmp_path / "cr.csv"
    path.write_bytes(b"x,y,1\r\nz,w\r,2\n")
    message = _message(loaders.load_sts_csv, path)
    assert message == (f"{path}, line 2: a carriage return inside a field; re-save the file with plain line ends, "
                       "or quote the field")


def test_an_empty_sts_score_is_not_taken_for_a_header(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("a,b,\nc,d,2\ne,f,3\n")
    assert _message(loaders.load_sts_csv, path) == f"{path}, line 1: empty score (the third field)"
    path.write_text("a,b,1\nc,d, \ne,f,3\n")
    assert _message(loaders.load_sts_csv, path) == f"{path}, line 2: empty score (the third field)"


# -- 5. STS: rounding noise ties ------------------------------------------------------------------


class _RawEmbedder(FakeEmbedder):
    """Returns its table's vectors as they are (not normalised): cosines set to the last bit."""

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        super().__init__(lambda t, r, i: table[t], 1)
        self.table = table

    def encode(self, texts: Sequence[str], **kwargs: object) -> np.ndarray:
        return np.asarray([self.table[t] for t in texts], dtype=np.float32)


NOISE = [-1e-6, 7e-7, 0.0, 1e-7, -4e-7, 5e-7, -6e-8, 3e-7, -9e-7, 6e-7]  # 0.999999 .. 1.0000007


def test_identical_sentences_tie_in_the_sts_ranking() -> None:
    """Ten pairs of a sentence and itself (cosine 1 up to float noise) and ten unrelated pairs:
    the noise was ranked (86.9-88.0 on real embedders) where exact ties give 92.65."""
    table: dict[str, Sequence[float]] = {}
    pairs = []
    for i, noise in enumerate(NOISE):
        table[f"s{i}"], table[f"t{i}"] = [1.0], [1.0 + noise]
        pairs.append(loaders.StsPair(f"s{i}", f"t{i}", 5.0))
    for i in range(10):
        table[f"u{i}"], table[f"v{i}"] = [1.0], [0.05 * i + 0.01 * (i % 3)]
        pairs.append(loaders.StsPair(f"u{i}", f"v{i}", float(i % 4)))
    ctx = EvalContext(_RawEmbedder(table), EmbeddingCache(None), show_progress=False)
    result = StsTask("noise", lambda: pairs).run(ctx)
    exact = [1.0] * 10 + [table[f"v{i}"][0] for i in range(10)]
    expected = metrics.spearman(exact, [p.score for p in pairs])
    assert result.error is None and result.scores["spearman"] == pytest.approx(expected, abs=1e-12)
    # A 1e-6 grid would not do: the noise straddles its line at 1.0000005.
    assert len(set(np.round(np.float32(1.0) + np.float32(NOISE), 6).tolist())) > 1


def test_tie_rounding_noise_chains_only_steps_within_the_tolerance() -> None:
    values = np.array([0.5, 1.0000007, 0.9999992, 0.5000009, 0.5000025, 1.0, 0.2])
    tied = tie_rounding_noise(values)
    assert tied.tolist() == [0.5, 0.9999992, 0.9999992, 0.5, 0.5000025, 0.9999992, 0.2]
    assert tie_rounding_noise(np.array([0.1, 0.3, 0.2])).tolist() == [0.1, 0.3, 0.2]  # real spreads are kept


def test_minilm_scores_self_pairs_as_ties(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    """The explorer's pairs.csv: minilm scored 88.01 instead of 92.65."""
    same = ["The cat sat on the warm windowsill all afternoon.", "Photosynthesis converts sunlight into energy.",
            "The stock market fell sharply after the announcement.", "Python lists can be sorted in place.",
            "Mount Everest is the highest mountain above sea level.", "The recipe calls for two cups of flour.",
            "Electric cars use lithium-ion batteries for power.", "The Roman Empire fell in the fifth century.",
            "Regular exercise improves cardiovascular health.", "The violin has four strings tuned in fifths."]
    other = ["Coffee beans are roasted to develop their flavor.", "Jupiter is the largest planet.",
             "The library opens at nine on weekdays.", "Tax returns must be filed by April.",
             "Penguins live mostly in the Southern Hemisphere.", "A router forwards packets between networks.",
             "The novel was translated into forty languages.", "Rainforests host half of the world's species.",
             "Chess openings are studied by serious players.", "The bridge was closed during the storm."]
    pairs = [loaders.StsPair(s, s, 5.0) for s in same]
    pairs += [loaders.StsPair(o, s, 0.0) for o, s in zip(other, same, strict=True)]
    ctx = EvalContext(minilm, EmbeddingCache(None), show_progress=False)
    result = StsTask("self", lambda: pairs).run(ctx)
    # Self-pairs all tie at rank 15.5 of 20, above every unrelated pair: rho depends only on that.
    exact = [1.0] * 10 + [0.1 * i for i in range(10)]
    assert result.scores["spearman"] == pytest.approx(metrics.spearman(exact, [p.score for p in pairs]), abs=1e-12)


def test_a_qrels_header_naming_a_column_twice_is_said_so(tmp_path: Path) -> None:
    # Its lines were read by position and refused as "not TREC's iteration column", a message
    # that did not say what was wrong with the file (a verification, 2026-12-01).
    root = _beir(tmp_path / "b", "query-id\tcorpus-id\tscore\tscore\nq0\t0\t1\t0\n")
    assert ("test.tsv, line 1: the header names 'score' more than once; name each of query-id, "
            "corpus-id and score once") in _message(loaders.load_beir, root)


# -- the sixth session of 2026-12-04's review ---------------------------------------------------


def test_an_empty_ignored_qrels_cell_and_a_header_below_a_blank_line_are_read(tmp_path: Path) -> None:
    """An empty `note` cell, last on its line, was dropped with the line's blanks ("expected 4
    field(s) ..., got 3"); a header below a blank first line was read as a judgement ("score
    'score' is not a number", without the header hint)."""
    root = _beir(tmp_path / "b", "query-id\tcorpus-id\tscore\tnote\nq0\t0\t1\t\nq1\t2\t1\tx\t\n")
    assert loaders.load_beir(root).qrels == {"q0": {"0": 1.0}, "q1": {"2": 1.0}}  # (a trailing tab past it too)
    below = _beir(tmp_path / "c", "\nquery-id\tcorpus-id\tscore\nq0\t0\t1\n")
    assert loaders.load_beir(below).qrels == {"q0": {"0": 1.0}}
    odd = _beir(tmp_path / "d", "\nx\ty\tz\nq0\t0\t1\n")
    assert _message(loaders.load_beir, odd).endswith(
        "line 2: score 'z' is not a number (a header line? name its first column query-id, or remove it)")
    # Without a header a trailing tab is still no fourth field.
    assert loaders.load_beir(_beir(tmp_path / "e", "q0\t0\t1\t\n")).qrels == {"q0": {"0": 1.0}}


def test_unpaired_surrogates_in_user_data_are_data_errors_before_any_model(tmp_path: Path) -> None:
    """JSON's "\\ud83d" (an emoji cut in half) loads as an unpaired surrogate: the run failed on
    a UnicodeEncodeError traceback from the embedding cache once the model had loaded."""
    root = _beir(tmp_path / "b", "q0\t0\t1\n", corpus='{"_id": "0", "text": "cats purr \\ud83d"}\n')
    assert _message(loaders.load_beir, root).endswith(
        "corpus.jsonl, line 1: field 'text' holds an unpaired surrogate ('\\ud83d' at character 10), which is "
        "not Unicode text; send the text as valid UTF-8 / paired \\u escapes")
    gx = tmp_path / "gx"
    gx.mkdir()
    (gx / "data.json").write_text('{"goal": "by animal",\n "texts": ["cats purr",\n  "dogs \\udc00 bark"]}')
    (gx / "labels.json").write_text('{"labels": [0, 1]}')
    assert "data.json, line 3: texts[1] holds an unpaired surrogate" in _message(loaders.load_goalex, gx)


def test_an_error_in_a_utf16_goalex_file_names_its_line(tmp_path: Path) -> None:
    """The line of a bad text was looked for in the file read as UTF-8: a UnicodeDecodeError
    traceback instead of the error."""
    gx = tmp_path / "gx"
    gx.mkdir()
    (gx / "data.json").write_text('{"goal": "g",\n "texts": ["cats purr", "dogs bark",\n "", "fish"]}',
                                  encoding="utf-16")
    (gx / "labels.json").write_text('{"labels": [0, 1, 0, 1]}', encoding="utf-16")
    assert _message(loaders.load_goalex, gx).endswith("data.json, line 3: texts[2] is not a non-empty string")
