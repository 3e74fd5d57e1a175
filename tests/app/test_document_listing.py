"""Listing a collection's documents: ``Facet.documents`` and `facet documents NAME`.

There was no way to list or page a collection's documents: to remove some by key (`facet
delete C --document KEY`) a user with 25,000 of them rebuilt the keys from the source files or
from search results. A page in key order (SQL LIMIT/OFFSET, one COUNT), ``not_shown`` as `facet
jobs` says it, ``status`` and ``prefix`` filters; each key printed as one shell word that pastes
back into `facet delete`.

Real SQLite, the edge store and minilm over a corpus of 30 tiny documents (and a collection of
25,000 rows written through the metadata layer alone, for the time a page takes).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from app.core import Facet
from app.encoding import EmbedderCache
from app.errors import InvalidRequestError, NotFoundError
from app.services.collections import DocumentList
from app.services.search import SearchRequest
from app.settings import FacetSettings
from indexer import metadata as md
from tests.app.cli_runner import invoke_cli
from tests.app.services.conftest import write_corpus

ODD = "with space & #1.txt"  # a key that a shell splits unless quoted


def write_sources(root: Path) -> Path:
    """30 documents: 12 files under a/ (one named ``ODD``), 12 under b/, a pdf that cannot be
    read (status error) and a jsonl of 5 records (keys r1..r5)."""
    src = root / "src"
    write_corpus(src / "a", 11, words=10)
    write_corpus(src / "b", 12, words=10)
    (src / "a" / ODD).write_text("card declined twice at the shop")
    (src / "a" / "broken.pdf").write_text("not a pdf")
    (src / "recs.jsonl").write_text("".join(
        json.dumps({"id": f"r{i}", "text": f"record {i} about a bank transfer", "lang": "en"})
        + "\n" for i in range(1, 6)))
    return src


@pytest.fixture(scope="module")
def corpus(minilm, tmp_path_factory) -> tuple[Path, Path]:
    """(data folder, sources): collection ``docs`` of the 30 documents, ``gone`` of 3 files
    (for removals); the facade closed, so the CLI can open the store."""
    root = tmp_path_factory.mktemp("doclist")
    src = write_sources(root)
    write_corpus(root / "gone", 3, words=10)
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=root / "data"), embedders=cache)
    try:
        facet.index(src, "docs")
        facet.index(root / "gone", "gone")
    finally:
        facet.close()
    return root / "data", src


@pytest.fixture
def facet(corpus, minilm) -> Iterator[Facet]:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    opened = Facet(FacetSettings(data_dir=corpus[0]), embedders=cache)
    yield opened
    opened.close()


def _all_keys(facet: Facet, collection: str) -> list[str]:
    with facet.catalog.ctx.sessions() as session:
        coll = md.get_collection(session, collection)
        assert coll is not None
        return sorted(session.scalars(select(md.Document.key).where(
            md.Document.collection_id == coll.id)))


def test_pages_read_every_document_once_in_key_order(facet) -> None:
    every = _all_keys(facet, "docs")
    assert len(every) == 30
    seen: list[str] = []
    offset, pages = 0, 0
    while True:
        page = facet.documents("docs", limit=7, offset=offset)
        assert isinstance(page, DocumentList)
        pages += 1
        seen += [d.key for d in page]
        assert page.not_shown == 30 - len(seen)
        if not page.not_shown:
            break
        offset += 7
    assert pages == 5 and seen == every  # each once, in key order
    assert facet.documents("docs", limit=7, offset=30) == []
    one = facet.documents("docs", limit=1000)
    assert [d.key for d in one] == every and one.not_shown == 0


def test_a_document_says_what_it_is_and_its_key_is_a_search_doc_id(facet, corpus) -> None:
    src = corpus[1]
    by_key = {d.key: d for d in facet.documents("docs", limit=100)}
    r3 = by_key["r3"]
    assert (r3.source, r3.status, r3.chunks, r3.metadata.get("lang")) == (
        str(src / "recs.jsonl"), "indexed", 1, "en")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r3.updated_at)
    broken = by_key[str(src / "a" / "broken.pdf")]
    assert broken.status == "error" and broken.chunks == 0 and "PDF" in (broken.error or "")
    hits = facet.search(SearchRequest(query="bank transfer record", collection="docs", top_k=5))
    assert hits.results and all(h.doc_id in by_key for h in hits.results)


def test_status_and_prefix_narrow_the_page_and_the_count(facet, corpus) -> None:
    src = corpus[1]
    errors = facet.documents("docs", status="error")
    assert [d.key for d in errors] == [str(src / "a" / "broken.pdf")] and errors.not_shown == 0
    assert facet.documents("docs", status="pending") == []
    indexed = facet.documents("docs", limit=10, status="indexed")
    assert len(indexed) == 10 and indexed.not_shown == 19
    under_a = facet.documents("docs", limit=5, prefix=str(src / "a") + "/")
    assert all(d.key.startswith(str(src / "a") + "/") for d in under_a)
    assert under_a.not_shown == 13 - 5  # 11 + ODD + broken.pdf
    both = facet.documents("docs", prefix=str(src / "a") + "/", status="indexed")
    assert len(both) == 12 and both.not_shown == 0
    # Text, not a LIKE pattern: "%" and "_" match themselves only; case is kept.
    assert facet.documents("docs", prefix="%") == [] and facet.documents("docs", prefix="R") == []
    assert [d.key for d in facet.documents("docs", prefix="r")] == [f"r{i}" for i in range(1, 6)]
    # Or the source's start: a record file's path finds its records, its folder every document
    # read from under it.
    recs = facet.documents("docs", prefix=str(src / "recs.jsonl"))
    assert [d.key for d in recs] == [f"r{i}" for i in range(1, 6)] and recs.not_shown == 0
    assert len(facet.documents("docs", limit=100, prefix=f"{src}/")) == 30


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"limit": True}, "limit"),
    ({"limit": "5"}, "limit"), ({"offset": -1}, "offset"), ({"offset": 1.5}, "offset"),
    ({"status": "done"}, "status"), ({"prefix": 5}, "prefix"), ({"prefix": "\ud800"}, "prefix"),
])
def test_bad_arguments_are_refused_naming_them(facet, kwargs, param) -> None:
    with pytest.raises(InvalidRequestError) as e:
        facet.documents("docs", **kwargs)
    assert e.value.param == param


def test_an_unknown_collection_is_not_found(facet) -> None:
    with pytest.raises(NotFoundError) as e:
        facet.documents("nope")
    assert e.value.param == "collection" and "known: docs, gone" in str(e.value)
    with pytest.raises(InvalidRequestError):
        facet.documents(5)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- CLI

_MORE = re.compile(r"^… (\d+) more documents? not shown \((?:--limit (\d+) )?(--offset|--after) (.+) "
                   r"shows the next ones")


def _follow_hints(data, first: list[str], skipped: int = 0) -> list[str]:
    """The keys `facet documents` lists when its "not shown" line is followed page by page
    (``first``'s arguments leaving out the first ``skipped``)."""
    seen: list[str] = []
    args = first
    while True:
        r = invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        more = _MORE.match(lines[-1])
        docs = lines[:-1] if more else lines
        seen += [shlex.split(line)[0] for line in docs]
        if more is None:
            return seen
        assert more.group(2) == "8" and int(more.group(1)) == 30 - skipped - len(seen)
        args = ["documents", "docs", "--limit", "8", more.group(3), *shlex.split(more.group(4))]
        # From the first page on, the next page is after the last key (as the API's Link);
        # a page asked by --offset names the next --offset.
        assert more.group(3) == ("--offset" if "--offset" in first else "--after"), lines[-1]


def test_cli_pages_by_the_key_or_offset_it_prints_and_reads_every_key(corpus) -> None:
    data, _src = corpus
    with Facet(FacetSettings(data_dir=data)) as facet:
        every = _all_keys(facet, "docs")
    assert _follow_hints(data, ["documents", "docs", "--limit", "8"]) == every
    by_offset = _follow_hints(data, ["documents", "docs", "--limit", "8", "--offset", "8"], 8)
    assert by_offset == every[8:]


def test_cli_first_page_hint_survives_a_document_removed_meanwhile(corpus, tmp_path) -> None:
    # The first page named "--offset 8": a document of that page removed before the next was
    # read shifted the rest back by one, and the key that moved onto page one was never listed.
    data = tmp_path / "data"  # a copy: the module's corpus stays whole for the other tests
    shutil.copytree(corpus[0], data)
    env = {"FACET_DATA_DIR": str(data)}
    with Facet(FacetSettings(data_dir=data)) as facet:
        every = _all_keys(facet, "docs")
    first = invoke_cli("documents", "docs", "--limit", "8", env=env)
    hint = _MORE.match(first.stdout.splitlines()[-1])
    assert hint is not None, first.stdout
    gone = invoke_cli("delete", "docs", "--document", every[0], "--yes", env=env)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    second = invoke_cli("documents", "docs", "--limit", "8", hint.group(3),
                        *shlex.split(hint.group(4)), env=env)
    assert [shlex.split(line)[0] for line in second.stdout.splitlines()[:8]] == every[8:16]


def test_cli_lines_json_and_filters(corpus) -> None:
    data, src = corpus
    env = {"FACET_DATA_DIR": str(data)}
    r = invoke_cli("documents", "docs", "--status", "error", env=env)
    assert r.returncode == 0, r.stderr
    [line] = r.stdout.splitlines()
    assert line.startswith(f"{src / 'a' / 'broken.pdf'}  error  0 chunks · ")
    and_records = invoke_cli("documents", "docs", "--prefix", "r", env=env)
    assert and_records.stdout.splitlines()[0] == f"r1  indexed  1 chunk  from {src / 'recs.jsonl'}"
    r = invoke_cli("documents", "docs", "--json", "--limit", "4", env=env)
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)  # stdout: the bare list; the rest said on stderr
    assert len(listed) == 4 and set(listed[0]) == {
        "key", "source", "title", "status", "chunks", "updated_at", "metadata", "error"}
    assert f"26 more documents not shown (--limit 4 --after {shlex.quote(listed[-1]['key'])} " \
        "shows the next ones" in r.stderr, r.stderr
    past = invoke_cli("documents", "docs", "--offset", "40", env=env)
    assert past.stdout == "no documents past the first 40: collection docs has 30 documents\n"
    none = invoke_cli("documents", "docs", "--status", "pending", env=env)
    assert none.stdout == "no pending documents in collection docs\n"


