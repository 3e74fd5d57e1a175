"""scripts/instruction_template_probe.py: a usage message, and the settings' data folder."""

from __future__ import annotations

import sys

import pytest

from tests.scripts import load_script


def test_help_is_a_usage_message_and_a_bad_template_a_usage_error(monkeypatch, capsys):
    """`--help` was KeyError: '--help' (the first argument was looked up as a template)."""
    probe = load_script("instruction_template_probe.py")
    monkeypatch.setattr(sys, "argv", ["instruction_template_probe.py", "--help"])
    with pytest.raises(SystemExit) as stop:
        probe.main()
    assert stop.value.code == 0
    assert "backbone,alpaca,eol-after,eol-before" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["instruction_template_probe.py", "nope"])
    with pytest.raises(SystemExit) as stop:
        probe.main()
    assert stop.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


def test_the_dev_suite_reads_the_settings_shared_data_dir(monkeypatch, tmp_path):
    """It read ../shared/data whatever FACET_SHARED_DATA_DIR said."""
    from app.settings import get_settings

    probe = load_script("instruction_template_probe.py")
    roots = []

    class Stop(Exception):
        pass

    def evaluator(root, suite):  # stands in for DevEvaluator: records the folder, loads no model
        roots.append(root)
        raise Stop

    monkeypatch.setattr(probe, "DevEvaluator", evaluator)
    monkeypatch.setenv("FACET_SHARED_DATA_DIR", str(tmp_path / "datasets"))
    get_settings.cache_clear()
    try:
        for argv, expected in [([], tmp_path / "datasets"), (["--data-dir", str(tmp_path / "x")], tmp_path / "x")]:
            monkeypatch.setattr(sys, "argv", ["instruction_template_probe.py", "alpaca", *argv])
            with pytest.raises(Stop):
                probe.main()
            assert roots[-1].resolve() == expected.resolve()
    finally:
        get_settings.cache_clear()
