"""`facet cluster`'s progress off a terminal, and its heads-up's advice.

A clustering of 5,000 texts printed one progress line per batch of 32 into a log (276 lines:
138 "encoding" and as many "answering"); now a counted stage prints its first and last lines
and one per tenth of its texts (or per 30 s), as `facet index` logs. The heads-up before a long
run advised "--embedder minilm --explain ''" to a run already embedding with minilm: only the
advice not followed is given.
"""

from __future__ import annotations

import pytest

from app.commands import cluster as cluster_cmd


def test_a_counted_stage_prints_a_line_per_tenth_off_a_terminal(capsys) -> None:
    bar = cluster_cmd.ClusterBar()
    assert not bar.tty  # (pytest captures stderr)
    total = 5000
    for done in range(32, total + 32, 32):
        bar.update(0.45 * min(done, total) / total, f"encoding {min(done, total)}/{total} texts")
    for done in range(32, total + 32, 32):
        bar.update(0.45 + 0.45 * min(done, total) / total,
                   f"inbedder answering {min(done, total)}/{total} texts")
    bar.update(1.0, "naming clusters")
    bar.close()
    lines = capsys.readouterr().err.splitlines()
    encoding = [line for line in lines if "encoding " in line]
    answering = [line for line in lines if "answering" in line]
    assert 10 <= len(encoding) <= 12 and 10 <= len(answering) <= 12, lines
    assert encoding[0].endswith("encoding 32/5000 texts")
    assert "encoding 5000/5000 texts" in encoding[-1] and "answering 5000/5000" in answering[-1]
    assert lines[-1].endswith("naming clusters")


@pytest.mark.parametrize(("explainer", "advice"), [
    ("inbedder", "for a quicker run: --explain '' or --limit N."),
    (None, None),  # minilm alone is quick: no heads-up at all
])
def test_the_heads_up_gives_only_advice_not_followed(minilm, explainer, advice) -> None:
    note = cluster_cmd.long_run_note(minilm, 1000, "minilm", explainer)
    if advice is None:
        assert note is None
    else:
        assert note is not None and advice in note and "--embedder minilm" not in note, note
        # A search's results (--query): fewer is --top-k N, which is taken there (--limit N,
        # advised until the README review of the sixth session of 2026-12-06, was refused).
        searched = cluster_cmd.long_run_note(minilm, 1000, "minilm", explainer, searched=True)
        assert searched is not None and "or --top-k N." in searched and "--limit" not in searched
