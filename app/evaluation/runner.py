"""Run a list of tasks for an embedder and its baselines, and write the report.

``EvalRunner`` is a plain object holding the logic; the CLI only parses options, checks the
report's folder with :func:`prepare_report_dir`, calls :meth:`EvalRunner.run` and
:func:`write_report`, and prints.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.errors import DataError, InvalidRequestError
from app.evaluation.cache import EmbeddingCache
from app.evaluation.tasks import EvalContext, Task, TaskResult
from app.files import probe_writable
from app.provenance import run_environment
from embedders import Embedder

logger = logging.getLogger(__name__)


@dataclass
class EmbedderRun:
    """All task results of one embedder."""

    embedder: str
    identity: str
    results: list[TaskResult]
    seconds: float
    # 1-minute load average before and after: timings on a shared CPU mean little without it.
    load_average: tuple[float, float] = (0.0, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder,
            "identity": self.identity,
            "seconds": round(self.seconds, 2),
            "load_average_1m": [round(x, 2) for x in self.load_average],
            "results": [r.to_dict() for r in self.results],
        }


# The suite of a report on ``--task`` data only (the built-in suites' sizes apply to none of it).
USER_SUITE = "user"


@dataclass
class EvalReport:
    """The evaluated embedder first, then its baselines.

    ``user_tasks``: what each ``--task`` read (``beir:/abs/path@test``), in the report's order.
    """

    suite: str
    runs: list[EmbedderRun]
    settings: dict[str, Any] = field(default_factory=dict)
    user_tasks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "suite": self.suite,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "host": platform.node(),
            "environment": run_environment(),
            "settings": self.settings,
            "runs": [r.to_dict() for r in self.runs],
        }
        if self.user_tasks:
            out["user_tasks"] = self.user_tasks
        return out

    @property
    def title(self) -> str:
        """What was run, as results.md's title says it: "quick suite", "user tasks"."""
        if self.suite == USER_SUITE:
            return "user tasks"
        return f"{self.suite} suite" + (" and user tasks" if self.user_tasks else "")


