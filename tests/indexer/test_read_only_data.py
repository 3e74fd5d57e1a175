"""An embedded store whose folder cannot be written: a read-only mount under a running server.

An operator bind-mounted the data folder read-only under a running `facet serve`: each search
was a 500 "internal error (OSError)", the log's traceback ending in "[Errno 30] Read-only file
system: '.../qdrant-edge/small.lock'" (a read takes the collection's lock file too). Opening
the lock, and the side files a search writes, now raise ``StoreUnavailableError`` naming the
folder and what to do (the API's 503, the CLI's exit code 7). The mount is real where a private
mount namespace can be made (root and ``unshare``); the lock file's open failing for another
reason (a folder in its place) is checked everywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from indexer.errors import StoreUnavailableError
from indexer.store import EdgeStore, PointRecord, point_id
from tests.readonly import run_beside_read_only_mount

ROOT = Path(__file__).resolve().parents[2]
DIM = 4


def _fill(store: EdgeStore, name: str) -> None:
    store.ensure_collection(name, {"m": DIM})
    vectors = np.eye(DIM, dtype=np.float32)
    store.upsert(
        name,
        [
            PointRecord(
                point_id(f"d{i}", 0),
                {"m": vectors[i]},
                {"doc_id": f"d{i}", "chunk_no": 0, "text": f"t{i}", "lang": "en"},
            )
            for i in range(DIM)
        ],
    )
    store.release(name)  # written and closed: the next read opens it, taking its lock again


# Run in a private mount namespace (``unshare -m``): the store's root is bind-mounted read-only
# over itself after the store has opened one collection and before it opens the other, as the
# operator's mount came under a running server. Prints what each step raised.
_UNDER_A_READ_ONLY_MOUNT = r"""
import subprocess, sys
import numpy as np
from indexer.store import EdgeStore

root = sys.argv[1]
store = EdgeStore(root)
store.search("open", "m", np.ones(4, np.float32), limit=1)  # its shard opened before the mount
mount = f"mount --bind {root} {root} && mount -o remount,bind,ro {root}"
subprocess.run(["sh", "-c", mount], check=True)

def said(step):
    try:
        step()
        return "ok"
    except Exception as e:
        return f"{type(e).__name__}: {e}"

print(said(lambda: store.search("closed", "m", np.ones(4, np.float32), limit=1)))
print(said(lambda: store.check_free("closed")))
print(said(lambda: store.search("open", "m", np.ones(4, np.float32), limit=1,
                                filters={"lang": "en"})))  # a first filter: its payload index
print(said(lambda: store.search("open", "m", np.ones(4, np.float32), limit=1,
                                filters={"lang": "en"})))  # the same again: said again
print(said(lambda: store.check_ready()))
"""


def test_a_read_only_mount_under_a_running_store_is_unavailable_naming_the_folder(tmp_path) -> None:
    root = tmp_path / "qdrant-edge"
    store = EdgeStore(root)
    _fill(store, "open")
    _fill(store, "closed")
    store.close()
    done = run_beside_read_only_mount(root, _UNDER_A_READ_ONLY_MOUNT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    advice = (
        f"the vector store's folder {root} is on a read-only file system, and Facet writes "
        "there (a lock file) even to read a collection; mount it read-write, or point "
        "FACET_DATA_DIR at a writable copy of the data folder"
    )
    # A collection not open yet: its lock file cannot be opened (it was an OSError, a 500).
    locked = f"StoreUnavailableError: cannot write {root}/closed.lock: Read-only file system; "
    assert lines[0] == locked + advice, done.stdout
    assert lines[1] == locked + advice  # the check before a search loads its model
    # One open before the mount searches, but a search's first filter on a field writes which
    # fields are indexed beside the shard (it was an OSError too): said, and said again.
    side = (
        f"StoreUnavailableError: cannot write {root}/open/facet_payload_indexes.json: "
        f"Read-only file system; the vector store's folder {root}/open is on a read-only "
        "file system"
    )
    assert lines[2].startswith(side), done.stdout
    assert lines[3].startswith(side), done.stdout
    assert lines[4] == (f"StoreUnavailableError: cannot write {root}: Read-only file system; " + advice)


def test_a_lock_file_that_cannot_be_opened_is_unavailable_not_an_os_error(tmp_path) -> None:
    """Any user: a folder where the lock file should be makes its open fail (IsADirectoryError),
    as the read-only mount's EROFS did; the search says which file and folder, in one line."""
    root = tmp_path / "qdrant-edge"
    store = EdgeStore(root)
    try:
        _fill(store, "notes")
        (root / "notes.lock").unlink()
        (root / "notes.lock").mkdir()
        with pytest.raises(StoreUnavailableError) as raised:
            store.search("notes", "m", np.ones(DIM, np.float32), limit=1)
        assert str(raised.value) == (
            f"cannot write {root}/notes.lock: Is a directory; check the vector store's folder {root} (FACET_DATA_DIR)"
        )
        with pytest.raises(StoreUnavailableError, match=r"notes\.lock: Is a directory"):
            store.check_free("notes")
    finally:
        store.close()


def test_a_folder_this_user_cannot_write_is_unavailable(tmp_path) -> None:
    """Without root's permission overrides (capsh drops them where the tests run as root): a
    store folder of mode 555 refuses the lock file's creation (EACCES)."""
    root = tmp_path / "qdrant-edge"
    store = EdgeStore(root)
    _fill(store, "notes")
    store.close()
    (root / "notes.lock").unlink()
    script = (
        "import numpy as np\nfrom indexer.store import EdgeStore\n"
        f"store = EdgeStore({str(root)!r})\n"
        "for step in (lambda: store.search('notes', 'm', np.ones(4, np.float32), limit=1), "
        "lambda: store.check_ready()):\n"
        "    try:\n        step()\n        print('ok')\n"
        "    except Exception as e:\n        print(f'{type(e).__name__}: {e}')\n"
    )
    if os.geteuid() == 0:
        if shutil.which("capsh") is None:
            pytest.skip("needs capsh to act as root without its permission overrides")
        command = [
            "capsh",
            "--drop=cap_dac_override,cap_dac_read_search,cap_fowner",
            "--",
            "-c",
            f'exec {sys.executable} -c "$0"',
            script,
        ]
    else:
        command = [sys.executable, "-c", script]
    root.chmod(0o555)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        root.chmod(0o755)
    assert done.returncode == 0, done.stderr
    advice = (
        f"this user cannot write in the vector store's folder {root}, and Facet writes "
        "there (a lock file) even to read a collection; make it writable for this user "
        "(chown -R, chmod u+w), or run as its owner"
    )
    assert done.stdout.splitlines() == [
        f"StoreUnavailableError: cannot write {root}/notes.lock: Permission denied; {advice}",
        f"StoreUnavailableError: cannot write {root}: Permission denied; {advice}",
    ], done.stdout