@pytest.mark.parametrize(("args", "code", "said"), [
    (["nope"], 3, "unknown collection 'nope'"),
    (["docs", "--limit", "0"], 2, "error: --limit must be from 1 to 1000"),
    (["docs", "--limit", "1001"], 2, "error: --limit must be from 1 to 1000"),
    (["docs", "--offset", "-1"], 2, "error: --offset must be a whole number"),
    (["docs", "--status", "done"], 2, "status must be one of indexed, error, pending"),
])
def test_cli_refusals_exit_as_other_commands(corpus, args, code, said) -> None:
    r = invoke_cli("documents", *args, env={"FACET_DATA_DIR": str(corpus[0])})
    assert r.returncode == code and said in r.stderr and r.stdout == ""


def test_a_printed_key_pastes_into_facet_delete(corpus, tmp_path) -> None:
    """The key with a space, '&' and '#' is printed quoted, as one shell word: split as a shell
    splits it, it is the key `facet delete --document` takes."""
    data, src = corpus
    env = {"FACET_DATA_DIR": str(data)}
    odd = str(src / "a" / ODD)
    r = invoke_cli("documents", "docs", "--prefix", odd, env=env)
    [line] = r.stdout.splitlines()
    assert line.startswith(shlex.quote(odd) + "  indexed  1 chunk")
    pasted = shlex.split(line)[0]
    gone = invoke_cli("delete", "docs", "--document", pasted, "-y", env=env)
    assert gone.returncode == 0, gone.stderr
    after = invoke_cli("documents", "docs", "--prefix", odd, env=env)
    assert after.stdout.startswith("no documents whose key or file starts with")
    # Every key of a page, pasted as printed, removes its documents.
    page = invoke_cli("documents", "gone", env=env).stdout.splitlines()
    keys = [shlex.split(line)[0] for line in page]
    assert len(keys) == 3
    removed = invoke_cli("delete", "gone", *[w for k in keys for w in ("-d", k)], "-y", env=env)
    assert removed.returncode == 0, removed.stderr
    assert invoke_cli("documents", "gone", env=env).stdout == "no documents in collection gone\n"


