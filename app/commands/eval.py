"""``facet eval``: evaluate an embedder (name or checkpoint) on the benchmark tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from app.commands.common import expand_home, handle_errors, path_value, stdout_may_close
from app.errors import DataError, InvalidRequestError, NotFoundError
from app.files import expand_user
from app.settings import get_settings
from app.text import bar_size, check_text_encodable, plural, printable_json


def register(cli: typer.Typer) -> None:
    """Add the ``eval`` command to the ``facet`` CLI."""
    cli.command("eval")(eval_cmd)


def _split(names: str | None) -> list[str]:
    """Comma-separated embedder specs, split only at commas outside brackets: an embedder's
    options are comma-separated too (``checkpoints/x[max_length=96,context_placement=none]``,
    as docs/results.md writes them), and splitting inside them named an embedder ``x[max_length=96``."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in names or "":
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        current.append(char)
    parts.append("".join(current))
    return [n.strip() for n in parts if n.strip()]


def _loads_as(spec: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What ``spec`` (checked by ``check_embedder``) loads, read without loading it: the
    registered name (case does not matter) or the checkpoint folder, and the options. Two
    spellings of one model (``minilm``, ``MiniLM``, ``minilm[]``) gave two identical columns."""
    from embedders.registry import list_embedders, split_options, without_options

    base = without_options(spec)
    options = split_options(spec)[1] if base != spec else {}
    info = next((i for i in list_embedders() if i.name == base.lower()), None)
    if info is not None:
        where = str(info.path) if info.path is not None else info.name
    else:
        where = str(expand_user(base).resolve())  # a checkpoint folder, however it is written
    return where, tuple(sorted(options.items()))


def _check_task_instruction(user_tasks: list[Any]) -> None:
    """``--task-instruction`` is not applied to ``sts`` tasks (bare sentences, like STS-B): it was
    dropped without a word. Refused where no --task item takes it; said on stderr where some do not."""
    from app.evaluation.tasks import StsTask

    bare = [t.name for t in user_tasks if isinstance(t, StsTask)]
    if not bare:
        return
    example = f"--instruction {bare[0]}=TEXT"
    if len(bare) == len(user_tasks):
        raise InvalidRequestError(
            f"--task-instruction applies to beir and goalex --task items; sts tasks read bare sentences "
            f"({', '.join(bare)}); to give one an instruction use {example}")
    typer.echo(f"note: --task-instruction is not applied to {', '.join(bare)} (sts tasks read bare "
               f"sentences); to give one an instruction use {example}", err=True)


def _distinct_baselines(embedder: str, baselines: list[str]) -> list[str]:
    """``baselines`` less those that load the same model as the evaluated embedder or an
    earlier baseline (each dropped one is said on stderr)."""
    seen = {_loads_as(embedder): embedder}
    kept: list[str] = []
    for spec in baselines:
        key = _loads_as(spec)
        if key in seen:
            if spec != seen[key]:  # an exact repeat was always dropped without a word
                typer.echo(f"note: baseline {spec!r} loads the same model as {seen[key]!r}; evaluated once",
                           err=True)
            continue
        seen[key] = spec
        kept.append(spec)
    return kept


@handle_errors
def eval_cmd(
    ctx: typer.Context,
    embedder: Annotated[
        str | None, typer.Argument(help="embedder name (see `facet embedders`) or checkpoint dir")
    ] = None,
    suite: Annotated[str, typer.Option("--suite", "-s", help="quick (fixed subsamples) or full")] = "quick",
    tasks: Annotated[str | None, typer.Option("--tasks", "-t", help="comma-separated task names; default all")] = None,
    baselines: Annotated[
        str,
        typer.Option("--baselines", "-b", help="comma-separated embedders reported beside it; '' for none"),
    ] = "minilm,backbone-prompteol",
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="output folder; default results/<name>-<suite>, with --task "
                     "results/<name>-user-<hash of the --task list> (-<suite>-user-<hash> with --tasks "
                     "as well), with --collection results/<collection>-collection-<embedder searched>",
                     callback=expand_home, parser=path_value),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="dataset root (default: settings shared_data_dir, ../shared/data)",
                     parser=path_value),
    ] = None,
    rerank_first_stage: Annotated[
        str, typer.Option("--rerank-first-stage", help="first-stage embedder of rerank tasks (not --task ones)")
    ] = "minilm",
    rerank_top_n: Annotated[
        int | None,
        typer.Option("--rerank-top-n", help="candidates re-scored per query (default: quick 20, full 100)"),
    ] = None,
    doc_max_words: Annotated[
        int | None,
        typer.Option(
            "--doc-max-words",
            help="truncate retrieval documents, --task beir ones included, to N words "
            "(default: quick 64, full whole, --task whole; 0 = whole)",
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="texts per forward pass")] = 32,
    no_instructions: Annotated[
        bool, typer.Option("--no-instructions", "--no-instruction",
                           help="drop every instruction (ablation); with --collection: search without one")
    ] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="do not read or write the embedding cache")] = False,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="embedding cache folder (default <data_dir>/cache/embeddings)",
                     parser=path_value),
    ] = None,
    list_tasks: Annotated[
        bool,
        typer.Option("--list-tasks", help="list tasks with their per-suite parameters and exit"),
    ] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="with --list-tasks or --collection: machine-readable")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="hide progress bars")] = False,
    task: Annotated[
        list[str] | None,
        typer.Option(
            "--task",
            # (\\[: not Rich markup, which ate "[@SPLIT]")
            help="your own data, KIND:PATH (repeatable or comma-separated): beir:FOLDER\\[@SPLIT], "
            "sts:FILE.csv, goalex:FOLDER; runs instead of the built-in tasks unless --tasks names some",
        ),
    ] = None,
    task_instruction: Annotated[
        str | None,
        typer.Option("--task-instruction", help="query instruction of --task beir / clustering goal of goalex "
                     "('' drops both)"),
    ] = None,
    instruction: Annotated[
        list[str] | None,
        typer.Option(
            "--instruction",
            "-i",
            help="TASK=TEXT: replace a task's instruction, TASK= drops it (repeatable; not for "
            "clinc-multiview, whose views carry their own)",
        ),
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option("--collection", "-c", help="score this indexed collection through its own search "
                     "(nothing embedded again) with --task beir:FOLDER's queries and qrels; EMBEDDER, "
                     "if given, picks which of its embedders to search"),
    ] = None,
    split: Annotated[
        str | None, typer.Option("--split", help="with --collection: the qrels split (default test)")
    ] = None,
    mode: Annotated[
        list[str] | None,
        typer.Option("--mode", "-m", help="with --collection: auto, dense, lexical or hybrid; repeatable "
                     "or comma-separated to compare modes in one run (default auto)"),
    ] = None,
    per_chunk: Annotated[
        bool,
        typer.Option("--per-chunk", help="with --collection: score the top chunks as ranked, as "
                     "`facet search --per-chunk` shows them (default: grouped by document, as "
                     "`facet search` and POST /search)"),
    ] = False,
) -> None:
    """Evaluate EMBEDDER on STS, retrieval, rerank, clustering, multi-view clustering and
    classification tasks, with baselines beside it; writes results.json and results.md.
    With --collection NAME --task beir:FOLDER: score an indexed collection through its own
    search instead (nDCG@10 of what `facet search` shows, Recall@100)."""
    from app.evaluation.cache import EmbeddingCache
    from app.evaluation.runner import (
        USER_SUITE,
        EvalRunner,
        keep_earlier_report,
        markdown_table,
        prepare_report_dir,
        remove_created,
        write_report,
    )
    from app.evaluation.suites import (
        SUITES,
        SuiteOptions,
        build_tasks,
        build_user_tasks,
        describe_tasks,
        resolve_task_names,
        user_tasks_key,
    )

    if suite not in SUITES:
        raise InvalidRequestError(f"unknown suite {suite!r}; use one of: {', '.join(SUITES)}")
    if list_tasks:
        described = describe_tasks()
        if as_json:
            typer.echo(printable_json(described))
            return
        width = max(len(d["name"]) for d in described)
        for d in described:
            typer.echo(f"{d['name']:<{width}}  {d['kind']:<14} {d['description']}")
            for name in SUITES:
                params = ", ".join(f"{k}={'all' if v is None else v}" for k, v in d[name].items())
                typer.echo(f"{'':<{width}}  {'':<14} {name}: {params}")
        return
    if task:
        from app.evaluation.suites import check_task_items

        check_task_items(task)
    # Bytes that are not UTF-8 on the command line (a Latin-1 terminal's "é") reach here as
    # unpaired surrogates: the run failed on a UnicodeEncodeError once the model had loaded.
    if task_instruction is not None:
        check_text_encodable(task_instruction, "--task-instruction")
    for override in instruction or []:
        check_text_encodable(override, "--instruction")
    if collection is not None:
        _eval_collection(ctx, collection, embedder, task, split, mode, task_instruction, no_instructions,
                         per_chunk, out, as_json, no_progress)
        return
    for name, given in (("--split", split), ("--mode", mode), ("--per-chunk", per_chunk or None)):
        if given is not None:
            raise InvalidRequestError(f"{name} applies to --collection (scoring an indexed collection)")
    if as_json:  # was ignored: a markdown table on stdout, exit 0, for a caller expecting JSON
        raise InvalidRequestError("--json applies to --list-tasks or --collection (scoring an indexed "
                                  "collection); a run writes results.json in its --out folder")
    if embedder is None:
        raise InvalidRequestError(
            "name the embedder to evaluate, e.g. `facet eval minilm`; `facet eval --list-tasks` lists the tasks"
        )
    if batch_size < 1:
        raise InvalidRequestError(f"--batch-size must be a positive integer, got {batch_size}")
    # Pairs of which one undoes the other (both were taken, the second dropped without a word).
    if no_instructions and task_instruction is not None:  # (an ablation of the same command)
        typer.echo("note: --no-instructions drops every instruction, --task-instruction's too",
                   err=True)
    if no_instructions and instruction:  # (dropped without a word: the figure read as the given one's)
        typer.echo(f"note: --no-instructions drops every instruction, --instruction's too "
                   f"({', '.join(instruction)})", err=True)
    if no_cache and cache_dir is not None:
        raise InvalidRequestError("--no-cache reads and writes no cache, so --cache-dir is not used: "
                                  "give one or the other")
    if rerank_top_n is not None and rerank_top_n < 1:
        raise InvalidRequestError(f"--rerank-top-n must be a positive integer, got {rerank_top_n}")
    if doc_max_words is not None and doc_max_words < 0:
        raise InvalidRequestError(f"--doc-max-words must be >= 0, got {doc_max_words}")

    settings = get_settings()
    options = SuiteOptions(
        rerank_first_stage=rerank_first_stage,
        rerank_top_n=rerank_top_n,
        doc_max_words=doc_max_words,
    )
    user_tasks = build_user_tasks(task, task_instruction, options) if task else []
    for t in user_tasks:  # (a name carries @SPLIT only where the user gave one)
        split = getattr(t, "split", None)
        if split and split != "test" and not t.name.endswith(f"@{split}"):
            # Read without a word before: a dev figure could be reported as a test one.
            typer.echo(f"note: {t.name} has no qrels/test.tsv; it reads qrels/{split}.tsv "
                       f"(give {t.name}@SPLIT to choose another)", err=True)
    if task_instruction is not None and not task:
        raise InvalidRequestError("--task-instruction applies to --task items; to change a built-in task's "
                                  "instruction use --instruction TASK=TEXT")
    if task_instruction is not None:
        _check_task_instruction(user_tasks)
    task_list = list(user_tasks)
    builtin = bool(not task or tasks)
    # The names first (the tasks', then --instruction's), read without the data: a typo was
    # reported as the missing dataset root (exit 3) where none was set up.
    names = resolve_task_names(tasks) if builtin else []
    for override in instruction or []:
        _check_instruction_name(names + [t.name for t in user_tasks], override)
    if data_dir is not None and not builtin:  # (taken without a word, not read)
        typer.echo("note: --data-dir holds the built-in tasks' data, and only --task items run: it is not read",
                   err=True)
    if builtin:
        root = expand_user(data_dir or settings.shared_data_dir)
        root = root if root.is_absolute() else Path.cwd() / root
        if not root.is_dir():
            raise NotFoundError(f"dataset root {root} does not exist; pass --data-dir or set FACET_SHARED_DATA_DIR")
        task_list = build_tasks(root, suite, names, options) + task_list
    for override in instruction or []:
        _override_instruction(task_list, override)
        named = _check_instruction_name([t.name for t in task_list], override)
        if task_instruction is not None and any(t.name.lower() == named for t in user_tasks):
            typer.echo(f"note: --instruction {named}=... replaces --task-instruction for that task",
                       err=True)
    from app.evaluation.tasks import RerankTask

    if not any(isinstance(t, RerankTask) for t in task_list):
        unused = [flag for name, flag in (("rerank_top_n", "--rerank-top-n"),
                                          ("rerank_first_stage", "--rerank-first-stage"))
                  if getattr(ctx.get_parameter_source(name), "name", "DEFAULT")
                  not in ("DEFAULT", "DEFAULT_MAP")]
        if unused:  # (taken, and read by no task: exit 0 without a word)
            raise InvalidRequestError(f"{' and '.join(unused)} appl{'y' if len(unused) > 1 else 'ies'} "
                                      "to the suites' rerank tasks, and none of the tasks run is one: "
                                      "drop it, or add a rerank task (`facet eval --list-tasks`)")
    from app.evaluation.tasks import RetrievalTask

    if doc_max_words is not None and not any(isinstance(t, RetrievalTask | RerankTask) for t in task_list):
        # (taken, read by no task, and not in the report: exit 0 without a word)
        raise InvalidRequestError("--doc-max-words cuts the documents of retrieval and rerank tasks, and "
                                  "none of the tasks run is one: drop it, or add one (a --task beir:FOLDER, "
                                  "or `facet eval --list-tasks`)")
    # Every data file is read and checked before any model loads: malformed data cost a second,
    # not a run that fails at its last task.
    for t in task_list:
        t.prepare()
    # ...and every embedder named, the rerank tasks' first stage included, so that a typo in the
    # last baseline is not found after the first embedder has run every task (and then no report
    # written), nor one in the first stage after the tasks run before the rerank ones.
    from embedders.registry import check_embedder

    for spec in [embedder, *_split(baselines), rerank_first_stage]:
        check_embedder(spec)
    baseline_list = _distinct_baselines(embedder, _split(baselines))
    # ...and the report's folder, so that a file in its place or a folder that cannot be written
    # is found now, not after the whole run (its figures then lost to a traceback).
    safe = Path(embedder).name.replace(" ", "_") or "embedder"
    # A --task run is not the suite's: results/<name>-quick was overwritten by every one of them.
    ran = USER_SUITE if task and not tasks else suite
    folder = f"{safe}-{suite}"
    if user_tasks:  # named by what the tasks read, so runs on other data keep their reports
        folder = f"{safe}-{'' if ran == USER_SUITE else suite + '-'}user-{user_tasks_key(user_tasks)}"
    out_dir = out or Path("results") / folder
    created = prepare_report_dir(out_dir)
    _note_earlier_report(out_dir, embedder, named=out is None)
    cache = EmbeddingCache(None if no_cache else (cache_dir or settings.cache_dir / "embeddings"))

    from embedders import load_embedder

    runner = EvalRunner(
        lambda name: load_embedder(name, device=settings.device),
        cache,
        batch_size=batch_size,
        show_progress=not no_progress,
        use_instructions=not no_instructions,
    )

    def show(name: str, result: object) -> None:
        from app.evaluation.tasks import TaskResult

        assert isinstance(result, TaskResult)
        if result.error is not None:  # no score: say why on the line itself
            typer.echo(f"{name} {result.shown}: no {result.main_metric}: {result.error}", err=True)
            return
        typer.echo(
            f"{name} {result.shown}: {result.main_metric} = {100 * result.main_score:.2f} ({result.seconds:.0f}s)",
            err=True,
        )

    try:
        report = runner.run(embedder, baseline_list, task_list, ran, on_result=show)
        report.user_tasks = [t.description for t in user_tasks]
    except BaseException as e:
        remove_created(created)  # empty folders left by a run that failed or was stopped
        if isinstance(e, KeyboardInterrupt):  # (it exited 130 without a word)
            cached = ("nothing was kept (--no-cache)" if no_cache else
                      f"the {cache.written:,} embeddings saved so far are cached: running it again "
                      "goes on from them" if cache.written else
                      f"no embedding was saved yet (the cache saves every {cache.write_every:,} "
                      "texts)")
            typer.echo(f"\nstopped (Ctrl-C): no report was written; {cached}", err=True)
            raise typer.Exit(130) from None
        raise
    from app.cli import command_line

    command = command_line(ctx)
    # A closed stdout (`facet eval ... | head -1`) still leaves the report and the exit code
    # (``stdout_may_close``): results.json was not written, and the exit was 0.
    with stdout_may_close():
        typer.echo(markdown_table(report))  # first: a write that fails (a full disk) keeps the figures
        try:
            kept = keep_earlier_report(out_dir, report)
        except OSError as e:
            typer.echo(f"note: the earlier report in {out_dir} could not be kept as .bak "
                       f"({e.strerror or e}); it is replaced", err=True)
        else:
            if kept:
                typer.echo(f"note: the earlier report in {out_dir} was moved to {' and '.join(map(str, kept))}",
                           err=True)
        try:
            json_path, md_path = write_report(report, out_dir, command)
        except OSError as e:
            raise DataError(f"--out {out_dir}: cannot write the report: {e.strerror or e}") from e
        typer.echo(f"\nwrote {json_path} and {md_path} ({cache_summary(cache)})")
        failed = [f"{run.embedder} {r.task}" for run in report.runs for r in run.results if r.error]
        if failed:  # the figures are written; the exit code says some are missing
            raise DataError(f"{len(failed)} task(s) have no score ({', '.join(failed)}): their errors are "
                            "above and in results.json; the other figures are written")


def cache_summary(cache: Any) -> str:
    """The report line's account of the embedding cache: its hits and the texts encoded, and
    the texts repeated within one encode (encoded, or found in the cache, once: a warm run
    counted them as hits, so its results.json's ``repeated_texts`` was 0); with `--no-cache`,
    no cache named (it said "cache: 5 hits" of STS-B's repeated sentences)."""
    once = "encoded once" if cache.root is None else "read once"
    repeats = f", {plural(cache.repeats, 'repeated text')} {once}" if cache.repeats else ""
    if cache.root is None:
        return f"no cache (--no-cache): {plural(cache.misses, 'text')} encoded{repeats}"
    return f"cache: {plural(cache.hits, 'hit')}, {cache.misses} encoded{repeats}"


def _note_earlier_report(out_dir: Path, embedder: str, *, named: bool) -> None:
    """Say on stderr, before the run, that ``out_dir`` holds a report of another embedder
    (``named``: the folder was named after ``embedder``'s last path part, which two checkpoints
    ``a/model`` and ``b/model`` share). Every earlier report is moved to .bak when the new one is
    written (said then)."""
    from app.evaluation.runner import earlier_report

    earlier = earlier_report(out_dir)
    if not earlier:
        return
    try:
        same = _loads_as(earlier) == _loads_as(embedder)
    except Exception:  # an earlier name that no longer parses: another embedder
        same = False
    if same:
        return
    why = (f" (the folder is named after the last part of {embedder!r} alone; pass --out to keep "
           "both reports apart)" if named else "")
    typer.echo(f"note: {out_dir} holds a report of another embedder, {earlier!r}{why}; it will be "
               "moved to results.json.bak and results.md.bak when this run's report is written", err=True)


def _check_instruction_name(names: list[str], override: str) -> str:
    """The task one ``TASK=TEXT`` override names (lowercased), checked to be among ``names``
    (the tasks being run, in their order) before any task is built or its data looked for.

    Raises:
        InvalidRequestError: no ``=`` or no TASK; a task that is not being run.
    """
    name = _override_parts(names, override)[0]
    if name not in (n.lower() for n in names):
        raise InvalidRequestError(f"--instruction names task {name!r}, which is not being run ({', '.join(names)})")
    return name


def _override_parts(names: list[str], override: str) -> tuple[str, str]:
    """``TASK=TEXT`` split into the task's name (lowercased) and the text: at the longest name
    among ``names`` that the override starts with, followed by ``=`` (a task path may hold
    one: `beir:a=b`), else at its first ``=``.

    Raises:
        InvalidRequestError: no ``=`` or no TASK.
    """
    stripped = override.lstrip()
    for known in sorted((n.lower() for n in names), key=len, reverse=True):
        if stripped.lower().startswith(known + "="):
            return known, stripped[len(known) + 1:]
    name, sep, text = override.partition("=")
    name = name.strip().lower()
    if not sep or not name:
        raise InvalidRequestError(f"--instruction takes TASK=TEXT, got {override!r}")
    return name, text


def _override_instruction(tasks: list[Any], override: str) -> None:
    """Apply one ``TASK=TEXT`` instruction override to the built tasks; an empty TEXT drops the
    task's instruction (None: for a clustering task too, whose goal is kept only by not overriding)."""
    name = _check_instruction_name([t.name for t in tasks], override)
    text = _override_parts([t.name for t in tasks], override)[1]
    matches = [t for t in tasks if t.name.lower() == name]
    for task in matches:
        target = getattr(task, "retrieval", task)  # a rerank task's instruction lives on its retrieval
        if not hasattr(target, "instruction"):
            raise InvalidRequestError(f"task {name!r} has no single instruction to replace (its views carry their own)")
        from app.evaluation.suites import instruction_given

        target.instruction = instruction_given(text)


# Options of the embedding evaluation, meaningless when a collection's own search is scored.
_EMBEDDING_ONLY = {"suite": "--suite", "tasks": "--tasks", "baselines": "--baselines",
                   "data_dir": "--data-dir", "rerank_first_stage": "--rerank-first-stage",
                   "rerank_top_n": "--rerank-top-n", "doc_max_words": "--doc-max-words",
                   "batch_size": "--batch-size", "no_cache": "--no-cache", "cache_dir": "--cache-dir",
                   "instruction": "--instruction"}


def _eval_collection(ctx: typer.Context, collection: str, embedder: str | None, task: list[str] | None,
                     split: str | None, modes: list[str] | None, task_instruction: str | None,
                     no_instruction: bool, per_chunk: bool, out: Path | None, as_json: bool,
                     no_progress: bool) -> None:
    """``facet eval --collection``: the checks and the output; the work is
    ``app.evaluation.collection.evaluate_collection``."""
    import sys

    from app.commands.common import open_facet
    from app.evaluation.collection import (
        evaluate_collection,
        folder_name,
        markdown_table,
        parse_beir_task,
        parse_modes,
        searched_embedder,
        summary,
        write_collection_report,
    )
    from app.evaluation.loaders import load_beir
    from app.evaluation.runner import keep_earlier_report, prepare_report_dir, remove_created

    given = [flag for name, flag in _EMBEDDING_ONLY.items()
             # by name: typer carries its own click, whose ParameterSource is another enum
             if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")]
    if given:
        raise InvalidRequestError(f"--collection scores the collection's own search; {', '.join(given)} "
                                  "belong(s) to evaluating an embedder: drop it")
    if embedder is not None and len(_split(embedder)) != 1:
        raise InvalidRequestError(f"--collection searches one of the collection's embedders; got {embedder!r} "
                                  "(an embedder list belongs to evaluating embedders)")
    if not task:
        raise InvalidRequestError("--collection needs --task beir:FOLDER: the queries and qrels to score "
                                  "it with (from the corpus it was indexed from)")
    if no_instruction and task_instruction is not None:
        raise InvalidRequestError("give --task-instruction TEXT or --no-instruction, not both")
    folder, split_read = parse_beir_task(task, split)
    chosen_modes = parse_modes(modes)
    from app.evaluation.suites import instruction_given

    instruction = (None if no_instruction or task_instruction is None
                   else instruction_given(task_instruction))
    data = load_beir(folder, split_read)  # DataError names a malformed file and line
    from tqdm import tqdm

    with open_facet() as facet:
        if out is None:
            # Named after the embedder the search uses (as it names it): the reports of two
            # embedders of one collection shared results/<collection>-collection/, the first
            # moved to .bak by the second and lost by a third run.
            searched, _ = searched_embedder(facet, collection, data, chosen_modes, embedder, instruction)
            out_dir = Path("results") / folder_name(collection, searched)
        else:
            out_dir = out
        created = prepare_report_dir(out_dir)
        bar = tqdm(total=len(data.qrels) * len(chosen_modes), desc=f"search {collection}", unit="query",
                   file=sys.stderr, **bar_size(),
                   disable=True if no_progress else None)  # None: none where stderr is a log
        try:
            report = evaluate_collection(
                facet, collection, data, modes=chosen_modes, instruction=instruction,
                group_by_document=not per_chunk, embedder=embedder, folder=str(folder.resolve()),
                split=split_read, on_query=bar.update, warn=lambda line: typer.echo(line, err=True))
        except BaseException:
            remove_created(created)
            raise
        finally:
            bar.close()
    for note in report.notes:  # what the search said its results cannot show (dropped before)
        typer.echo(f"note (from the search): {note}", err=True)
    from app.cli import command_line

    command = command_line(ctx)
    # A closed stdout still leaves the report and the exit code (``stdout_may_close``).
    with stdout_may_close():
        if as_json:
            typer.echo(printable_json(report.to_dict()))
        else:
            typer.echo(summary(report))
            typer.echo(markdown_table(report))
        earlier = _earlier_collection_report(out_dir)
        try:
            # A rerun of the same evaluation refreshes its figures in place (as a model
            # evaluation's does); another one's report is moved aside, and said.
            kept = [] if earlier == _collection_key(report.to_dict()) else keep_earlier_report(out_dir)
            json_path, md_path = write_collection_report(report, out_dir, command)
        except OSError as e:
            raise DataError(f"--out {out_dir}: cannot write the report: {e.strerror or e}") from e
        if kept:
            of = (f" (collection {earlier[1]!r}, embedder {earlier[2] or 'none (lexical)'})"
                  if earlier is not None else "")
            typer.echo(f"note: the earlier report in {out_dir}{of} was moved to "
                       f"{' and '.join(map(str, kept))}", err=True)
        typer.echo(f"wrote {json_path} and {md_path}", err=as_json)


def _collection_key(data: Any) -> tuple[Any, ...] | None:
    """What a collection report (``CollectionReport.to_dict()``) evaluated: the collection, the
    embedder searched, the task, the grouping, the instruction and the modes; None for another
    kind of report or one that cannot be read."""
    try:
        if data.get("kind") != "collection":
            return None
        return (data["kind"], data["collection"], data.get("embedder"), data.get("embedder_spec"),
                data["task"], data.get("results_per"), data.get("instruction"),
                tuple(r["mode"] for r in data["runs"]))
    except (KeyError, TypeError, AttributeError):
        return None


def _earlier_collection_report(out_dir: Path) -> tuple[Any, ...] | None:
    """``_collection_key`` of the collection report in ``out_dir``, None where there is none."""
    import json

    try:
        return _collection_key(json.loads((out_dir / "results.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
