"""A data folder's disk running out of room (the disk-full exploration): an index job stops
cleanly before a batch, resumable, rather than writing past a full disk (the embedded store's
memory-mapped files killed a `facet serve` with a bus error), and a full disk is said as one.
Real minilm, SQLite and edge store; the disk's free space is the real one, the threshold set
above it (``FACET_MIN_FREE_MB``); the small-disk test mounts a real tmpfs where it may."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.errors import UnavailableError
from app.services.collections import CollectionService
from app.services.indexing import IndexService

from .conftest import ROOT, write_corpus


def test_a_job_stops_before_writing_when_the_disk_has_too_little_room(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 3)
    free_mb = shutil.disk_usage(tmp_path).free / 2**20
    ctx = make_ctx(min_free_mb=free_mb * 4)  # more than this disk has
    with pytest.raises(UnavailableError, match=r"^refused before writing anything: the disk of the data folder "
                                               r".* MiB free, under FACET_MIN_FREE_MB"):
        IndexService(ctx).index(tmp_path / "src", "room")
    # Refused before it started: no collection of its own is left (the resume hint a kept
    # job's row gets: test_refused_jobs).
    assert "room" not in [c.name for c in CollectionService(ctx).list_all()]
    assert not ctx.store.collection_exists("room")  # nothing mapped on a full disk
    roomy = make_ctx(min_free_mb=0)  # 0: never checked
    report = IndexService(roomy).index(tmp_path / "src", "room")
    assert report.state == "completed" and report.docs_indexed == 3


def test_a_job_the_guard_stops_says_what_is_kept_and_how_to_resume(make_ctx, tmp_path,
                                                                    monkeypatch) -> None:
    """The disk-full exploration of the third session of 2026-12-02: a job stopped between
    batches by FACET_MIN_FREE_MB said only "stopped before writing more: ...; free some space
    there", as if the run were lost; its job row (`facet jobs`) had the resume command and
    "what was indexed is kept", which the command itself now says too. The disk's free space
    reads low from the second batch on (``shutil.disk_usage``, as the guard reads it)."""
    from app.services.indexing import IndexOptions

    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx(min_free_mb=1)
    real = shutil.disk_usage

    def progress(p) -> None:  # type: ignore[no-untyped-def]
        if p.stage is None and p.docs_done >= 1:  # after the first batch went in
            monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=2**19))

    with pytest.raises(UnavailableError) as stopped:
        IndexService(ctx).index(tmp_path / "src", "room", IndexOptions(batch_chunks=1),
                                progress=progress)
    said = str(stopped.value)
    assert said.startswith(f"stopped before writing more: the disk of the data folder {tmp_path / 'data'} "
                           "has 0.5 MiB free, under FACET_MIN_FREE_MB (1); free some space there"), said
    assert said.endswith(f"; run `facet index {tmp_path / 'src'} --collection room --embedder minilm` "
                         "again once it is back to resume: what was indexed is kept"), said
    [job] = CollectionService(ctx).jobs("room")
    assert job.state == "failed" and job.docs_indexed == 1, (job.state, job.docs_indexed)


def test_a_full_data_disk_is_said_as_one(tmp_path) -> None:
    """Every command on a full data disk said "cannot open the metadata database ...: disk I/O
    error" (SQLite's words for a WAL it could not extend), exit 1. A real 3 MiB tmpfs, filled."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(small)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root, or no such permission in this container)")
    try:
        env = {"FACET_DATA_DIR": str(small / "data"), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        facet = [sys.executable, "-c", "from app.cli import main; main()"]
        made = subprocess.run([*facet, "collections"], env=env, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr  # the database made while there is room
        subprocess.run(["dd", "if=/dev/zero", f"of={small / 'filler'}", "bs=1k"], capture_output=True)
        for args in (["collections"], ["jobs"]):
            done = subprocess.run([*facet, *args], env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 7, (args, done.stderr)
            assert done.stderr.strip().startswith(f"error: the disk of the data folder {small / 'data'} is "
                                                  "full ("), done.stderr
        # An evaluation whose embedding cache (in the data folder) cannot be written goes on
        # uncached: it died after the encoding with a traceback.
        pairs = tmp_path / "pairs.csv"
        pairs.write_text("a man plays a guitar,a man plays guitar,5\na dog runs,a puppy runs,4\n"
                         "stocks fell,someone cooks pasta,0\n")
        done = subprocess.run([*facet, "eval", "minilm", "--task", f"sts:{pairs}", "--baselines", "",
                               "--out", str(tmp_path / "ev"), "--no-progress"], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "the embedding cache cannot be written" in done.stderr
        assert (tmp_path / "ev" / "results.json").is_file()
        # An output file on the full disk keeps its earlier content (it was cut short in place).
        earlier = small / "clusters.json"
        subprocess.run(["rm", "-f", str(small / "filler")])
        earlier.write_text('{"earlier": true}')
        subprocess.run(["dd", "if=/dev/zero", f"of={small / 'filler'}", "bs=1k"], capture_output=True)
        texts = tmp_path / "texts.txt"
        texts.write_text("\n".join(["card declined", "card blocked", "top up failed", "top up pending",
                                    "refund late", "refund missing"] * 40))
        roomy = {**env, "FACET_DATA_DIR": str(tmp_path / "roomy")}
        done = subprocess.run([*facet, "cluster", str(texts), "--instruction", "topic", "--k", "3",
                               "--embedder", "minilm", "--explain", "", "-o", str(earlier)], env=roomy,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 4 and "cannot write it" in done.stderr, done.stderr
        assert earlier.read_text() == '{"earlier": true}'
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def test_an_out_file_that_is_a_link_or_a_device_is_written_into(tmp_path) -> None:
    """The verification round: the rename that keeps an earlier --out whole on a full disk
    replaced a symlink with a regular file (its target left as it was), and a device or a hard
    link likewise (`-o /dev/null` as root would have replaced /dev/null). Those are written
    into, as before; a plain file of one's own is replaced whole."""
    import os

    from app.commands.common import write_out_file

    target = tmp_path / "real.json"
    target.write_text("target")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_out_file(link, '{"new": 1}')
    assert link.is_symlink() and target.read_text() == '{"new": 1}'
    devnull = tmp_path / "null"
    devnull.symlink_to(os.devnull)
    write_out_file(devnull, '{"new": 1}')
    assert devnull.is_symlink() and Path(os.devnull).is_char_device()
    twin = tmp_path / "twin.json"
    os.link(target, twin)
    write_out_file(twin, '{"newer": 2}')
    assert target.read_text() == twin.read_text() == '{"newer": 2}'
    plain = tmp_path / "plain.json"
    plain.write_text("old")
    plain.chmod(0o600)
    write_out_file(plain, "new")
    assert plain.read_text() == "new" and plain.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "null", "plain.json", "real.json",
                                                          "twin.json"]  # no temporary file left


def test_a_full_disk_under_a_database_elsewhere_is_named_as_its_own(tmp_path, monkeypatch) -> None:
    """The disk-full exploration of the third session of 2026-12-02: with FACET_DATABASE_URL
    putting the SQLite file on another disk, a full one was said as the data folder's ("free
    some space in the data folder (FACET_DATA_DIR)", which had 70 GB free) mid-run, and at open
    as "disk I/O error; check FACET_DATABASE_URL", a wrong URL's words. Only the database's disk
    reads full here (``shutil.disk_usage``, as the check reads it); SQLite's own errors are the
    ones it raised on the real full disk."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from app.errors import as_domain_error
    from app.services.context import database_error
    from app.settings import FacetSettings, get_settings

    (tmp_path / "db").mkdir()
    (tmp_path / "data").mkdir()
    url = f"sqlite:///{tmp_path / 'db' / 'facet.db'}"
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(
        free=0 if Path(path) == tmp_path / "db" else real(path).free))
    said = (f"the disk of the metadata database {tmp_path / 'db' / 'facet.db'} is full (0 bytes free): "
            "free some space there (or point FACET_DATABASE_URL at a disk with room) and try again; "
            "nothing was lost")
    opened = database_error(FacetSettings(data_dir=tmp_path / "data", database_url=url),
                            OperationalError("PRAGMA journal_mode", {}, sqlite3.OperationalError("disk I/O error")))
    assert isinstance(opened, UnavailableError) and str(opened) == said, opened
    monkeypatch.setenv("FACET_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FACET_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        mid_run = as_domain_error(OperationalError("INSERT", {}, sqlite3.OperationalError(
            "database or disk is full")))
    finally:
        get_settings.cache_clear()
    assert isinstance(mid_run, UnavailableError) and str(mid_run) == said, mid_run
    # The data folder's own disk is said as before when the database is in it.
    monkeypatch.delenv("FACET_DATABASE_URL")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=0))
    inside = database_error(FacetSettings(data_dir=tmp_path / "data"), OperationalError(
        "PRAGMA journal_mode", {}, sqlite3.OperationalError("disk I/O error")))
    assert str(inside).startswith(f"the disk of the data folder {tmp_path / 'data'} is full (0 bytes free)"), inside