# ------------------------------------------------------------------- 25,000 rows

def add_rows(facet: Facet, collection: str, rows: list[dict]) -> int:
    """Document rows of ``collection`` (made where missing) written through the metadata layer
    alone (no model, no store): each a dict of ``md.Document``'s columns, ``source`` its
    ``key`` and ``status`` indexed unless given. The collection's id."""
    with facet.catalog.ctx.sessions.begin() as session:
        coll = md.get_collection(session, collection) or md.create_collection(
            session, collection, backend="edge", chunk_size=64, chunk_overlap=8,
            tokenizer="minilm")
        session.execute(insert(md.Document), [
            {"collection_id": coll.id, "source": row["key"], "status": "indexed",
             "n_chunks": 1} | row for row in rows])
        return int(coll.id)


def test_a_page_of_25000_documents_is_read_by_sql(tmp_path, capsys) -> None:
    """25,000 document rows written through the metadata layer (no model, no store): a page,
    a deep page, and filtered pages answer without loading every row. The times are printed,
    not asserted."""
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"))
    try:
        add_rows(facet, "big", [
            {"key": f"/corpus/{i % 10}/d{i:05d}.txt", "title": f"t{i}",
             "status": "error" if i % 100 == 0 else "indexed", "n_chunks": 2,
             "meta": {"i": i}} for i in range(25_000)])
        timings = {}
        for name, kwargs in {"first": {}, "deep": {"offset": 24_990},
                             "status": {"status": "error", "limit": 100},
                             "prefix": {"prefix": "/corpus/7/", "limit": 1000}}.items():
            start = time.perf_counter()
            page = facet.documents("big", **kwargs)
            timings[name] = (time.perf_counter() - start) * 1000
            if name == "first":
                assert len(page) == 20 and page.not_shown == 24_980
            if name == "deep":
                assert len(page) == 10 and page.not_shown == 0
            if name == "status":
                assert len(page) == 100 and page.not_shown == 150
            if name == "prefix":
                assert len(page) == 1000 and page.not_shown == 1500
        with capsys.disabled():
            print("\nFacet.documents on 25,000 rows (ms): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    finally:
        facet.close()


def test_a_relative_prefix_naming_a_folder_here_is_its_absolute_path(corpus, monkeypatch) -> None:
    """`facet documents docs --prefix a/` from the sources' folder listed nothing (keys are
    absolute paths), as `facet delete --document a.txt` reads a relative key against the
    current folder; a record id's start is still a prefix as given."""
    data, src = corpus
    env = {"FACET_DATA_DIR": str(data)}
    monkeypatch.chdir(src)
    r = invoke_cli("documents", "docs", "--prefix", "a/", "--json", "--limit", "100", env=env)
    assert r.returncode == 0, r.stderr
    keys = [d["key"] for d in json.loads(r.stdout)]
    absolute = invoke_cli("documents", "docs", "--prefix", f"{src / 'a'}/", "--json", "--limit",
                          "100", env=env)
    assert keys == [d["key"] for d in json.loads(absolute.stdout)] and len(keys) >= 12, keys
    records = invoke_cli("documents", "docs", "--prefix", "r", "--json", env=env)
    assert [d["key"] for d in json.loads(records.stdout)] == [f"r{i}" for i in range(1, 6)]
    # A jsonl file's path lists its records (keyed by their ids: it listed none, "no documents
    # whose key starts with .../recs.jsonl"), as the lines say where they were read from.
    from_file = invoke_cli("documents", "docs", "--prefix", "recs.jsonl", env=env)
    assert from_file.returncode == 0, from_file.stderr
    assert [line.split()[0] for line in from_file.stdout.splitlines()] == [
        f"r{i}" for i in range(1, 6)]
    assert all(line.endswith(f"from {src / 'recs.jsonl'}") for line in from_file.stdout.splitlines())
    bad = invoke_cli("documents", "docs", "--prefix", "caf\udce9", env=env)
    assert bad.returncode == 4 and "--prefix is not UTF-8 text (byte 0xE9" in bad.stderr
    # Through a linked folder: keys are the resolved paths (`facet index` resolves its source),
    # and `facet delete -d link/...` found a file there while `--prefix link/` listed nothing.
    (src.parent / "link").symlink_to(src)
    monkeypatch.chdir(src.parent)
    linked = invoke_cli("documents", "docs", "--prefix", "link/a/", "--json", "--limit", "100", env=env)
    assert linked.returncode == 0, linked.stderr
    assert [d["key"] for d in json.loads(linked.stdout)] == keys


def test_a_relative_prefix_of_a_file_deleted_since_lists_its_entries(minilm, tmp_path,
                                                                    monkeypatch) -> None:
    """A relative `--prefix` naming a file no longer there (deleted since it was indexed, the
    moment its entries are looked for, to remove them) listed nothing, as a record id's start,
    while `facet delete -d` of the same path found it."""
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "a.txt").write_text("alpha text about a card")
    (src / "b.txt").write_text("beta text about a loan")
    (src / "t.csv").write_text("id,text\nt1,first record\nt2,second record\n")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    try:
        facet.index(src, "c")
    finally:
        facet.close()
    (src / "a.txt").unlink()
    (src / "t.csv").unlink()
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    monkeypatch.chdir(tmp_path)

    def listed(prefix: str) -> list[str]:
        r = invoke_cli("documents", "c", "--prefix", prefix, "--json", env=env)
        assert r.returncode == 0, r.stderr
        return [d["key"] for d in json.loads(r.stdout)]

    assert listed("corpus/a.txt") == [str(src / "a.txt")]
    assert listed("./corpus/t.csv") == ["t1", "t2"]  # a gone csv's records, by its path
    # A page past the first reads the same prefix (it said "past the first 1: ... has none").
    paged = invoke_cli("documents", "c", "--prefix", "corpus/t.csv", "--limit", "1", "--offset",
                       "1", env=env)
    assert paged.returncode == 0 and paged.stdout.split()[0] == "t2", paged.stdout
    past = invoke_cli("documents", "c", "--prefix", "corpus/t.csv", "--offset", "5", env=env)
    assert "past the first 5: collection c has 2 documents" in past.stdout, past.stdout
    assert sorted(listed("corpus/")) == sorted([str(src / "a.txt"), str(src / "b.txt"), "t1", "t2"])
    # A record id's start is still read as given first; a path matching nothing, nothing.
    assert listed("t") == ["t1", "t2"]
    assert listed("nothing/") == []
    removed = invoke_cli("delete", "c", "-d", "corpus/a.txt", "-y", env=env)
    assert removed.returncode == 0 and listed("corpus/a.txt") == [], removed.stderr


