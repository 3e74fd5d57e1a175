"""`facet delete C --document KEY` follow-ups: it asked before checking anything (an unknown
collection or key was refused after a "y"); beside a `facet serve` holding the collection it
named a request built from the raw keys (relative paths, which the API does not read: 404) and
only the first 3; the "still there" warning said "delete it from there first" after the
removal; a collection never written was deleted as "? points"; `facet --help` cut the delete
command's summary mid-sentence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

from sqlalchemy.orm import sessionmaker

from indexer import metadata as md
from tests.app.cli_runner import invoke_cli

ROOT = Path(__file__).resolve().parents[2]


def _indexed(tmp_path: Path, n: int = 2) -> tuple[dict[str, str], list[Path]]:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    files = []
    for i in range(n):
        path = inbox / f"note {i}+x.txt"
        path.write_text(f"Note {i}: the train to the coast was late again, sorry.")
        files.append(path)
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_CHUNK_TOKENS": "64"}
    done = invoke_cli("index", str(inbox), "-c", "ten", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    return env, files


def test_an_unknown_collection_or_key_is_refused_before_asking(tmp_path) -> None:
    env, files = _indexed(tmp_path)

    unknown_key = invoke_cli("delete", "ten", "-d", str(files[0]), "-d", "nope.txt", env=env, input="y\n")
    unknown_coll = invoke_cli("delete", "nine", "-d", str(files[0]), env=env, input="y\n")

    assert unknown_key.returncode == 3 and "no document 'nope.txt'" in unknown_key.stderr
    assert unknown_coll.returncode == 3 and "unknown collection 'nine'" in unknown_coll.stderr
    assert "[y/N]" not in unknown_key.stderr + unknown_coll.stderr


def test_the_prompt_names_the_resolved_keys_and_the_warning_says_to_delete_the_file_too(
        tmp_path, monkeypatch) -> None:
    env, files = _indexed(tmp_path)
    monkeypatch.chdir(tmp_path)

    done = invoke_cli("delete", "ten", "-d", f"inbox/{files[0].name}", env=env, input="y\n")

    assert done.returncode == 0, done.stderr
    assert f"remove 1 document from 'ten' ({files[0]})? [y/N]" in done.stderr
    assert (f"warning: {files[0]} is still there: delete it (or the record) from there too, or the "
            "next `facet index`") in done.stderr
    assert "from there first" not in done.stderr


def test_beside_a_server_the_request_named_has_every_key_resolved_and_encoded(tmp_path, monkeypatch) -> None:
    env, files = _indexed(tmp_path, 5)
    monkeypatch.chdir(tmp_path)
    # A process that calls itself `facet serve` holding the collection's store open.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; sys.argv = ['facet', 'serve']\n"
         "from app.services.context import ServiceContext\nfrom app.settings import FacetSettings\n"
         f"ctx = ServiceContext(FacetSettings(data_dir={str(tmp_path / 'data')!r}))\n"
         "ctx.store.hold('ten'); print('ready', flush=True); time.sleep(60)"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        done = invoke_cli("delete", "ten", *[a for f in files for a in ("-d", f"inbox/{f.name}")], "-y",
                          env=env)
    finally:
        holder.kill()
        holder.wait()

    assert done.returncode == 5, done.stderr
    said = " ".join(done.stderr.split())
    query = "&".join(f"key={quote(str(f), safe='')}" for f in files[:3])
    assert f"`DELETE /collections/ten/documents?{query}` … and 2 more keys" in said, said
    assert "key=inbox" not in said  # (the API reads no relative path: 404)


def test_a_collection_never_written_is_deleted_with_no_points(tmp_path) -> None:
    env, _ = _indexed(tmp_path)
    engine = md.make_engine(f"sqlite:///{tmp_path / 'data' / 'facet.db'}")
    with sessionmaker(engine)() as s:
        coll = md.create_collection(s, "c6", backend="edge", chunk_size=64, chunk_overlap=8,
                                    tokenizer="minilm")
        s.add(md.IndexJob(collection_id=coll.id, source="/srv/texts", embedder="minilm",
                          state="cancelled", runner="thread"))
        s.commit()
    engine.dispose()

    done = invoke_cli("delete", "c6", "-y", env=env)

    assert done.returncode == 0, done.stderr
    assert "deleted c6: 0 documents, no points" in done.stdout, done.stdout


def test_the_help_summary_of_delete_fits_one_line(tmp_path) -> None:
    done = invoke_cli("--help", env={"COLUMNS": "100"})
    [line] = [ln for ln in done.stdout.splitlines() if " delete " in ln]
    assert "Delete a collection, or only its --document KEYs." in line, line
