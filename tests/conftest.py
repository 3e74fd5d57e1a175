"""Shared fixtures: real packaged models loaded once per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Starlette's TestClient sends "Host: testserver", which a keyless server refuses (the names it
# answers: FACET_API_ALLOWED_HOSTS, app/api/server.py's _KeylessGuard); the tests of that check
# set the list themselves. Servers started as subprocesses are reached at 127.0.0.1.
os.environ.setdefault("FACET_API_ALLOWED_HOSTS", '["testserver"]')
if os.environ.get("PYTEST_XDIST_WORKER"):
    # make test runs two pytest processes on two cores: one torch thread each (and in the
    # CLIs and workers they start), or four threads fight over two cores and the run takes
    # longer than one process (measured: 12 min with two threads each, user time 20 min).
    os.environ.setdefault("OMP_NUM_THREADS", "1")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _ctrl_c_as_at_a_terminal() -> Iterator[None]:
    """Ctrl-C as a terminal gives it, in each test's main thread. A suite started in the
    background of a non-interactive shell (`make test &`, some CI runners) inherits SIGINT
    ignored, and Python then raises no KeyboardInterrupt for it: the plugin tests that tell a
    plugin's own KeyboardInterrupt from a Ctrl-C (``embedders.registry._ctrl_c_ignored``) then
    read every one as the plugin's: 5 failed in such a run (2026-12-04). Left as it is
    where SIGINT is not ignored, and put back after the test."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


# What an in-process CLI call quiets for the rest of its process (``app.cli.quiet_libraries``).
_QUIETED_VARIABLES = ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY")


@pytest.fixture(autouse=True)
def _libraries_as_a_test_found_them() -> Iterator[None]:
    """Undo what an in-process CLI call quiets (``quiet_libraries``: two variables, and an
    imported transformers' verbosity and progress bar). Left for the next tests of the process,
    checks of transformers' warnings and of a child process's "Loading weights" bar could not
    fail (tests/embedders/test_methods.py, test_quiet_load.py), depending on which test files
    ran before in the same pytest worker. ``invoke_cli`` undid the variables only; a bare
    ``CliRunner().invoke`` undid nothing."""
    import sys

    saved = {name: os.environ.get(name) for name in _QUIETED_VARIABLES}
    hf = sys.modules.get("transformers.utils.logging")
    state = (hf.get_verbosity(), hf.is_progress_bar_enabled()) if hf is not None else None
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    hf = sys.modules.get("transformers.utils.logging")
    if hf is None:
        return
    verbosity, bar = state if state is not None else (hf.WARNING, True)  # (imported by the test)
    hf.set_verbosity(verbosity)
    (hf.enable_progress_bar if bar else hf.disable_progress_bar)()


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    """``FACET_*`` variables set through it read afresh by ``get_settings`` (cached per
    process), over a data folder of the test's own."""
    from app.settings import get_settings

    monkeypatch.setenv("FACET_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()

# The files that take longest, longest first (summed seconds of their tests in the last full
# run, prof111 of the second session of 2026-12-04, two processes on the 2-core VM). make test
# runs two processes (three were measured in the fifth session of 2026-12-07, and not kept:
# docs/testing.md), one file at a time each, handing out files in collection order
# (--no-loadscope-reorder: xdist's own order is by number of tests, which put the 8-test,
# ~4-minute worker file last and left one process idle for minutes). Longest first lets the
# short files fill in behind them, so both processes end together. Refreshed in the third
# session of 2026-12-04 from measured totals (helper-420: the list was stale, five files of
# 34-58 s missing and four of its "~45-60 s" at 4-20 s, so the two processes ended up to 20 s
# apart): the run is then about half the summed test time plus ~35 s of start-up.
SLOW_FILES = (
    "tests/worker/test_worker.py",  # 116 s: worker subprocesses, kill -9, Redis restart
    "tests/worker/test_chunk_redelivery.py",  # 58 s: Redis down through the publish retries
    "tests/embedders/test_contract.py",  # 55 s: every embedder x the shared checks
    "tests/worker/test_fullstack_worker.py",  # 51 s: CLI subprocesses beside a worker
    "tests/app/test_cli_scripting.py",  # 44 s: closed pipes, CLI subprocesses
    "tests/worker/test_health_under_load.py",  # 35 s: two waves of the worker timeout
    "tests/app/test_env_robustness.py",  # 34 s
    "tests/app/services/test_concurrency.py",  # 33 s: a writer process and readers
    "tests/ui/test_ui_keyboard_a11y.py",  # 30 s: a browser
    "tests/ui/test_browser_a11y.py",
    "tests/ui/test_ui_api.py",
    "tests/ui/test_browser.py",
    "tests/app/services/test_cancel_big_document.py",
    "tests/app/services/test_metadata_move.py",
    "tests/worker/test_wstart_worker.py",
    "tests/app/test_core.py",
    "tests/app/test_index_observability.py",
    "tests/app/test_index_cmd.py",
    "tests/app/api/test_api.py",
    "tests/embedders/test_backbone.py",  # 19 s: two processes convert the GGUF
    "tests/embedders/test_methods.py",
    "tests/app/test_encoding.py",
    "tests/app/services/test_indexing.py",
    "tests/worker/test_broker_stalled.py",
    "tests/worker/test_broker9_idle_release.py",
    "tests/examples/test_rag_example.py",
    "tests/scripts/test_hybrid_eval.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest files first (``SLOW_FILES``), the rest in their usual order (a stable sort)."""
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def minilm():
    from embedders import load_embedder

    return load_embedder("minilm", device="cpu")


@pytest.fixture(scope="session")
def prompteol():
    from embedders import load_embedder

    return load_embedder("backbone-prompteol", device="cpu")


@pytest.fixture(scope="session")
def tiny_inbedder_dir(tmp_path_factory, smollm2_cut) -> Path:
    """An InBedder checkpoint with a fresh rank-2 LoRA on q_proj (untrained, seeded) over
    SmolLM2 cut to two layers: a real model that answers, for code paths that need an
    explainer (batching, progress, naming clusters), not for answer quality."""
    import torch

    from embedders.backbone import LoraSettings
    from embedders.methods.inbedder import InBedderConfig, InBedderEmbedder

    torch.manual_seed(0)
    model = InBedderEmbedder(InBedderConfig(lora=LoraSettings(r=2, target_modules=("q_proj",)),
                                            max_length=64, answer_max_tokens=4, backbone=smollm2_cut),
                             device="cpu")
    return model.save(tmp_path_factory.mktemp("ckpt") / "inbedder")


# Layers the plumbing tests keep of SmolLM2-135M-Instruct's 30 (see ``smollm2_cut``).
CUT_LAYERS = 2


@pytest.fixture(scope="session")
def smollm2_cut(tmp_path_factory) -> str:
    """SmolLM2-135M-Instruct cut to its first ``CUT_LAYERS`` decoder layers: the packaged
    tokenizer, embedding table, layers and final norm, saved as a local backbone directory.

    For tests that check plumbing (batching, padding, save/load, losses and gradients), where
    the full 30 layers would only multiply the layer work of each forward pass by 15 (the
    embeddings and LM head stay as they are); what depends
    on the full model's depth (its trained checkpoints, the quality figures) keeps using it.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from embedders.backbone import DEFAULT_DECODER, resolve_model_path

    src = resolve_model_path(DEFAULT_DECODER)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    model.model.layers = model.model.layers[:CUT_LAYERS]
    model.config.num_hidden_layers = CUT_LAYERS
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[:CUT_LAYERS]
    target = tmp_path_factory.mktemp("backbone") / f"smollm2-{CUT_LAYERS}-layers"
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(src).save_pretrained(target)
    return str(target)


@pytest.fixture
def facet(minilm, tmp_path: Path):
    """A facade over a fresh data folder with the session's minilm and short chunks (64 tokens,
    8 overlap), as the job tests index into (a module's own ``facet`` fixture overrides it)."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.settings import FacetSettings

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8), embedders=cache)
    yield facet
    facet.close()