def test_a_page_and_its_count_agree_when_a_write_comes_between_them(tmp_path) -> None:
    """The API review of the fifth session of 2026-12-06: the page's SELECT and its COUNT are
    two statements, and a job writing between them made them disagree (a page of 11 documents
    under a limit of 1000 said 20 more followed, and its Link led to an empty page; the other
    way, a full page said none followed). Here another connection adds, then removes, rows
    just before the COUNT runs: a page short of its limit says nothing follows, a full one that
    something does."""
    from sqlalchemy import delete, event

    facet = Facet(FacetSettings(data_dir=tmp_path / "data"))
    try:
        engine = facet.context.engine
        coll_id = add_rows(facet, "c", [{"key": f"/d/{i:02d}.txt"} for i in range(11)])
        meanwhile: list[object] = []

        def before_count(conn, cursor, statement, *args) -> None:
            if "count(" in statement.lower() and "documents" in statement and meanwhile:
                write = meanwhile.pop()
                with engine.connect() as other:  # another writer, committed
                    other.execute(write)
                    other.commit()

        event.listen(engine, "before_cursor_execute", before_count)
        try:
            meanwhile.append(insert(md.Document).values([
                {"collection_id": coll_id, "key": f"/e/{i:02d}.txt", "source": f"/e/{i:02d}.txt",
                 "status": "indexed", "n_chunks": 1} for i in range(20)]))
            page = facet.documents("c", limit=1000)
            assert (len(page), page.not_shown) == (11, 0)  # (it said 20 more)
            meanwhile.append(delete(md.Document).where(md.Document.key.like("/e/%")))
            page = facet.documents("c", limit=30)
            assert len(page) == 30 and page.not_shown >= 1  # (it said none: 11 + 20 - 30 - 20)
            assert not meanwhile
        finally:
            event.remove(engine, "before_cursor_execute", before_count)
    finally:
        facet.close()


