"""A data folder on a network file system (the network-filesystem exploration of the fourth
session of 2026-12-02): SQLite's locks and the embedded store's flock do not hold across the
hosts that mount one share, and two hosts writing at once both "won" the single-writer lease,
lost documents and corrupted facet.db, every command saying it succeeded. Facet said nothing of
it. Opening such a folder now logs a warning (once per folder and process) saying to use it from
one host at a time, or to share PostgreSQL and a Qdrant server instead. The file system's type is
read from the mount table; a real NFS or SSHFS mount cannot be made in CI, so the mount table is
a file written here for the parsing, and the type is given to the facade for the warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.services import context
from app.services.context import filesystem_type, warn_if_network
from app.settings import FacetSettings

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:50 / /mnt/team\\040share rw,relatime shared:20 - nfs4 server:/export rw,vers=4.2
41 40 0:51 / /mnt/team\\040share/local rw shared:21 - ext4 /dev/sdb1 rw
42 22 0:52 / /home/ann/remote rw,nosuid shared:22 - fuse.sshfs ann@host:/data rw
"""


def test_the_type_is_the_innermost_mount_holding_the_path(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(MOUNTINFO)
    assert filesystem_type(Path("/mnt/team share/facet"), str(table)) == "nfs4"  # (\\040 a space)
    assert filesystem_type(Path("/mnt/team share/local/facet"), str(table)) == "ext4"
    assert filesystem_type(Path("/home/ann/remote/data"), str(table)) == "fuse.sshfs"
    assert filesystem_type(Path("/home/ann/remotely"), str(table)) == "ext4"  # (not a prefix match)
    assert filesystem_type(Path("/srv"), str(tmp_path / "none")) is None


def test_a_data_folder_on_a_network_share_warns_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from app.core import Facet

    monkeypatch.setattr(context, "filesystem_type", lambda path, *a: "fuse.sshfs")
    monkeypatch.setattr(context, "_WARNED_NETWORK", set())
    data = tmp_path / "data"
    with caplog.at_level(logging.WARNING, logger="app.services.context"):
        Facet(FacetSettings(data_dir=data)).close()
        Facet(FacetSettings(data_dir=data)).close()
    said = [r.getMessage() for r in caplog.records if "network file system" in r.getMessage()]
    assert said == [f"the data folder {data} is on a network file system (fuse.sshfs), whose locks "
                    "do not hold across hosts: use it from one host at a time, or keep the metadata "
                    "in PostgreSQL (FACET_DATABASE_URL) and the vectors in a Qdrant server "
                    "(FACET_QDRANT_URL) to share them (docs/deploy.md)"], said
    # Nothing of the data folder is shared state where both live elsewhere.
    shared = FacetSettings(data_dir=data, database_url="postgresql://u@db/facet",
                           vector_backend="server", qdrant_url="http://q:6333")
    assert warn_if_network(data, shared) is None
