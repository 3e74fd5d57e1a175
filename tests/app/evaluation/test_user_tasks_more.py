"""`--task KIND:PATH` on a user's own data: a missing path named as given, the sizes read shown
beside each figure, malformed files explained by what they look like, degenerate data warned
about, and a report folder of its own."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.errors import DataError, InvalidRequestError
from app.evaluation import loaders
from app.evaluation.cache import EmbeddingCache
from app.evaluation.runner import EvalReport, EvalRunner, write_report
from app.evaluation.suites import build_user_tasks, user_tasks_key
from app.evaluation.tasks import TaskResult
from tests.app.evaluation.conftest import FakeEmbedder, hashed_vector


def _beir(root: Path, n_queries: int = 3, qrels: str | None = None) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": f"document number {i} about topic {i}"}) + "\n" for i in range(4))
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"topic {i}"}) + "\n" for i in range(n_queries))
    )
    lines = qrels if qrels is not None else "".join(f"q{i}\td{i}\t1\n" for i in range(n_queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + lines)
    return root


def _goalex(folder: Path, labels: list[int]) -> Path:
    folder.mkdir(parents=True)
    texts = [f"text number {i}" for i in range(len(labels))]
    (folder / "data.json").write_text(json.dumps({"goal": "by topic", "texts": texts}))
    (folder / "labels.json").write_text(json.dumps({"labels": labels}))
    return folder


def _run(tasks, embedder=None):  # type: ignore[no-untyped-def]
    fake = embedder or FakeEmbedder(lambda t, r, i: hashed_vector(t), 16)
    runner = EvalRunner(lambda name: fake, EmbeddingCache(None), show_progress=False)
    return runner.run("fake", [], tasks, "user")


# -- 1. a beir: path without @ ----------------------------------------------------------------


@pytest.mark.parametrize("given", ["nope", "data/myset", "test"])
def test_a_missing_beir_path_without_an_at_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """`beir:nope` said ". has no corpus.jsonl": with no @ the path was "" and the text the split,
    and from inside a BEIR folder `beir:test` silently evaluated that folder's test split."""
    monkeypatch.chdir(_beir(tmp_path / "here"))
    with pytest.raises(InvalidRequestError, match=f"--task 'beir:{given}': {given} does not exist"):
        build_user_tasks([f"beir:{given}"])
    with pytest.raises(InvalidRequestError, match="give the folder before @test"):
        build_user_tasks(["beir:@test"])
    (split,) = build_user_tasks(["beir:.@test"])  # the documented @SPLIT form still reads the folder
    assert split.info()["split"] == "test"  # type: ignore[attr-defined]


def test_a_folder_with_a_comma_beside_another_item(tmp_path: Path) -> None:
    """`beir:odd/my,set,sts:x.csv` was cut at every comma: "--task 'beir:odd/my': . has no ..."."""
    folder = _beir(tmp_path / "odd" / "my,set")
    pairs = tmp_path / "x.csv"
    pairs.write_text("a,b,1\nc,d,2\n")
    tasks = build_user_tasks([f"beir:{folder},sts:{pairs}"])
    assert [t.name for t in tasks] == ["beir:my,set", "sts:x.csv"]
    (split, _) = build_user_tasks([f"beir:{folder}@test,sts:{pairs}"])
    assert split.name == "beir:my,set@test"
    with pytest.raises(InvalidRequestError, match="nothere does not exist"):
        build_user_tasks([f"beir:{folder}@test,goalex:{tmp_path}/nothere"])


# -- 2 and 6. the sizes read, skipped judgements, warnings ----------------------------------