class EvalRunner:
    """Evaluates embedders on tasks with a shared embedding cache.

    Args:
        load_embedder: builds an embedder from a name or checkpoint path (loaded once each).
        cache: the embedding cache.
        batch_size: texts per forward pass.
        show_progress: progress bars while encoding.
        use_instructions: False drops all instructions.
    """

    def __init__(
        self,
        load_embedder: Callable[[str], Embedder],
        cache: EmbeddingCache,
        *,
        batch_size: int = 32,
        show_progress: bool = True,
        use_instructions: bool = True,
    ) -> None:
        self._load = load_embedder
        self._loaded: dict[str, Embedder] = {}
        self.cache = cache
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.use_instructions = use_instructions

    def embedder(self, name: str) -> Embedder:
        if name not in self._loaded:
            self._loaded[name] = self._load(name)
        return self._loaded[name]

    def run_one(
        self,
        name: str,
        tasks: Sequence[Task],
        on_result: Callable[[str, TaskResult], None] | None = None,
        model: Embedder | None = None,
    ) -> EmbedderRun:
        """Every task for the embedder ``name`` (``model``: it, loaded already)."""
        start = time.perf_counter()
        load_before = os.getloadavg()[0]
        model = model if model is not None else self.embedder(name)
        ctx = EvalContext(
            model,
            self.cache,
            self.batch_size,
            self.show_progress,
            self.use_instructions,
            self.embedder,
        )
        results = []
        for task in tasks:
            logger.info("%s: running %s", name, task.name)
            result = task.run(ctx)
            results.append(result)
            if on_result is not None:
                on_result(name, result)
        return EmbedderRun(
            name,
            model.identity,
            results,
            time.perf_counter() - start,
            (load_before, os.getloadavg()[0]),
        )

    def run(
        self,
        embedder: str,
        baselines: Sequence[str],
        tasks: Sequence[Task],
        suite: str,
        on_result: Callable[[str, TaskResult], None] | None = None,
    ) -> EvalReport:
        """Evaluate ``embedder`` then each baseline (skipping repeats of the same name). A
        baseline that cannot be loaded (its weights damaged in a way the up-front check cannot
        see: LoRA tensors missing) is reported as failed on every task, with why, so that the
        figures already computed are written (the run failed after the main embedder's, often
        hours of them, and wrote nothing); the evaluated embedder's own failure still raises."""
        from embedders.errors import EmbedderError

        names = list(dict.fromkeys([embedder, *baselines]))
        runs = [self.run_one(names[0], tasks, on_result)]
        for name in names[1:]:
            started = time.perf_counter()
            try:
                model = self.embedder(name)
            except EmbedderError as e:
                why = f"the baseline could not be loaded: {e}"
                logger.warning("%s: %s", name, why)
                failed = [TaskResult(t.name, t.kind, t.main_metric, {t.main_metric: math.nan},
                                     error=why) for t in tasks]
                for result in failed:
                    if on_result is not None:
                        on_result(name, result)
                runs.append(EmbedderRun(name, "", failed, time.perf_counter() - started))
                continue
            runs.append(self.run_one(name, tasks, on_result, model=model))
        settings = {
            "batch_size": self.batch_size,
            "use_instructions": self.use_instructions,
            "cache_hits": self.cache.hits,
            "cache_misses": self.cache.misses,
            "repeated_texts": self.cache.repeats,
        }
        return EvalReport(suite, runs, settings)


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def markdown_table(report: EvalReport, *, details: bool = True) -> str:
    """One row per task metric, one column per embedder (evaluated embedder first), scores x 100.

    A task that failed for an embedder (``TaskResult.error``) shows ``failed [n]`` in each of
    its cells, and the table is followed by the list of those reasons: it showed ``nan`` and
    did not say why. Nothing is averaged, so a failed task counts as no score, never as 0.
    """
    names = [r.embedder for r in report.runs]
    rows: list[tuple[str, str]] = []  # (task, metric) in first-seen order
    shown: dict[str, str] = {}  # task -> its row's label (with the sizes read, for user data)
    table: dict[tuple[str, str, str], float] = {}
    failures: list[str] = []
    failed: dict[tuple[str, str], int] = {}  # (embedder, task) -> its number in ``failures``
    for run in report.runs:
        for res in run.results:
            if res.error is not None:
                failures.append(f"{run.embedder} on {res.task}: {res.error}")
                failed[(run.embedder, res.task)] = len(failures)
            if res.label and res.label != res.task:
                shown.setdefault(res.task, res.label)
            metrics_ = list(res.scores) if details else [res.main_metric]
            for m in metrics_:
                if m.endswith("_std"):
                    continue
                if (res.task, m) not in rows:
                    rows.append((res.task, m))
                table[(run.embedder, res.task, m)] = res.scores[m]
    header = "| task | metric | " + " | ".join(names) + " |"
    sep = "|---|---|" + "---:|" * len(names)
    lines = [header, sep]
    main = {(res.task, res.main_metric) for run in report.runs for res in run.results}
    for task, m in rows:
        metric = m.replace("|", "\\|")  # a pipe would end the markdown cell
        label = f"**{metric}**" if (task, m) in main else metric
        cells = [f"failed [{failed[(n, task)]}]" if (n, task) in failed else _fmt(table.get((n, task, m)))
                 for n in names]
        row = shown.get(task, task).replace("|", "\\|")
        lines.append(f"| {row} | {label} | " + " | ".join(cells) + " |")
    if details:
        secs = " | ".join(f"{run.seconds:.0f}" for run in report.runs)
        lines.append(f"| *all* | seconds | {secs} |")
        loads = " | ".join(f"{a:.1f} → {b:.1f}" for a, b in (r.load_average for r in report.runs))
        lines.append(f"| *all* | load average (1 min) | {loads} |")
    if failures:
        lines += ["", f"{len(failures)} task(s) failed (no score, counted in no figure):", ""]
        lines += [f"- [{i}] {why}" for i, why in enumerate(failures, 1)]
    return "\n".join(lines)


REPORT_FILES = ("results.json", "results.md")