def test_keys_that_differ_only_in_unicode_form_are_listed_apart(tmp_path) -> None:
    """The i18n review of the fifth session of 2026-12-06: a file's name in NFC and the same
    name in NFD (from macOS) are two documents whose lines read alike, '/d/résumé.txt' twice.
    Such keys are written with their non-ASCII characters escaped, and each pastes back into
    `facet delete` as itself; other keys are written as before."""
    import unicodedata

    from app.text import shell_word

    nfc = "/d/" + unicodedata.normalize("NFC", "résumé.txt")
    nfd = "/d/" + unicodedata.normalize("NFD", "résumé.txt")
    other = "/d/" + unicodedata.normalize("NFD", "café.txt")
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"))
    try:
        add_rows(facet, "c", [{"key": key} for key in (nfc, nfd, other)])
    finally:
        facet.close()
    shown = invoke_cli("documents", "c", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert shown.returncode == 0, shown.stderr
    lines = {line.split("  ")[0] for line in shown.stdout.splitlines()}
    assert lines == {"$'/d/r\\u00e9sum\\u00e9.txt'", "$'/d/re\\u0301sume\\u0301.txt'",
                     shell_word(other)}, lines
    assert shell_word(other) == f"'{other}'"  # (as before: it has no twin)
    assert {bash_word(w) for w in lines} == {nfc, nfd, other}
    # A twin whose other form is on another page is told apart too (its second verification:
    # `--limit 1` printed each as '/d/résumé.txt'), and so is the next page's --after.
    first = invoke_cli("documents", "c", "--limit", "1", "--after", "/d/o",
                       env={"FACET_DATA_DIR": str(tmp_path / "data")})
    line, more = first.stdout.splitlines()
    assert line.split("  ")[0] in {"$'/d/r\\u00e9sum\\u00e9.txt'", "$'/d/re\\u0301sume\\u0301.txt'"}
    assert f"--after {line.split('  ')[0]} shows the next ones" in more, more
    # Keys written in both forms, neither NFC nor NFD (its third verification: they were no
    # longer told apart, even on one page).
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"))
    try:
        mixed = ["/m/re\u0301sum\u00e9.txt", "/m/r\u00e9sume\u0301.txt"]
        add_rows(facet, "mix", [{"key": key} for key in mixed])
        assert facet.documents("mix").twins == frozenset(mixed)
    finally:
        facet.close()


def test_a_prefix_finds_keys_in_either_unicode_form(tmp_path) -> None:
    """The i18n review of the fifth session of 2026-12-06: ``--prefix /d/ré`` typed on Linux
    (NFC) listed none of a macOS folder's files, named in NFD (e + U+0301), and the other way
    round. A prefix finds both forms, of a key or of the file a record was read from; other
    keys stay out."""
    import unicodedata

    nfc = "/d/" + unicodedata.normalize("NFC", "résumé.txt")
    nfd = "/d/" + unicodedata.normalize("NFD", "réunion.txt")
    record_file = "/d/" + unicodedata.normalize("NFD", "réponses.csv")
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"))
    try:
        add_rows(facet, "c", [{"key": nfc}, {"key": nfd}, {"key": "/d/rien.txt"},
                              {"key": "q1", "source": record_file}])
        for typed in ("NFC", "NFD"):
            prefix = unicodedata.normalize(typed, "/d/ré")
            page = facet.documents("c", prefix=prefix)
            assert sorted(d.key for d in page) == sorted([nfc, nfd, "q1"]), typed
            assert page.not_shown == 0
            one = facet.documents("c", limit=1, prefix=prefix)
            assert len(one) == 1 and one.not_shown == 2  # the count reads both forms too
        assert [d.key for d in facet.documents("c", prefix="/d/rie")] == ["/d/rien.txt"]
        # A prefix that ends in a base letter whose mark is in the key finds it in NFD only:
        # "/d/re" is how "/d/ré" starts in NFD, not in NFC (compared as text).
        assert {d.key for d in facet.documents("c", prefix="/d/re")} == {nfd, "q1"}
    finally:
        facet.close()
    typed = unicodedata.normalize("NFC", "/d/réu")
    shown = invoke_cli("documents", "c", "--prefix", typed,
                       env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert shown.returncode == 0, shown.stderr
    assert [bash_word(line.split("  ")[0]) for line in shown.stdout.splitlines()] == [nfd]


def bash_word(word: str) -> str:
    """What bash makes of ``word`` (a `$'...'` word included)."""
    import subprocess

    return subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True,
                          check=True).stdout


def test_a_keyset_page_after_a_key_is_not_shifted_by_writes_before_it(tmp_path) -> None:
    """The API review of the fifth session of 2026-12-06: by offset, removing documents of a
    page already read shifted the next page past as many (skipped), and adding some before it
    repeated rows. ``after`` (the last key read) starts the next page where the last ended,
    ``not_shown`` counted past it."""
    from sqlalchemy import delete

    facet = Facet(FacetSettings(data_dir=tmp_path / "data"))
    try:
        add_rows(facet, "c", [{"key": f"/d/{i:02d}.txt"} for i in range(20)])
        first = facet.documents("c", limit=5)
        assert [d.key for d in first] == [f"/d/{i:02d}.txt" for i in range(5)]
        with facet.catalog.ctx.sessions.begin() as session:  # two of the page read are removed
            session.execute(delete(md.Document).where(md.Document.key.in_(["/d/01.txt", "/d/02.txt"])))
        add_rows(facet, "c", [{"key": "/d/03a.txt"}])  # and one is added before the next page
        after = facet.documents("c", limit=5, after=first[-1].key)
        assert [d.key for d in after] == [f"/d/{i:02d}.txt" for i in range(5, 10)]
        assert after.not_shown == 10
        by_offset = facet.documents("c", limit=5, offset=5)  # (what the offset reads: shifted)
        assert by_offset[0].key == "/d/06.txt"
        # Filters and an offset count among the keys after it; past the last key, none.
        assert [d.key for d in facet.documents("c", limit=2, offset=1, after="/d/17.txt")] == \
            ["/d/19.txt"]
        last = facet.documents("c", limit=5, after="/d/19.txt")
        assert (list(last), last.not_shown) == ([], 0)
        with pytest.raises(InvalidRequestError, match="after must be a str") as e:
            facet.documents("c", after=3)  # type: ignore[arg-type]
        assert e.value.param == "after"
    finally:
        facet.close()
    # `facet documents --after KEY`: the page after KEY, the next one's option after its last.
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    page = invoke_cli("documents", "c", "--limit", "2", "--after", "/d/15.txt", env=env)
    assert page.stdout.splitlines() == [
        "/d/16.txt  indexed  1 chunk", "/d/17.txt  indexed  1 chunk",
        "… 2 more documents not shown (--limit 2 --after /d/17.txt shows the next ones; --limit N: "
        "N a page, up to 1000)"], page.stdout
    assert invoke_cli("documents", "c", "--after", "/d/19.txt", env=env).stdout == \
        "no documents after /d/19.txt in collection c\n"


def test_no_error_documents_while_the_newest_job_failed_some_says_where_they_are(minilm,
                                                                                tmp_path) -> None:
    """A record whose id another file's record has fails every run (exit 4), and is no
    document of the collection: `facet documents C --status error` said "no error documents"
    and nothing else (the CLI exploration of the third session of 2026-12-07)."""
    src = tmp_path / "dup"
    src.mkdir()
    (src / "a.jsonl").write_text('{"id": "x1", "text": "apples are red"}\n')
    (src / "b.jsonl").write_text('{"id": "x1", "text": "bananas are yellow"}\n')
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache) as facet:
        report = facet.index(src, "dupc")
    assert (report.docs_indexed, report.docs_failed) == (1, 1)
    listed = invoke_cli("documents", "dupc", "--status", "error",
                        env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (
        "no error documents in collection dupc\n"
        f"  its newest job, {report.job_id}, counted 1 failure that left no document here (such as "
        f"a record whose id another record has): `facet jobs {report.job_id}` lists why\n"), listed.stdout
    plain = invoke_cli("documents", "dupc", "--status", "indexed",
                       env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert "newest job" not in plain.stdout, plain.stdout
