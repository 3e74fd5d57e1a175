"""Uploads into a collection (``app.uploads``, ``Facet.upload``): checked, staged into its
upload folder under their own names, indexed by a job of the folder, the folder put back when
the job is refused, and what an upload job could not index at all removed before the next.
Real minilm, edge store, SQLite; the staging tests (moved from tests/ui when the code moved
to app/) need no model."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app import uploads
from app.errors import DataError, InvalidRequestError, UnavailableError, UnknownModelError


def test_uploads_are_checked_and_staged(tmp_path: Path) -> None:
    ok = tmp_path / "in" / "Notes (final).md"
    ok.parent.mkdir()
    ok.write_text("hello")
    big = tmp_path / "in" / "big.txt"
    big.write_text("x" * 3000)
    exe = tmp_path / "in" / "tool.exe"
    exe.write_bytes(b"MZ")
    checked = uploads.check_uploads([ok, big, exe, tmp_path / "gone.txt"], max_mb=0.002,
                                   suffixes=(".md", ".txt"))
    assert checked.accepted == [ok]
    assert checked.refused == [
        "big.txt is 0.0 MB, over the 0.002 MB upload limit (FACET_UI_MAX_UPLOAD_MB)",
        "tool.exe: .exe files cannot be indexed; upload .md, .txt",
        "gone.txt: the upload is gone from the server; upload it again"]
    staged = uploads.stage_uploads(checked.accepted, tmp_path / "staged")
    copies = staged.copies
    assert [c.name for c in copies] == ["Notes (final).md"] and copies[0].read_text() == "hello"
    # A second upload of the file replaces it; a refused job puts the first version back (a
    # deleted file there would make the next upload job's sync drop its document).
    ok.write_text("hello again")
    again = uploads.stage_uploads([ok], tmp_path / "staged")
    assert copies[0].read_text() == "hello again"
    again.undo()
    assert copies[0].read_text() == "hello" and sorted(p.name for p in (tmp_path / "staged").iterdir()) == [
        "Notes (final).md"]
    uploads.stage_uploads([ok], tmp_path / "staged").keep()
    assert copies[0].read_text() == "hello again"
    # Copied under a hidden name, then renamed: nothing half-copied, nor any version put
    # aside, is left or seen.
    assert [p.name for p in (tmp_path / "staged").iterdir()] == ["Notes (final).md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "staged"]


def test_upload_names_keep_their_script_and_never_collide_silently(tmp_path: Path) -> None:
    """ASCII-only names made "отчёт.txt" the suffix-less file "txt" (skipped: a job of 0
    documents, "completed") and "my notes.txt" / "my_notes.txt" one file (one upload lost)."""
    src = tmp_path / "in"
    src.mkdir()
    names = ["отчёт.txt", "报告.md", "my notes.txt", "my_notes.txt", ".hidden.txt", "a:b?.txt",
             "д" * 125 + ".txt", "..md"]
    paths = []
    for i, name in enumerate(names):
        (src / name).write_text(f"text {i}")
        paths.append(src / name)
    staged = uploads.stage_uploads(paths, tmp_path / "up")
    got = [c.name for c in staged.copies]
    assert got[:6] == ["отчёт.txt", "报告.md", "my notes.txt", "my_notes.txt", "hidden.txt", "a_b_.txt"]
    assert got[6].endswith(".txt") and len(got[6].encode()) <= 200
    assert got[7] == "upload.md"  # was "md": no suffix, skipped and kept for good
    assert [c.read_text() for c in staged.copies] == [f"text {i}" for i in range(len(names))]
    # Two uploads of one name (from two folders) in one go: the second is numbered, and named.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "my notes.txt").write_text("another")
    both = uploads.stage_uploads([src / "my notes.txt", tmp_path / "other" / "my notes.txt"], tmp_path / "up2")
    assert [(c.name, c.read_text()) for c in both.copies] == [("my notes.txt", "text 2"),
                                                              ("my notes (2).txt", "another")]
    assert both.renamed == ["my notes.txt was saved as my notes (2).txt: another file of this upload has "
                            "that name"]
    # The same file twice (the UI's box keeps its files after a refused job, and the user chose
    # it again; Gradio's cache holds each copy under a folder of its own): saved once, and said.
    # It was indexed twice, as "my notes.txt" and "my notes (2).txt".
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "my notes.txt").write_text("text 2")
    twice = uploads.stage_uploads([src / "my notes.txt", tmp_path / "again" / "my notes.txt",
                                   src / "my notes.txt"], tmp_path / "up4")
    assert [(c.name, c.read_text()) for c in twice.copies] == [("my notes.txt", "text 2")]
    assert twice.renamed == ["my notes.txt was given twice, the same file: it is saved once"] * 2
    # Another file whose name the old ASCII-only rule made the same is not replaced: uploading
    # "my notes.md" overwrote a current upload "my_notes.md" (another user's document gone),
    # taken for the old name of "my notes.md".
    old = tmp_path / "up3"
    old.mkdir()
    (old / "my_notes.md").write_text("Alice's notes")
    (src / "my notes.md").write_text("Bob's notes")
    again = uploads.stage_uploads([src / "my notes.md"], old)
    assert [c.name for c in again.copies] == ["my notes.md"]
    assert (old / "my_notes.md").read_text() == "Alice's notes"


def test_uploads_that_cannot_be_indexed_are_not_kept(tmp_path: Path) -> None:
    """A binary .txt or an empty file stayed in the collection's upload folder for good: every
    later upload job listed the same errors again and the collection counted them as failed.
    Only files that cannot be indexed at all go; a bad record leaves its file alone."""
    folder = tmp_path / "uploads" / "notes"
    folder.mkdir(parents=True)
    (folder / "good.txt").write_text("The keeper polishes the lens.")
    (folder / "scan.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)))
    (folder / "empty.txt").write_text("")
    (folder / "broken.json").write_text("{not json")
    (folder / "msgs.jsonl").write_text('{"text": "fine"}\n{oops\n')
    errors = [str(folder / name) for name in ("scan.txt", "empty.txt", "broken.json")] + [
        f"{folder / 'msgs.jsonl'}#L2",  # one bad record: the file's other records are indexed
        str(folder / "good.txt"),       # an error of the server's (a worker), not of the file
        str(tmp_path / "elsewhere.txt"), "a-record-id"]
    gone = uploads.drop_unindexable(folder, errors, max_bytes=2**20)
    assert gone == ["scan.txt", "empty.txt", "broken.json"]
    assert sorted(p.name for p in folder.iterdir()) == ["good.txt", "msgs.jsonl"]
    # Asked again (the bar is polled), the same answer: they are still not kept.
    assert uploads.drop_unindexable(folder, errors, max_bytes=2**20) == gone
    # A file fixed and uploaded again since is kept.
    (folder / "empty.txt").write_text("now with text")
    assert uploads.drop_unindexable(folder, errors, max_bytes=2**20) == ["scan.txt", "broken.json"]
    assert (folder / "empty.txt").exists()
    # Only asked what is gone (the bar polled again): nothing is parsed or removed.
    (folder / "scan.txt").write_bytes(b"\x00\x01")
    assert uploads.drop_unindexable(folder, errors, max_bytes=2**20, remove=False) == ["broken.json"]
    assert (folder / "scan.txt").exists()


def _ended(facet, job_id: int, within_s: float = 90.0):
    deadline = time.monotonic() + within_s
    while (job := facet.job(job_id)).state in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    return job


def _files(folder: Path, **texts: str | bytes) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in texts.items():
        path = folder / name.replace("_dot_", ".")
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        out.append(path)
    return out


def test_an_upload_is_staged_indexed_and_searchable(facet, tmp_path: Path) -> None:
    """What the UI's Index tab did by itself, now the facade's: the API and any caller upload
    the same way."""
    given = _files(tmp_path / "in", lighthouse_dot_txt="The keeper polishes the lighthouse lens.",
                   garden_dot_md="---\ntitle: Garden notes\n---\nTomatoes need sun.",
                   tool_dot_exe=b"MZ")
    result = facet.upload("notes", given)
    assert result.refused == ["tool.exe: .exe files cannot be indexed; upload "
                              + ", ".join(facet.supported_suffixes())]
    assert result.renamed == [] and result.removed == []
    folder = facet.upload_folder("notes").resolve()
    assert result.job.source == str(folder) and result.job.collection == "notes"
    assert _ended(facet, result.job.id).state == "completed"
    assert sorted(p.name for p in folder.iterdir()) == ["garden.md", "lighthouse.txt"]
    assert [d.key for d in facet.documents("notes")] == [str(folder / "garden.md"),
                                                         str(folder / "lighthouse.txt")]
    assert all(p.exists() for p in given)  # the caller's files are left where they are
    # The same name again updates its document, not a second one.
    (tmp_path / "in" / "lighthouse.txt").write_text("The keeper trims the lighthouse wick.")
    again = facet.upload("notes", [tmp_path / "in" / "lighthouse.txt"])
    assert _ended(facet, again.job.id).state == "completed"
    assert facet.collection("notes").documents_indexed == 2
    assert (folder / "lighthouse.txt").read_text() == "The keeper trims the lighthouse wick."


def test_an_upload_refused_whole_or_by_its_job_leaves_the_folder_as_it_was(facet, tmp_path: Path) -> None:
    first = facet.upload("notes", _files(tmp_path / "in", a_dot_txt="version one of a"))
    assert _ended(facet, first.job.id).state == "completed"
    folder = facet.upload_folder("notes")
    with pytest.raises(DataError, match=r"^Nothing to index: b\.exe: \.exe files cannot be indexed"):
        facet.upload("notes", _files(tmp_path / "in2", b_dot_exe=b"MZ"))
    # The job refused (an embedder that does not exist): the replaced file is back.
    changed = _files(tmp_path / "in3", a_dot_txt="version two of a", c_dot_txt="a new file")
    with pytest.raises(UnknownModelError):
        facet.upload("notes", changed, embedder="no-such-model")
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt"]
    assert (folder / "a.txt").read_text() == "version one of a"
    with pytest.raises(InvalidRequestError, match=r"^Upload at least one file"):
        facet.upload("notes", [])
    with pytest.raises(InvalidRequestError, match=r"^files must be a list of paths"):
        facet.upload("notes", str(tmp_path / "in3" / "a.txt"))  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):  # not a collection name: nothing staged anywhere
        facet.upload("../escape", changed)
    assert not (tmp_path / "data" / "escape").exists()
    # Over the limit given (the API's body limit names its own setting).
    with pytest.raises(DataError, match=r"over the 1e-06 MB upload limit \(FACET_API_MAX_BODY_MB\)"):
        facet.upload("notes", changed, max_mb=0.000001, limit="FACET_API_MAX_BODY_MB")


def test_what_an_upload_job_could_not_index_is_removed_before_the_next(facet, tmp_path: Path) -> None:
    """A binary .txt stayed in the upload folder for good, each later upload job listing its
    error again; the UI removed it only while a page watched the job end."""
    first = facet.upload("notes", _files(tmp_path / "in", good_dot_txt="The keeper polishes the lens.",
                                         scan_dot_txt=b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256))))
    job = _ended(facet, first.job.id)
    assert job.docs_indexed == 1 and [e["document"] for e in job.errors if e["kind"] == "error"] == [
        str(facet.upload_folder("notes").resolve() / "scan.txt")]
    assert facet.unindexable_uploads(job.id, remove=False) == []  # only asked: none gone yet
    assert (facet.upload_folder("notes") / "scan.txt").exists()
    second = facet.upload("notes", _files(tmp_path / "in2", more_dot_txt="Tomatoes need sun."))
    assert second.removed == ["scan.txt"]
    assert second.staged == [str(facet.upload_folder("notes").resolve() / "more.txt")]
    assert facet.unindexable_uploads(job.id, remove=False) == ["scan.txt"]
    done = _ended(facet, second.job.id)
    assert done.state == "completed" and not [e for e in done.errors if e["kind"] == "error"]
    assert sorted(p.name for p in facet.upload_folder("notes").iterdir()) == ["good.txt", "more.txt"]


def test_an_upload_whose_every_record_is_another_uploads_is_not_kept(facet, tmp_path: Path) -> None:
    """The UI exploration of the sixth session of 2026-12-05: a csv whose ids were all another
    upload's added nothing, stayed in the upload folder for good, and every later upload job
    refused its records again ("2 of 15 documents failed"), while the documents view had no row
    of it to remove. One that repeats its own id, or adds a record, is kept."""
    first = facet.upload("sheets", _files(tmp_path / "in", a_dot_csv="id,text\n1,ferry times\n2,tide tables\n"))
    assert _ended(facet, first.job.id).docs_indexed == 2
    second = facet.upload("sheets", _files(
        tmp_path / "in2", b_dot_csv="id,text\n1,again one\n2,again two\n",
        c_dot_csv="id,text\n1,one more\n3,a new one\n", d_dot_csv="id,text\n7,seven\n7,seven again\n"))
    job = _ended(facet, second.job.id)
    assert job.docs_indexed == 2 and len([e for e in job.errors if e["kind"] == "error"]) == 4, job.errors
    assert facet.unindexable_uploads(job.id) == ["b.csv"]
    assert facet.unindexable_uploads(job.id, remove=False) == ["b.csv"]  # (a page polling again)
    assert sorted(p.name for p in facet.upload_folder("sheets").iterdir()) == ["a.csv", "c.csv", "d.csv"]
    third = facet.upload("sheets", _files(tmp_path / "in3", e_dot_txt="a note"))
    errors = [e["message"] for e in _ended(facet, third.job.id).errors if e["kind"] == "error"]
    assert len(errors) == 2 and not any("b.csv" in m for m in errors), errors  # c's 1, d's second 7


def test_an_earlier_upload_whose_ids_a_later_one_took_over_is_kept(facet, tmp_path: Path) -> None:
    """The verification round: a later upload whose name sorts first takes the ids over (the
    folder is read in name order: its records replace the indexed ones), and the earlier file,
    all of whose records were then refused, was removed: its content gone for good, where
    removing the later file had brought it back."""
    first = facet.upload("takeover", _files(tmp_path / "in", b_dot_jsonl='{"id": "1", "text": "banana bread"}\n'))
    assert _ended(facet, first.job.id).docs_indexed == 1
    second = facet.upload("takeover", _files(tmp_path / "in2", a_dot_csv="id,text\n1,apple pie\n"))
    job = _ended(facet, second.job.id)
    assert [e["message"][:60] for e in job.errors if e["kind"] == "error"] == [
        f"duplicate document id '1' in {facet.upload_folder('takeover').resolve() / 'b.jsonl'}"[:60]]
    assert facet.unindexable_uploads(job.id) == []
    assert sorted(p.name for p in facet.upload_folder("takeover").iterdir()) == ["a.csv", "b.jsonl"]


def test_a_duplicate_id_between_staged_uploads_says_the_pages_way_out(facet, tmp_path: Path) -> None:
    """The UI review of 2026-12-06: a later upload holding another's id made every later upload
    job report "1 failed", "give each record an id of its own", with no document row to act
    on and files the user cannot edit where they are. The error now says the way out, and it
    works: removing the document drops the later file (its last record), and the next upload
    job indexes the earlier file's record. A folder of the user's keeps the plain advice."""
    first = facet.upload("rev", _files(tmp_path / "in", tickets_dot_csv=(
        "id,text\nt-1,card arrived\nt-2,refund late\nt-3,pin blocked\n")))
    assert _ended(facet, first.job.id).docs_indexed == 3
    second = facet.upload("rev", _files(tmp_path / "in2", dup_dot_jsonl='{"id": "t-2", "text": "a duplicate"}\n'))
    [error] = [e["message"] for e in _ended(facet, second.job.id).errors if e["kind"] == "error"]
    assert error.endswith(
        "only the first occurrence is indexed (every upload job says this again while both files "
        "are staged (they are read in name order, the first keeping the id): remove document "
        "'t-2' (the other file's only record: the file goes with it) and the next upload job "
        "indexes this one, or upload one of the files again with ids of its own)"), error
    removed = facet.remove_documents("rev", ["t-2"])
    assert [d.source_deleted for d in removed.removed] == [True]  # dup.jsonl, its only record
    third = facet.upload("rev", _files(tmp_path / "in3", note_dot_txt="an unrelated note"))
    job = _ended(facet, third.job.id)
    assert job.docs_failed == 0 and not [e for e in job.errors if e["kind"] == "error"], job.errors
    [t2] = [d for d in facet.documents("rev", prefix="t-2")]
    assert t2.source.endswith("tickets.csv") and t2.status == "indexed"
    # The other file holds records of its own: removing the document would not take it away
    # (the next upload job reads it again, first by name): only uploading again is offered
    # (the verification round: "remove document 'r2'" was followed, and nothing changed).
    fourth = facet.upload("rev", _files(tmp_path / "in4", a_dot_csv="id,text\nt-3,a duplicate\nz-9,its own\n"))
    [error] = [e["message"] for e in _ended(facet, fourth.job.id).errors if e["kind"] == "error"]
    assert error.endswith("(they are read in name order, the first keeping the id): upload one of "
                          "the files again with ids of its own)"), error
    # Not an upload folder: the files are the user's to give ids of their own.
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"id": "x", "text": "one"}\n')
    (folder / "b.jsonl").write_text('{"id": "x", "text": "two"}\n')
    report = facet.index(folder, "mine")
    assert next(m for _, m in report.errors).endswith(
        "only the first occurrence is indexed (give each record an id of its own)")


def test_a_link_planted_in_the_upload_folder_is_never_written_through(tmp_path: Path) -> None:
    """Each copy went through the fixed name ``.NAME.part``: a link planted there (anyone who
    could write the folder, which may be a shared mount) had the upload written over the file
    it pointed to; and the versions put aside went to ``uploads/.previous/NAME``, a link there
    taking them out of the data folder."""
    folder = tmp_path / "uploads" / "c"
    folder.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / ".x.md.part").symlink_to(victim)
    (tmp_path / "uploads" / ".previous").mkdir()
    (tmp_path / "uploads" / ".previous" / "c").symlink_to(elsewhere)
    (folder / "x.md").write_text("version one")
    src = tmp_path / "in"
    src.mkdir()
    (src / "x.md").write_text("version two")
    staged = uploads.stage_uploads([src / "x.md"], folder)
    staged.undo()
    assert victim.read_text() == "not yours" and not any(elsewhere.iterdir())
    assert (folder / "x.md").read_text() == "version one" and not (folder / "x.md").is_symlink()
    uploads.stage_uploads([src / "x.md"], folder).keep()
    assert victim.read_text() == "not yours" and not any(elsewhere.iterdir())
    assert (folder / "x.md").read_text() == "version two"
    assert sorted(p.name for p in folder.iterdir()) == [".x.md.part", "x.md"]  # (the plant, left)


def test_a_staging_that_fails_half_way_puts_the_folder_back(tmp_path: Path, monkeypatch) -> None:
    """A full disk on the second of two files left the first staged with no job, and the
    version it replaced orphaned aside."""
    folder = tmp_path / "uploads" / "c"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("a, version one")
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.md").write_text("a, version two")
    (src / "b.md").write_text("b")
    copy = uploads.shutil.copyfileobj
    calls = []

    def full(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return copy(*args, **kwargs)

    monkeypatch.setattr(uploads.shutil, "copyfileobj", full)
    with pytest.raises(OSError, match="No space left"):
        uploads.stage_uploads([src / "a.md", src / "b.md"], folder)
    assert sorted(p.name for p in folder.iterdir()) == ["a.md"]
    assert (folder / "a.md").read_text() == "a, version one"
    assert sorted(p.name for p in (tmp_path / "uploads").iterdir()) == ["c"]  # nothing aside left


def test_a_staging_killed_as_it_replaces_a_file_leaves_the_file_in_the_folder(tmp_path: Path) -> None:
    """The kill exploration of the third session of 2026-12-02: replacing a file moved the old
    one out of the folder, then renamed the new copy in; a process killed in between (a server
    OOM-killed mid-upload) left the folder without the file, and the next upload job's sync
    removed its document. A real process, really killed (SIGKILL) right after the old version
    was put aside."""
    import signal

    folder = tmp_path / "uploads" / "c"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text("old")
    new = tmp_path / "in" / "a.txt"
    new.parent.mkdir()
    new.write_text("new")
    code = ("import os, signal\nfrom pathlib import Path\nfrom app import uploads\n"
            "real = uploads.Staged.put_aside\n"
            "def aside(self, target):\n    real(self, target)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
            "uploads.Staged.put_aside = aside\n"
            f"uploads.stage_uploads([Path({str(new)!r})], Path({str(folder)!r}))\n")
    done = _killed_python(code)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (folder / "a.txt").read_text() == "old"  # (the old code: no such file)


def test_uploads_at_once_into_one_collection_all_arrive_whole(facet, tmp_path: Path) -> None:
    """Eight at once, each with the same name and files of its own, all arrive whole: twelve
    sent to a server gave four 500s (one's ``.same.md.part`` renamed away by another), which
    left what they had staged."""
    errors: list[BaseException] = []
    results = []

    def one(i: int) -> None:
        try:
            given = _files(tmp_path / f"in{i}", same_dot_md=f"version {i} of the shared note",
                           **{f"own{i}_dot_md": f"the note only upload {i} has"})
            results.append(facet.upload("busy", given))
        except BaseException as e:  # (collected, asserted below)
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [] and len(results) == 8
    for r in results:
        _ended(facet, r.job.id)
    folder = facet.upload_folder("busy")
    assert sorted(p.name for p in folder.iterdir()) == sorted(["same.md", *(f"own{i}.md" for i in range(8))])
    assert (folder / "same.md").read_text() in {f"version {i} of the shared note" for i in range(8)}
    assert [p.name for p in folder.parent.iterdir() if p.name != ".staged"] == ["busy"]  # none aside


def test_an_upload_refused_for_room_writes_nothing(facet, tmp_path: Path) -> None:
    """The disk-space guard (FACET_MIN_FREE_MB) was the job's: each file was copied into the
    upload folder first, then put back."""
    facet.indexing.settings.min_free_mb = 10**9
    with pytest.raises(UnavailableError):
        facet.upload("roomless", _files(tmp_path / "in", a_dot_md="text"))
    assert not facet.upload_folder("roomless").exists()


def test_a_fixed_file_uploaded_again_is_not_reported_removed(facet, tmp_path: Path) -> None:
    """A binary bin.txt failed; its fixed version uploaded next was reported in ``removed``,
    though it is kept and indexed."""
    first = facet.upload("fix", _files(tmp_path / "in", bin_dot_txt=b"\x00\x01\x02" * 50))
    assert _ended(facet, first.job.id).docs_failed == 1
    fixed = facet.upload("fix", _files(tmp_path / "in2", bin_dot_txt="now it is text"))
    assert fixed.removed == []
    assert _ended(facet, fixed.job.id).docs_indexed == 1
    assert (facet.upload_folder("fix") / "bin.txt").read_text() == "now it is text"


def test_a_callers_limit_is_named_and_a_refused_upload_leaves_no_folder(facet, tmp_path: Path) -> None:
    """``max_mb=1`` was refused naming FACET_UI_MAX_UPLOAD_MB, a setting the caller never set;
    an unknown embedder left an empty upload folder for a collection never made."""
    with pytest.raises(DataError, match=r"over the 1e-06 MB upload limit \(max_mb\)"):
        facet.upload("limits", _files(tmp_path / "in", a_dot_md="some text"), max_mb=0.000001)
    with pytest.raises(UnknownModelError):
        facet.upload("limits", _files(tmp_path / "in", a_dot_md="some text"), embedder="nope")
    assert not facet.upload_folder("limits").exists()


class _Held:
    """A runner that keeps every job queued (never runs one), as with no worker running."""

    def submit(self, job) -> None:
        pass

    def close(self) -> None:
        pass


def test_an_upload_cancelled_before_its_job_started_is_taken_back(facet, tmp_path: Path) -> None:
    """Its files stayed in the collection's uploads, and the next upload's job (which indexes
    the whole folder) indexed them: a file sent by mistake and cancelled was searchable."""
    done = facet.upload("c", _files(tmp_path / "in0", keep_dot_txt="the note that stays",
                                    again_dot_txt="first version"))
    _ended(facet, done.job.id)
    runner = facet.job_runner
    facet.job_runner = _Held()
    wrong = facet.upload("c", _files(tmp_path / "in1", wrong_dot_txt="sent by mistake",
                                     again_dot_txt="second version"))
    cancelled = facet.cancel_job(wrong.job.id)
    assert cancelled.state == "cancelled"
    assert cancelled.message == ("cancelled before it started; the files it uploaded were taken "
                                 "back: wrong.txt")
    folder = facet.upload_folder("c")
    # A name it replaced stays as uploaded (its earlier version is gone): said by no note.
    assert sorted(p.name for p in folder.iterdir()) == ["again.txt", "keep.txt"]
    facet.job_runner = runner
    later = facet.upload("c", _files(tmp_path / "in2", fox_dot_txt="an unrelated fox"))
    assert _ended(facet, later.job.id).state == "completed"
    keys = [d.key for d in facet.documents("c")]
    assert str(folder.resolve() / "wrong.txt") not in keys
    assert sorted(Path(k).name for k in keys) == ["again.txt", "fox.txt", "keep.txt"]
    # The notes of earlier jobs are gone; the last one's, until the next upload.
    assert [p.name for p in (folder.parent / ".staged").iterdir()] == [f"{later.job.id}.json"]


def test_a_file_of_a_type_the_indexer_skips_is_not_kept(tmp_path: Path) -> None:
    """A file of a type the indexer does not read (the suffix-less ``txt`` the ASCII-only names
    of before 2026-11-28 made of "отчёт.txt") stayed for good: each upload job only warned
    "skipped, unsupported type '(none)'", no document was made, and the clean-up looked only at
    errors. Uploads of such types are refused on arrival, so each is a leftover: removed and
    named. Hidden names (a copy on its way in) and folders are left alone."""
    folder = tmp_path / "uploads" / "notes"
    folder.mkdir(parents=True)
    (folder / "good.txt").write_text("The keeper polishes the lens.")
    (folder / "txt").write_text("отчёт, saved under the old rule")
    (folder / "tool.exe").write_bytes(b"MZ")
    (folder / ".good.txt.1a2b3c4d.part").write_text("a copy on its way in")
    (folder / ".hidden").write_text("hidden")
    (folder / "sub").mkdir()
    (folder / "link").symlink_to(folder / "good.txt")
    (folder / "empty.txt").write_text("")
    # Only asked what is gone (the bar polled again): nothing is removed.
    assert uploads.drop_unindexable(folder, [], max_bytes=2**20, remove=False) == []
    assert (folder / "txt").exists()
    gone = uploads.drop_unindexable(folder, [str(folder / "empty.txt")], max_bytes=2**20)
    assert gone == ["empty.txt", "tool.exe", "txt"]
    assert sorted(p.name for p in folder.iterdir()) == [
        ".good.txt.1a2b3c4d.part", ".hidden", "good.txt", "link", "sub"]


def test_an_upload_removes_a_leftover_the_indexer_skips(facet, tmp_path: Path) -> None:
    """The upgrade's leftover ``txt`` in the uploads: the next upload removes it and says so in
    ``removed``, and its job no longer warns of it."""
    folder = facet.upload_folder("notes")
    first = facet.upload("notes", _files(tmp_path / "in", good_dot_txt="The keeper polishes the lens."))
    (folder / "txt").write_text("отчёт, saved under the old rule")  # (as an upgrade found it)
    assert _ended(facet, first.job.id).state == "completed"
    second = facet.upload("notes", _files(tmp_path / "in2", more_dot_txt="Tomatoes need sun."))
    assert second.removed == ["txt"]
    done = _ended(facet, second.job.id)
    assert done.state == "completed" and done.errors == []
    assert sorted(p.name for p in folder.iterdir()) == ["good.txt", "more.txt"]


def test_removing_a_collections_uploads_removes_its_staging_leftovers(tmp_path: Path) -> None:
    """Deleting a collection removed its upload folder only: the versions an upload put aside
    (``.previous-NAME-XXXXXXXX``, left by a crash) and an older Facet's ``.previous/NAME``
    stayed for good. Only that collection's go, not those of a name it is a prefix of."""
    root = tmp_path / "uploads"
    for path in ("a/x.txt", ".previous/a/x.txt", ".previous/ab/x.txt", ".previous-a-k3j4h5g6/x.txt",
                 ".previous-a-q_9zzz00/x.txt", ".previous-ab-k3j4h5g6/x.txt",
                 ".previous-a-b-k3j4h5g6/x.txt", "a-b/x.txt", "ab/x.txt", ".staged/1.json"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x")
    staged = uploads.Staged([], {})
    staged.put_aside(root / "a" / "x.txt")  # a real aside folder, as a crash leaves it
    assert staged.aside is not None and staged.aside.parent == root
    uploads.remove_collection_uploads(root / "a")
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        ".previous-a-b-k3j4h5g6/x.txt", ".previous-ab-k3j4h5g6/x.txt", ".previous/ab/x.txt",
        ".staged/1.json", "a-b/x.txt", "ab/x.txt"]
    # The older Facet's folder goes once no collection's is left in it.
    uploads.remove_collection_uploads(root / "ab")
    assert not (root / ".previous").exists() and not (root / "ab").exists()
    assert (root / ".previous-a-b-k3j4h5g6").exists() and (root / "a-b").exists()
    uploads.remove_collection_uploads(root / "gone")  # nothing there: no error


def test_deleting_a_collection_removes_its_staging_leftovers(facet, tmp_path: Path) -> None:
    """``Facet.delete_collection`` (`facet delete`, DELETE /collections/{name}, the UI) removed
    the upload folder only: an older Facet's ``uploads/.previous/NAME`` and a crash's aside
    folder stayed for good. Another collection's leftovers stay."""
    result = facet.upload("tides", _files(tmp_path / "in", moon_dot_txt="The moon pulls the sea."))
    assert _ended(facet, result.job.id).state == "completed"
    uploads_root = facet.upload_folder("tides").parent
    for leftover in (".previous/tides/moon.txt", ".previous-tides-k3j4h5g6/moon.txt",
                     ".previous/tidesx/moon.txt", ".previous-tidesx-k3j4h5g6/moon.txt"):
        (uploads_root / leftover).parent.mkdir(parents=True, exist_ok=True)
        (uploads_root / leftover).write_text("old")
    facet.delete_collection("tides")
    assert sorted(p.relative_to(uploads_root).as_posix() for p in uploads_root.rglob("*")
                  if p.is_file() and not p.name.endswith(".json")) == [
        ".previous-tidesx-k3j4h5g6/moon.txt", ".previous/tidesx/moon.txt"]


def test_a_deleted_collections_leftover_uploads_do_not_come_back(facet, tmp_path: Path, monkeypatch) -> None:
    """The kill exploration of the third session of 2026-12-02: `facet delete NAME` commits,
    then removes the collection's upload folder; killed in between, the folder stayed (no rerun
    could clean it: the collection was unknown), and the next upload of one file made the
    collection again with every deleted document in it (51, in the exploration). The kill is
    stood in for by skipping the folder's removal (``remove_collection_uploads``) in the delete."""
    import app.core

    result = facet.upload("tides", _files(tmp_path / "in", moon_dot_txt="The moon pulls the sea.",
                                          sun_dot_txt="The sun warms the sea."))
    assert _ended(facet, result.job.id).state == "completed"
    monkeypatch.setattr(app.core, "remove_collection_uploads", lambda folder: None)
    facet.delete_collection("tides")
    monkeypatch.undo()
    assert sorted(p.name for p in facet.upload_folder("tides").iterdir()) == ["moon.txt", "sun.txt"]
    again = facet.upload("tides", _files(tmp_path / "again", wind_dot_txt="The wind moves the sea."))
    assert _ended(facet, again.job.id).state == "completed"
    keys = [Path(d.key).name for d in facet.documents("tides")]
    assert keys == ["wind.txt"], keys  # (the old code: moon.txt, sun.txt and wind.txt)


def test_an_erased_upload_killed_after_its_removal_does_not_come_back(facet, tmp_path: Path) -> None:
    """The kill exploration of the third session of 2026-12-02: removing an uploaded document
    committed the removal, then deleted the staged file; a process killed in between left the
    file in the collection's upload folder (a rerun said the key was gone already), and the next
    upload job, which indexes that folder whole, brought the erased document back. The file now
    goes before the commit. A real `facet delete -d` process, killed by SIGKILL right after the
    commit (where the next step, ``_mark_completed_removals``, starts)."""
    import signal

    from tests.app.cli_runner import invoke_cli

    result = facet.upload("tides", _files(tmp_path / "in", moon_dot_txt="The moon pulls the sea.",
                                          sun_dot_txt="The sun warms the sea."))
    assert _ended(facet, result.job.id).state == "completed"
    moon = next(p for p in result.staged if p.endswith("moon.txt"))
    data = facet.settings.data_dir
    facet.close()  # (the embedded store: one process at a time)
    code = ("import os, signal, sys\nfrom app.services.indexing import IndexService\n"
            "def killed(*args, **kwargs):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
            "IndexService._mark_completed_removals = killed\n"
            "from app.cli import main\n"
            f"sys.argv = ['facet', 'delete', 'tides', '-d', {moon!r}, '-y']\nmain()\n")
    done = _killed_python(code, FACET_DATA_DIR=str(data))
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not Path(moon).exists()  # (the old code: still in the upload folder)
    listed = invoke_cli("documents", "tides", env={"FACET_DATA_DIR": str(data)})
    assert "moon.txt" not in listed.stdout and "sun.txt" in listed.stdout, listed.stdout


def _killed_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a new Python in the repository's root (``env`` added to the
    environment), which kills itself where the test patched it to: its ``CompletedProcess``."""
    return subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=180, env={**os.environ, **env})