@pytest.fixture
def minilm_namesake(tmp_path: Path, minilm):
    """Another model in a checkpoint directory named "minilm", as a ``facet train`` output is named
    after its method: minilm reading documents and instructions through other prompts (``note: ``
    before a document, ``Task: ... | `` around an instruction). Real weights, no mock.

    Returns:
        (the directory, the model).
    """
    from embedders.baselines import EncoderMeanEmbedder
    from embedders.contract import PromptConfig

    model = EncoderMeanEmbedder(name="minilm", backbone=minilm.backbone, prompts=PromptConfig(
        document="note: {instruction}{text}", instruction_format="Task: {instruction} | "))
    return model.save(tmp_path / "namesake"), model


# A real file system of another kind, mounted from an image made for the test: exFAT (no hard
# links, names compared without case, as macOS's and Windows' default disks compare them)
# through FUSE. It skips where the image cannot be mounted (root, a loop device, /dev/fuse and
# the exfat-fuse and exfatprogs packages are needed), as CI's machine may not allow.

def _run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


@pytest.fixture
def exfat_folder(tmp_path: Path) -> Iterator[Path]:
    """The root folder of a freshly made 512 MB exFAT disk image, mounted for the test (its
    driver, a ``mount.exfat-fuse`` process given the loop device, may be killed to pull the
    drive out)."""
    tools = ("losetup", "mkfs.exfat", "mount.exfat-fuse", "umount")
    missing = [t for t in tools if shutil.which(t) is None]
    if os.geteuid() != 0 or missing or not os.path.exists("/dev/fuse"):
        pytest.skip(f"an exFAT image cannot be mounted here (root, /dev/fuse, {', '.join(tools)})")
    image, mount = tmp_path / "exfat.img", tmp_path / "mnt"
    mount.mkdir()
    with open(image, "wb") as f:
        f.truncate(512 * 1024 * 1024)  # (sparse here: only what is written takes room)
    made = _run_tool("mkfs.exfat", str(image))
    if made.returncode != 0:
        pytest.skip(f"mkfs.exfat failed: {made.stderr.strip()}")
    # (As root, fuse-exfat mounts a block device only: "Block device required" for the file.)
    loop = _run_tool("losetup", "-f", "--show", str(image))
    if loop.returncode != 0:
        pytest.skip(f"no loop device: {loop.stderr.strip()}")
    device = loop.stdout.strip()
    try:
        mounted = _run_tool("mount.exfat-fuse", device, str(mount))
        if mounted.returncode != 0:
            pytest.skip(f"mount.exfat-fuse failed: {mounted.stderr.strip()}")
        try:
            yield mount
        finally:
            if _run_tool("umount", str(mount)).returncode != 0:  # (its driver killed by the test)
                _run_tool("umount", "-l", str(mount))
    finally:
        _run_tool("losetup", "-d", device)
