"""What a plugin says and does around its vectors is kept from breaking Facet's output: a
description of several lines (or very long, or with control characters) stays one row of
`facet embedders`, what it prints goes to standard error (not into `--json` output), a blank
``identity`` is refused as a non-string one is, and its ``sys.exit()`` in a factory or
``encode`` is a ``PluginError`` naming it.

The plugin models are ``test_plugin_output_checks``' ``ChkEmbedder`` with one member changed.
"""

from __future__ import annotations

import json
import sys

import pytest

from embedders import list_embedders, load_embedder, register_embedder, registry
from embedders.registry import PluginError
from tests.app.cli_runner import invoke_cli
from tests.embedders.test_plugin_containment import OWNER
from tests.embedders.test_plugin_output_checks import ChkEmbedder, _register, plugin_module

# -- `facet embedders`: one row each --------------------------------------------------------

DESCRIPTIONS = {
    "chk-desc-lines": "hashing words\n\nwith these options:\n  scale=S  the vectors' scale\n",
    "chk-desc-long": "trigram hashing " * 60,
    "chk-desc-ctrl": "bell\x07 tab\tand \x1b[2J clear\u202e",
}


def _register_described(registered: list[str]) -> None:
    for name, description in DESCRIPTIONS.items():
        registered.append(name)
        register_embedder(name, lambda device=None, _n=name, **kw: ChkEmbedder(_n, **kw), description)


