"""The Cluster tab's CSV exports do not pile up: each was kept in the UI's temp folder for the
server's life (60 clusterings, 60 files), and a server stopped by a signal (its exit hooks never
ran) left the folder and every file behind (the leak review of the seventh session of
2026-12-06). Gradio serves its own copy of each export, so the UI's is removed once old, and a
dead server's folder by the next server. Real handlers over the session's minilm; real
processes for the dead and the running one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import notes_facet

gr = pytest.importorskip("gradio")

TEXTS = "my card never came\nwhere is my card\nI forgot my PIN\nreset my PIN code"


def _aged(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_an_old_export_is_removed_as_the_next_is_written(minilm, tmp_path: Path) -> None:
    from ui.handlers import EXPORT_KEPT_S, NO_EXPLAINER, SOURCE_TEXTS, UiHandlers

    facet = notes_facet(tmp_path, minilm)
    h = UiHandlers(facet, facet.settings)
    try:
        def exported() -> Path:
            *_, csv = h.cluster(SOURCE_TEXTS, None, "", 0, None, None, TEXTS, None, None,
                                "What does the customer want?", 2, "minilm", NO_EXPLAINER)
            return Path(csv)

        first = exported()
        assert first.parent.name.startswith(f"facet-ui-{os.getpid()}-")
        second = exported()
        assert first.exists() and second.exists()  # a recent one is kept (Gradio copies it)
        _aged(first, EXPORT_KEPT_S + 5)
        third = exported()
        assert not first.exists() and second.exists() and third.exists()
        assert sorted(first.parent.iterdir()) == sorted([second, third])
    finally:
        folder = h.export_dir
        h.close()
        facet.close()
    assert not folder.exists()


def test_a_dead_servers_export_folder_is_removed_by_the_next(tmp_path: Path) -> None:
    from ui.handlers import EXPORT_KEPT_S, _remove_dead_exports

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(done.stdout)
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folders = {}
        for name, pid, age in (("dead", dead, EXPORT_KEPT_S + 5), ("dead recently", dead, 1),
                               ("running", running.pid, EXPORT_KEPT_S + 5),
                               ("ours", os.getpid(), EXPORT_KEPT_S + 5)):
            folder = tmp_path / f"facet-ui-{pid}-{name.replace(' ', '')}"
            folder.mkdir()
            (folder / "clusters-1.csv").write_text("index\n")
            _aged(folder, age)
            folders[name] = folder
        other = tmp_path / "facet-ui-notanumber"  # (an older Facet's name: no PID in it)
        other.mkdir()
        _aged(other, EXPORT_KEPT_S + 5)
        # A name of digits int() refuses ("²".isdigit() is true): it raised, and every later
        # export of the UI failed (the final review of the seventh session of 2026-12-06).
        odd = tmp_path / "facet-ui-\u00b2-x"
        odd.mkdir()
        _aged(odd, EXPORT_KEPT_S + 5)
        # A dead PID's name on a link to a folder of exports: the link is not followed.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "clusters-2.csv").write_text("index\n")
        linked = tmp_path / f"facet-ui-{dead}-link"
        linked.symlink_to(elsewhere, target_is_directory=True)
        _aged(elsewhere, EXPORT_KEPT_S + 5)
        # A dead PID's name on a folder holding more than exports: someone's data, left be.
        data = tmp_path / f"facet-ui-{dead}-data"
        data.mkdir()
        (data / "facet.db").write_text("")
        _aged(data, EXPORT_KEPT_S + 5)
        _remove_dead_exports(tmp_path)
    finally:
        running.kill()
        running.wait()
    assert not folders["dead"].exists()
    assert all(folders[n].exists() for n in ("dead recently", "running", "ours")) and other.exists()
    assert (data / "facet.db").exists()
    assert odd.exists() and (elsewhere / "clusters-2.csv").exists() and linked.is_symlink()