def prepare_report_dir(out_dir: Path, flag: str = "--out") -> list[Path]:
    """Check, before any work, that ``write_report`` can write into ``out_dir``: created if
    missing, a folder, its report files writable (``facet eval`` found out only after the
    whole run, and lost the figures to a traceback). Returns the folders it created, the
    deepest first (``remove_created``: a run refused after it left ``results/`` behind, empty).

    Raises:
        InvalidRequestError: ``out_dir`` is a file or ``-`` (standard output), or one of its
            report files is a folder.
        DataError: the folder cannot be created, or a report file cannot be written in it.
    """
    from app.files import refuse_stdout_folder

    refuse_stdout_folder(out_dir, flag, "the report")
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidRequestError(f"{flag} {out_dir} is a file; name a folder for "
                                  f"{' and '.join(REPORT_FILES)}")
    made = [p for p in (out_dir, *out_dir.parents) if not p.exists()]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        remove_created(made)
        raise DataError(f"{flag} {out_dir}: cannot create the folder: {e.strerror or e}") from e
    for name in REPORT_FILES:
        path = out_dir / name
        if path.is_dir():
            raise InvalidRequestError(f"{flag} {out_dir}: {name} in it is a folder; remove it or "
                                      f"name another {flag}")
        try:
            probe_writable(path)
        except OSError as e:
            raise DataError(f"{flag} {out_dir}: cannot write {name} in it: {e.strerror or e}") from e
    return made


def remove_created(folders: list[Path]) -> None:
    """The folders ``prepare_report_dir`` created, removed where still empty (the deepest
    first)."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return  # (not empty, or gone: its parents stay too)


def earlier_report(out_dir: Path) -> str | None:
    """The embedder (as its command named it) of a report already in ``out_dir``, "" for one
    whose results.json does not say (or cannot be read), None where there is no report."""
    if not any((out_dir / name).is_file() for name in REPORT_FILES):
        return None
    try:
        runs = json.loads((out_dir / "results.json").read_text(encoding="utf-8")).get("runs") or []
        name = runs[0].get("embedder") if isinstance(runs[0], dict) else None
    except (OSError, ValueError, AttributeError, IndexError, TypeError):
        return ""
    return name if isinstance(name, str) else ""


def _report_key(data: Any) -> tuple[Any, ...] | None:
    """What a report evaluated, from its ``to_dict()``: its suite, and each run's embedder and
    tasks with what each task read (``info``: its sizes, instruction, document cut), so that a
    quick run, ``--no-instructions`` or an ``--instruction`` override is another evaluation
    than a full run's (the task names alone let a quick run replace a full report unsaid)."""
    try:
        return (data.get("suite"), data.get("settings", {}).get("use_instructions"),
                tuple((run["embedder"], tuple(sorted(
                    (r["task"], json.dumps(r.get("info"), sort_keys=True, default=str))
                    for r in run["results"]))) for run in data["runs"]))
    except (KeyError, TypeError, AttributeError):
        return None


def keep_earlier_report(out_dir: Path, report: EvalReport | None = None) -> list[Path]:
    """Move a report already in ``out_dir`` (results.json, results.md) aside to ``<name>.bak``
    (replacing an older .bak), so that the report ``write_report`` is about to write does not
    replace it without a trace, unless it evaluated what ``report`` did (the same embedders on
    the same tasks: a rerun refreshes its figures in place). Returns the .bak paths it wrote.

    Raises:
        OSError: a file could not be moved (those moved before it stay moved).
    """
    if report is not None:
        try:
            earlier = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            earlier = None
        key = _report_key(earlier)
        if key is not None and key == _report_key(report.to_dict()):
            return []
    kept: list[Path] = []
    for name in REPORT_FILES:
        path = out_dir / name
        if path.is_file():
            backup = path.with_name(name + ".bak")
            os.replace(path, backup)
            kept.append(backup)
    return kept


def write_report(report: EvalReport, out_dir: Path, command: str | None = None) -> tuple[Path, Path]:
    """Write ``results.json`` and ``results.md`` under ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = report.to_dict()
    if command:
        data["command"] = command
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(data, indent=2, sort_keys=False))
    md_path = out_dir / "results.md"
    title = f"# facet eval: {report.runs[0].embedder} ({report.title})\n\n"
    cmd = f"Command: `{command}`\n\n" if command else ""
    read = "Data: " + ", ".join(f"`{t}`" for t in report.user_tasks) + "\n\n" if report.user_tasks else ""
    note = "Scores x 100. The main metric of each task is in bold."
    if any(res.kind == "multiview" for run in report.runs for res in run.results):  # its scores only
        note += (" `cross_A_under_B` is view A's labels clustered on embeddings made with view B's instruction; "
                 "`steer_gap` is matched minus crossed.")
    md_path.write_text(title + cmd + read + note + "\n\n" + markdown_table(report) + "\n")
    return json_path, md_path