def test_a_description_of_lines_long_or_with_controls_stays_one_row(registered, tmp_path):
    """A plugin's description of several lines printed its later lines as rows of the table
    (under no name), a 1000-character one ran on for lines, and its escape sequences reached
    the terminal (`\\x1b[2J` cleared it)."""
    _register_described(registered)
    listed = invoke_cli("embedders", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()
    assert len(rows) == len(list_embedders())  # one line each, none more
    names = {row.split()[0] for row in rows}
    assert set(DESCRIPTIONS) <= names and "minilm" in names
    by_name = {row.split()[0]: row for row in rows}
    lines_row = by_name["chk-desc-lines"]
    assert lines_row.split()[1:3] == ["plugin", "read"] and lines_row.endswith("  hashing words ...")  # its first line
    # The columns line up, "checkpoint" too (9 wide, it ran into the next column).
    assert len({row.index(row.split()[2], len(row.split()[0]) + 2) for row in rows}) == 1, rows
    long_row = by_name["chk-desc-long"]
    assert long_row.endswith("...") and len(long_row) < 260
    ctrl = by_name["chk-desc-ctrl"]
    assert "\x07" not in ctrl and "\x1b" not in ctrl and "\t" not in ctrl and "\u202e" not in ctrl
    assert ctrl.endswith(r"bell\x07 tab\x09and \x1b[2J clear\u202e")
    assert "all-MiniLM-L6-v2" in by_name["minilm"] and not by_name["minilm"].endswith("...")  # whole

    as_json = invoke_cli("embedders", "--json", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert as_json.returncode == 0, as_json.stderr
    full = {row["name"]: row["description"] for row in json.loads(as_json.stdout)}
    assert {name: full[name] for name in DESCRIPTIONS} == DESCRIPTIONS  # whole, as registered


# -- what a plugin prints goes to standard error ---------------------------------------------

PRINTING_PLUGIN = '''
from embedders import register_embedder
from tests.embedders.test_plugin_output_checks import ChkEmbedder

print("chk-printer: imported")


def register():
    print("chk-printer: registering")
    register_embedder("chk-printer", lambda device=None, **kw: ChkEmbedder("chk-printer", **kw), "prints")
'''


def test_what_a_plugin_prints_at_import_or_register_goes_to_stderr(tmp_path, monkeypatch, capsys):
    """`facet embedders --json` (and every other command's --json) started with the plugin's
    "imported" line, and no JSON reader could read it."""
    stdout = sys.stdout
    with plugin_module(tmp_path, monkeypatch, "chk_printer_plugin", PRINTING_PLUGIN, "chk-printer"):
        registry.load_plugins()
        printed = capsys.readouterr()
        assert "chk-printer" in registry.embedder_names()
        assert printed.out == ""
        assert "chk-printer: imported\n" in printed.err and "chk-printer: registering\n" in printed.err
        assert sys.stdout is stdout  # put back


class Prints(ChkEmbedder):
    """Prints as it is built and as it encodes."""

    def __init__(self, name, mode="ok", **kwargs):
        print(f"{name}: loading weights")
        super().__init__(name, mode, **kwargs)

    def encode(self, texts, *, role="document", instruction=None, batch_size=32):
        print(f"{self.name}: encoding {len(texts)}")
        return super().encode(texts, role=role, instruction=instruction, batch_size=batch_size)


def test_what_a_plugin_prints_in_its_factory_or_encode_goes_to_stderr(registered, tmp_path):
    """`facet embed -e chk-print hi` printed "loading weights" and "encoding 1" before its JSON."""
    _register(registered, "chk-print", cls=Prints)
    stdout = sys.stdout
    embedded = invoke_cli("embed", "-e", "chk-print", "a cat", "--json",
                          env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert embedded.returncode == 0, embedded.stderr
    payload = json.loads(embedded.stdout)  # the JSON, alone
    assert payload["embedder"] == "chk-print" and payload["dim"] == 16
    assert "chk-print: loading weights" in embedded.stderr and "chk-print: encoding 1" in embedded.stderr
    assert sys.stdout is stdout


def test_stdout_is_put_back_when_two_threads_leave_out_of_order():
    """Two ``redirect_stdout(sys.stderr)`` of two threads, the first leaving first, left stdout on
    stderr for good (the second put back what it found: stderr)."""
    stdout = sys.stdout
    first, second = registry.plugin_stdout(), registry.plugin_stdout()
    first.__enter__()
    second.__enter__()
    assert sys.stdout is sys.stderr
    first.__exit__(None, None, None)
    assert sys.stdout is sys.stderr  # the second is still inside
    second.__exit__(None, None, None)
    assert sys.stdout is stdout


# -- sys.exit() in a factory or encode --------------------------------------------------------


class Exits(ChkEmbedder):
    def encode(self, texts, *, role="document", instruction=None, batch_size=32):
        if self.mode == "exit":
            sys.exit(3)
        return super().encode(texts, role=role, instruction=instruction, batch_size=batch_size)


def test_a_plugin_exit_in_encode_is_a_plugin_error_naming_it(registered):
    """`facet embed -e bad hi` ended with exit status 3 and nothing said (`facet serve`'s
    request worker was ended the same way); only an exit at import was contained."""
    _register(registered, "chk-exit-encode", "exit", cls=Exits)
    model = load_embedder("chk-exit-encode")
    with pytest.raises(PluginError, match=rf"^embedder 'chk-exit-encode' \(registered by {OWNER}\) failed "
                                          r"in encode: SystemExit: 3$") as caught:
        model.encode(["a cat"])
    assert isinstance(caught.value.__cause__, SystemExit)


def _exits(device=None, **kwargs):
    raise SystemExit("no GPU here")


def _interrupted(device=None, **kwargs):
    raise KeyboardInterrupt


def test_a_plugin_exit_in_its_factory_is_a_plugin_error_naming_it(registered):
    registered.append("chk-exit-factory")
    register_embedder("chk-exit-factory", _exits, "exits")
    with pytest.raises(PluginError, match=rf"^embedder 'chk-exit-factory' \(registered by {__name__}\) "
                                          r"failed to load: SystemExit: no GPU here$"):
        load_embedder("chk-exit-factory")
    registered.append("chk-interrupt-factory")
    register_embedder("chk-interrupt-factory", _interrupted, "interrupted")
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C is still Ctrl-C
        load_embedder("chk-interrupt-factory")
