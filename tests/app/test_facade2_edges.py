"""Rough edges of the facade met from Python (a notebook): an empty folder's run said
"completed" with no word that its collection and job were gone; a ``pathlib.Path`` document key
was refused; a closed ``Facet`` was let back into a ``with``. Real minilm, edge store, SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import InvalidRequestError, NotFoundError
from app.services.indexing import IndexOptions

MINILM = IndexOptions(embedder="minilm")


def test_an_empty_folder_s_report_says_its_collection_and_job_are_gone(facet, tmp_path) -> None:
    """``state='completed'``, ``warnings=[]``, and a ``job_id`` that ``job()`` no longer found:
    only the CLI said "nothing to index in ...: collection ... was not created"."""
    empty = tmp_path / "empty"
    empty.mkdir()
    report = facet.index(empty, "empty", MINILM)
    assert report.collection_removed and report.state == "completed" and report.docs_seen == 0
    assert report.message == (f"nothing to index in {empty.resolve()}: collection 'empty' was not "
                              f"created, and job {report.job_id} was removed with it")
    with pytest.raises(NotFoundError):
        facet.job(report.job_id)
    assert report.failure() is None  # nothing failed: a note, not an error


def test_a_run_whose_documents_all_failed_says_so_in_its_message_too(facet, tmp_path) -> None:
    src = tmp_path / "bad"
    src.mkdir()
    (src / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    report = facet.index(src, "bad", MINILM)
    assert report.collection_removed and report.docs_failed == 1
    assert report.message == (f"1 of 1 documents failed, none indexed: collection 'bad' was not "
                              f"created, and job {report.job_id} was removed with it")


def test_a_run_that_indexes_something_has_no_message(facet, tmp_path) -> None:
    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("Card fees rise in May.")
    report = facet.index(src, "notes", MINILM)
    assert not report.collection_removed and report.message is None
    again = facet.index(tmp_path / "notes", "notes", MINILM)  # nothing new: kept, nothing said
    assert not again.collection_removed and again.message is None


def test_a_document_key_may_be_a_path(facet, tmp_path) -> None:
    """``remove_documents("nb", [Path(C) / "card.txt"])`` was refused: "a document key must be
    a str, got PosixPath", though ``index`` takes a Path and a file's key is its path."""
    src = tmp_path / "nb"
    src.mkdir()
    (src / "card.txt").write_text("My card was declined at the shop.")
    (src / "fees.txt").write_text("Card fees rise in May.")
    (src / "refund.txt").write_text("I want my money back for the order.")
    facet.index(src, "nb", MINILM)
    card, fees = (src / "card.txt").resolve(), (src / "fees.txt").resolve()
    assert facet.check_removal("nb", [card]) == [str(card)]
    assert facet.removal_parts("nb", [card, str(fees)]) == [[str(card), str(fees)]]
    removed = facet.remove_documents("nb", [card])
    assert [d.key for d in removed.removed] == [str(card)]
    # Relative to ``base``, as a str key is.
    assert [d.key for d in facet.remove_documents("nb", [Path("fees.txt")],
                                                  base=src.resolve()).removed] == [str(fees)]
    # Skipped keys (``missing_ok``) come back as str.
    again = facet.remove_documents("nb", [card], missing_ok=True)
    assert again.skipped_keys == [str(card)] and again.job_id == 0


def test_any_path_like_key_is_its_fspath(facet, tmp_path) -> None:
    class Where:  # an os.PathLike that is no pathlib.Path
        def __init__(self, path: Path) -> None:
            self.path = path

        def __fspath__(self) -> str:
            return str(self.path)

    src = tmp_path / "nb"
    src.mkdir()
    (src / "card.txt").write_text("My card was declined at the shop.")
    (src / "fees.txt").write_text("Card fees rise in May.")
    facet.index(src, "nb", MINILM)
    card = (src / "card.txt").resolve()
    assert [d.key for d in facet.remove_documents("nb", [Where(card)]).removed] == [str(card)]


@pytest.mark.parametrize("key, shown", [(5, "int 5"), (b"/a/card.txt", "bytes b'/a/card.txt'"),
                                        (None, "NoneType None")])
def test_a_key_that_is_neither_a_str_nor_a_path_is_still_refused(facet, tmp_path, key,
                                                                  shown) -> None:
    src = tmp_path / "nb"
    src.mkdir()
    (src / "card.txt").write_text("My card was declined at the shop.")
    facet.index(src, "nb", MINILM)
    for call in (facet.remove_documents, facet.check_removal, facet.removal_parts):
        with pytest.raises(InvalidRequestError, match="a document key must be a str or a path "
                                                      rf"\(pathlib.Path\), got {shown}") as e:
            call("nb", [key])
        assert e.value.param == "key"


def test_a_bytes_path_key_is_refused_as_such(facet, tmp_path) -> None:
    class BytesPath:
        def __fspath__(self) -> bytes:
            return b"/a/card.txt"

    src = tmp_path / "nb"
    src.mkdir()
    (src / "card.txt").write_text("My card was declined at the shop.")
    facet.index(src, "nb", MINILM)
    with pytest.raises(InvalidRequestError, match="a document key must be a str or a path "
                                                  r"\(pathlib.Path\), got BytesPath"):
        facet.remove_documents("nb", [BytesPath()])


def test_a_closed_facet_refuses_a_with_at_once(facet) -> None:
    """``with`` on a closed facade went in without a word; only its first call failed."""
    facet.close()
    with pytest.raises(InvalidRequestError, match=r"this Facet is closed; open another one"), \
            facet:
        pytest.fail("a closed Facet was entered")
    with pytest.raises(InvalidRequestError, match="this Facet is closed"):
        facet.__enter__()


def test_an_open_facet_still_enters_and_closes_on_leaving(facet) -> None:
    with facet as entered:
        assert entered is facet
        facet.collections()
    with pytest.raises(InvalidRequestError, match="this Facet is closed"):
        facet.collections()