def test_results_show_the_sizes_read_and_what_was_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Nothing said that 1 of 5 queries was scored or that a Spearman rested on 2 pairs, and an
    all-distinct GoalEx labelling scored 100 for any embedder without a word."""
    # 5 judged queries: q3 names an unknown document, q4 is not in queries.jsonl (3 judgements skipped).
    beir = _beir(
        tmp_path / "set", n_queries=4, qrels="q0\td0\t1\nq1\td1\t1\nq2\td2\t1\nq3\tNODOC\t1\nq4\td0\t1\nq0\tNODOC\t1\n"
    )
    pairs = tmp_path / "two.csv"
    pairs.write_text("a cat sits,a cat is sitting,5\na dog runs,stock prices fell,0\n")
    distinct = _goalex(tmp_path / "g", [0, 1, 2, 3, 0])
    with caplog.at_level(logging.WARNING):
        tasks = build_user_tasks([f"beir:{beir},sts:{pairs},goalex:{distinct}"])
        report = _run(tasks)
    retrieval, sts, clustering = report.runs[0].results
    assert retrieval.label == "beir:set (3 of 5 queries, 4 docs)"
    assert retrieval.info["skipped_judgements"] == 3 and retrieval.info["dropped_queries"] == 2
    assert sts.label == "sts:two.csv (2 pairs)" and clustering.label == "goalex:g (5 texts, k=4)"
    assert sts.info["warnings"] == ["only 2 sentence pairs; a score on fewer than 10 says little"]
    assert retrieval.info["warnings"] == ["only 3 queries; a score on fewer than 10 says little"]
    assert any("4 distinct labels for 5 texts (more than half)" in w for w in clustering.info["warnings"])
    logged = caplog.text
    assert "sts:two.csv: only 2 sentence pairs" in logged and "4 distinct labels for 5 texts" in logged
    _, md = write_report(report, tmp_path / "out")
    text = md.read_text()
    assert "| beir:set (3 of 5 queries, 4 docs) | **ndcg@10** |" in text
    assert "| sts:two.csv (2 pairs) | **spearman** |" in text and "| goalex:g (5 texts, k=4) |" in text
    # The report is titled as user tasks, and explains no multi-view score that is not in it.
    assert text.startswith("# facet eval: fake (user tasks)") and "steer_gap" not in text


def test_enough_data_gives_no_warning(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("".join(f"sentence {i},sentence {i} again,{i}\n" for i in range(10)))
    enough = _goalex(tmp_path / "g", [i % 5 for i in range(10)])
    report = _run(build_user_tasks([f"sts:{pairs},goalex:{enough}"]))
    assert all("warnings" not in r.info for r in report.runs[0].results)


def test_the_multiview_note_stays_where_a_multiview_task_ran(tmp_path: Path) -> None:
    result = TaskResult("clinc-multiview", "multiview", "hmean", {"hmean": 0.5, "steer_gap": 0.1})
    run = _run([]).runs[0]
    run.results = [result]
    _, md = write_report(EvalReport("quick", [run]), tmp_path)
    assert md.read_text().startswith("# facet eval: fake (quick suite)") and "`steer_gap` is" in md.read_text()


# -- 3, 4, 5. malformed files explained ---------------------------------------------------------


def _message(call, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError) as info:
        call(*args)
    return str(info.value)


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("corpus.jsonl", "corpus.jsonl: no documents (the file is empty)"),
        ("queries.jsonl", "queries.jsonl: no queries (the file is empty)"),
    ],
)
def test_an_empty_corpus_or_queries_file_is_named(tmp_path: Path, file: str, expected: str) -> None:
    """It was blamed on the qrels: "qrels/test.tsv: no usable relevance judgements"."""
    root = _beir(tmp_path / "b")
    (root / file).write_text("\n")
    assert expected in _message(loaders.load_beir, root)


def test_judgements_matching_nothing_show_the_ids_compared(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b", qrels="1\td0\t1\n2\td1\t1\n")
    message = _message(loaders.load_beir, root)
    assert "no usable relevance judgements" in message
    assert "query '1' and document 'd0'" in message and "ids such as 'q0'" in message


def test_a_missing_id_field_lists_the_keys(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b")
    (root / "corpus.jsonl").write_text('{"id": "d0", "title": "t", "text": "x"}\n')
    assert "corpus.jsonl, line 1: no '_id' field (its keys: id, title, text)" in _message(loaders.load_beir, root)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("sentence1,sentence2,score\na,b,1\nc,d,2\n", "line 1: score 'score' is not a number (a header line?"),
        ("a b\tc d\t1\ne\tf\t2\n", "looks tab-separated; the STS format is comma-separated"),
        ("a, b;c;1\ne;f;2\n", "looks semicolon-separated; the STS format is comma-separated"),
    ],
)
def test_an_sts_header_or_other_separator_is_named(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "s.csv"
    path.write_text(content)
    assert expected in _message(loaders.load_sts_csv, path)
    # A score that is not a number after line 1 is not taken for a header.
    path.write_text("a,b,1\nc,d,high\n")
    assert _message(loaders.load_sts_csv, path).endswith("line 2: score 'high' is not a number")


def test_a_qrels_header_the_loader_does_not_know_gets_the_hint(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b")
    (root / "qrels" / "test.tsv").write_text("query\tdoc\tlabel\nq0\td0\t1\n")
    assert "line 1: score 'label' is not a number (a header line?" in _message(loaders.load_beir, root)


# -- 7. a report folder of its own ------------------------------------------------------------


def test_user_tasks_key_names_what_is_read(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for p in (a, b):
        p.write_text("x,y,1\nz,w,2\n")
    one = user_tasks_key(build_user_tasks([f"sts:{a},sts:{b}"]))
    assert one == user_tasks_key(build_user_tasks([f"sts:{b},sts:{a}"])) and re.fullmatch("[0-9a-f]{8}", one)
    assert one != user_tasks_key(build_user_tasks([f"sts:{a}"]))


@pytest.mark.usefixtures("minilm")
def test_a_task_only_run_writes_its_own_folder_and_prints_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It wrote results/minilm-quick/ (the built-in quick suite's report), titled "(quick suite)"."""
    monkeypatch.chdir(tmp_path)
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a cat sits,a cat is sitting,5\na dog runs,stock prices fell,0\n")
    result = CliRunner().invoke(
        cli, ["eval", "minilm", "--task", f"sts:{pairs}", "--baselines", "", "--no-cache", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "minilm sts:pairs.csv (2 pairs): spearman = " in result.output
    folder = Path("results") / f"minilm-user-{user_tasks_key(build_user_tasks([f'sts:{pairs}']))}"
    assert sorted(p.name for p in Path("results").iterdir()) == [folder.name]
    data = json.loads((folder / "results.json").read_text())
    assert data["suite"] == "user" and data["user_tasks"] == [f"sts:{pairs}"]
    assert data["runs"][0]["results"][0]["info"]["warnings"]
    assert (folder / "results.md").read_text().startswith("# facet eval: minilm (user tasks)")


# -- 8. instructions of sts tasks ---------------------------------------------------------------


def test_sts_tasks_take_a_per_task_instruction_but_not_the_task_instruction(tmp_path: Path) -> None:
    """As docs/evaluation.md says: --task-instruction is not applied to sts tasks (bare sentences,
    like STS-B), --instruction sts:NAME=TEXT is, to both sentences."""
    from app.commands.eval import _override_instruction

    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a,b,1\nc,d,2\n")
    (plain,) = build_user_tasks([f"sts:{pairs}"], "Find it")
    fake = FakeEmbedder(lambda t, r, i: hashed_vector(f"{i}|{t}"), 16)
    _run([plain], fake)
    assert {i for _, _, i in fake.encoded} == {None}
    _override_instruction([plain], "sts:pairs.csv=Compare meaning")
    fake.encoded.clear()
    _run([plain], fake)
    assert {i for _, _, i in fake.encoded} == {"Compare meaning"} and len(fake.encoded) == 4


@pytest.mark.parametrize("invisible", ["\u200b", "\ufeff", "\u2060 \u00ad"])
def test_a_text_of_invisible_characters_alone_is_empty(tmp_path: Path, invisible: str) -> None:
    """A zero-width space, a BOM, a word joiner or a soft hyphen is not whitespace to
    ``str.strip``: such a query, sentence or text was scored as one (the indexer calls a
    document of them empty)."""
    sts = tmp_path / "zw.csv"
    sts.write_text(f"{invisible},hello there,1\nA cat,A dog,2\n")
    assert _message(loaders.load_sts_csv, sts).endswith("line 1: empty sentence")
    root = _beir(tmp_path / "b")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": invisible}) + "\n")
    assert "queries.jsonl, line 1: empty query (text is blank)" in _message(loaders.load_beir, root)
    folder = _goalex(tmp_path / "g", [0, 0, 1, 1])
    (folder / "data.json").write_text(json.dumps({"goal": "by topic", "texts": ["a", "b", invisible, "d"]}))
    assert "texts[2] is not a non-empty string" in _message(loaders.load_goalex, folder)
