"""A plugin whose width changes while its identity does not (it reads its width from a
setting): searching or indexing its collection then got the store's "Vector dimension error:
expected dim: 64, got 96", naming neither the embedder nor what changed (the plugin
exploration of the sixth session of 2026-12-02). Both are refused naming the two widths; the
collection keeps what it held. Real SQLite and edge store; the plugin is numpy only."""

from __future__ import annotations

import json

import pytest

from embedders.registry import register_embedder, unregister_embedder
from tests.app.services.test_instruction_unread import WordHash


class Widening(WordHash):
    """Hashed words, ``width`` wide: the identity leaves the width out."""

    width = 16

    @property  # type: ignore[override]
    def dim(self) -> int:
        return Widening.width

    @property
    def identity(self) -> str:
        return json.dumps({"method": "widening", "name": self.name})


@pytest.fixture
def widening():
    register_embedder("widening", lambda device=None, **kw: Widening("widening"), "hashed words",
                      reads_instructions=False)
    yield "widening"
    unregister_embedder("widening")
    Widening.width = 16


def test_a_width_changed_under_one_identity_is_refused_by_name(tmp_path, widening) -> None:
    from tests.app.cli_runner import invoke_cli

    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    (tmp_path / "a.txt").write_text("my card was declined\n")
    (tmp_path / "b.txt").write_text("where is my parcel\n")
    done = invoke_cli("index", str(tmp_path / "a.txt"), "-c", "notes", "-e", widening, env=env)
    assert done.returncode == 0, done.stderr
    Widening.width = 24
    searched = invoke_cli("search", "card", "-c", "notes", "--mode", "dense", env=env)
    assert searched.returncode == 5, searched.stderr
    assert searched.stderr == ("error: 'widening' now gives 24-d vectors, and collection 'notes' holds 16-d "
                               "'widening' vectors: its width changed while its identity did not (a plugin "
                               "reading its width from a setting?); search with the embedder as it was when "
                               "the collection was indexed, or index the sources into a new collection\n")
    indexed = invoke_cli("index", str(tmp_path / "b.txt"), "-c", "notes", "-e", widening, env=env)
    assert indexed.returncode == 5, indexed.stderr
    assert "collection 'notes' holds 16-d 'widening' vectors, and 'widening' now gives 24-d ones" in indexed.stderr
    Widening.width = 16  # as it was: searched as before, nothing lost
    again = invoke_cli("search", "card", "-c", "notes", "--mode", "dense", env=env)
    assert again.returncode == 0 and "my card was declined" in again.stdout, again.stderr
