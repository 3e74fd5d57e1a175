"""Where the shipped checkpoints are found: the checkout's checkpoints/, the copy an installed
wheel put under <prefix>/share/facet-search/checkpoints, and the docs' ``checkpoints/NAME`` paths
from any working directory."""

from __future__ import annotations

import glob
import logging
import site
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from embedders import registry

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT_CHECKPOINTS = ROOT / "checkpoints"
INSTALLED = "share/facet-search/checkpoints"  # under the environment's prefix


def _installed_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make registry.py look installed (site-packages/embedders/registry.py, no checkout's
    checkpoints/ beside the packages) and return a prefix whose share/facet-search/checkpoints
    holds the real shipped checkpoints (a link: read only)."""
    package = tmp_path / "site-packages" / "embedders"
    package.mkdir(parents=True)
    monkeypatch.setattr(registry, "__file__", str(package / "registry.py"))
    prefix = tmp_path / "prefix"
    (prefix / INSTALLED).parent.mkdir(parents=True)
    (prefix / INSTALLED).symlink_to(CHECKOUT_CHECKPOINTS, target_is_directory=True)
    return prefix


def test_an_installed_package_finds_the_checkpoints_it_shipped(tmp_path, monkeypatch):
    """A `pip install` of Facet had none of the trained names (`facet embedders` listed only the
    baselines, `facet cluster` failed by default): the registry looked only beside the packages."""
    shipped = sorted(p.name for p in CHECKOUT_CHECKPOINTS.iterdir() if registry.is_checkpoint_dir(p))
    assert shipped
    try:
        with monkeypatch.context() as patch:
            prefix = _installed_layout(tmp_path, patch)
            patch.setattr(sys, "prefix", str(prefix))
            assert registry.default_checkpoint_dir() == prefix / INSTALLED
            registry.set_checkpoint_dir(None)  # registers again, from the installed copy
            found = {i.name: i for i in registry.list_embedders() if i.kind == "checkpoint"}
            assert sorted(found) == shipped
            assert found["causal-eos"].path == (CHECKOUT_CHECKPOINTS / "causal-eos").resolve()
            # FACET_CHECKPOINT_DIR (the settings call set_checkpoint_dir) still comes first.
            registry.set_checkpoint_dir(tmp_path / "mine")
            assert registry.checkpoint_dir() == tmp_path / "mine"
            assert "causal-eos" not in registry.embedder_names()
    finally:
        registry.set_checkpoint_dir(None)
    assert registry.default_checkpoint_dir() == CHECKOUT_CHECKPOINTS  # the checkout's own, first


def test_a_system_python_finds_them_where_its_pip_put_the_data_files(tmp_path, monkeypatch):
    """Debian's and Fedora's system Python: sys.prefix is /usr, but `sudo pip install` puts the
    data files under /usr/local, the default scheme's data path; none of the names was found."""
    data = _installed_layout(tmp_path, monkeypatch)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "usr"))
    monkeypatch.setattr(site, "USER_BASE", str(tmp_path / "no-user-base"))
    real_get_path = sysconfig.get_path
    monkeypatch.setattr(sysconfig, "get_path",
                        lambda name, *a, **k: str(data) if name == "data" else real_get_path(name, *a, **k))
    assert registry.default_checkpoint_dir() == data / INSTALLED


def test_a_user_install_finds_them_under_the_user_base(tmp_path, monkeypatch):
    """`pip install --user` puts the data files under the user base, not sys.prefix."""
    prefix = _installed_layout(tmp_path, monkeypatch)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "empty-prefix"))
    monkeypatch.setattr(site, "USER_BASE", str(prefix))
    assert registry.default_checkpoint_dir() == prefix / INSTALLED


def test_the_wheel_ships_every_checkpoint_file():
    """Every file under checkpoints/ is installed by pyproject.toml's data-files into
    share/facet-search/checkpoints/<its folder> (data-files flattens each pattern into one folder:
    a new checkpoint needs its own entry)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data_files = config["tool"]["setuptools"].get("data-files", {})
    installed: dict[str, str] = {}  # source file -> destination folder, as setuptools globs them
    for destination, patterns in data_files.items():
        for pattern in patterns:
            for source in glob.glob(pattern, root_dir=ROOT):
                if (ROOT / source).is_file():
                    installed[Path(source).as_posix()] = destination
    files = sorted(p.relative_to(ROOT) for p in CHECKOUT_CHECKPOINTS.rglob("*") if p.is_file())
    assert files
    for file in files:
        folder = file.parent.relative_to("checkpoints").as_posix()
        assert installed.get(file.as_posix()) == f"{INSTALLED}/{folder}", file


def test_checkpoints_path_loads_the_shipped_checkpoint_from_any_directory(tmp_path, monkeypatch, caplog):
    """The docs and the results files' recorded commands say `checkpoints/gircse[soft_tokens=2]`:
    from any folder but the checkout's root it was an unknown embedder. It now loads the shipped
    folder, the same model with the same identity (the eval caches' key) as from the root."""
    from embedders import load_embedder

    monkeypatch.chdir(ROOT)
    from_root = load_embedder("checkpoints/causal-eos", device="cpu").identity
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="embedders.registry"):
        model = load_embedder("checkpoints/causal-eos", device="cpu")
    assert model.identity == from_root
    assert "loading the shipped" in caplog.text and str(CHECKOUT_CHECKPOINTS / "causal-eos") in caplog.text

    spec = "checkpoints/gircse[soft_tokens=2]"
    registry.check_embedder(spec)
    assert registry.saved_name(spec) == "gircse"
    assert registry.portable_spec(spec) == f"{CHECKOUT_CHECKPOINTS / 'gircse'}[soft_tokens=2]"
    assert registry.loads_registered("checkpoints/causal-eos", "causal-eos")
    assert not registry.loads_registered("checkpoints/causal-eos[max_length=64]", "causal-eos")

    # A checkpoints/ folder of the working directory's own wins, as any path does.
    mine = tmp_path / "checkpoints" / "causal-eos"
    mine.mkdir(parents=True)
    (mine / "facet_config.json").write_text((CHECKOUT_CHECKPOINTS / "causal-eos" / "facet_config.json").read_text())
    assert registry.portable_spec("checkpoints/causal-eos") == str(mine)
    assert not registry.loads_registered("checkpoints/causal-eos", "causal-eos")


def test_a_missing_checkpoints_path_is_still_unknown(tmp_path, monkeypatch):
    from embedders import UnknownEmbedderError, load_embedder

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownEmbedderError, match="unknown embedder 'checkpoints/no-such'"):
        load_embedder("checkpoints/no-such")


def test_the_docker_context_leaves_out_what_git_ignores():
    """`COPY . .` then `pip install .` in the Dockerfile: a stale build/lib went into the image
    (a deleted module was still installed), with caches and run outputs along. Every .gitignore
    entry is left out of the build context too (a folder by itself or by a folder above it)."""

    def patterns(name: str) -> set[str]:
        lines = (line.strip() for line in (ROOT / name).read_text().splitlines())
        return {line.rstrip("/") for line in lines if line and not line.startswith("#")}

    docker = patterns(".dockerignore")
    shipped = [
        entry
        for entry in sorted(patterns(".gitignore") | {"logs", ".benchmarks"})
        if not docker & ({entry, f"**/{entry}"} | {str(p) for p in Path(entry).parents if str(p) != "."})
    ]
    assert shipped == [], "in the Docker build context"


def test_a_registered_name_is_the_registered_checkpoint_for_every_command(tmp_path, monkeypatch,
                                                                          minilm, caplog):
    """`facet train --out causal-eos` left a folder causal-eos in the working directory; then
    `facet embed/index/search/eval -e causal-eos` loaded the shipped checkpoint while `facet soup
    causal-eos` and `--init-from causal-eos` took the folder, without a word. One rule now: a
    bare registered name is the registered checkpoint, said when a folder of that name is left
    aside; `./causal-eos` is the folder."""
    from app.commands.train import _resolve_checkpoint
    from embedders.baselines import EncoderMeanEmbedder
    from embedders.contract import PromptConfig

    def save(where: Path, prompt: str) -> Path:
        model = EncoderMeanEmbedder(name="notes", backbone=minilm.backbone,
                                    prompts=PromptConfig(document=prompt + "{instruction}{text}"))
        return model.save(where / "notes")

    registered = save(tmp_path / "mine", "registered: ")
    local = save(tmp_path / "cwd", "local: ")
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(registry, "_SHADOWED_SAID", set())
    try:
        registry.set_checkpoint_dir(tmp_path / "mine")
        with caplog.at_level(logging.WARNING, logger="embedders.registry"):
            assert _resolve_checkpoint("notes", "--init-from")[0].resolve() == registered.resolve()
            loaded = registry.load_embedder("notes", device="cpu")
        assert loaded.identity == registry.load_checkpoint(registered).identity != \
            registry.load_checkpoint(local).identity
        said = [r.getMessage() for r in caplog.records if "is not loaded" in r.getMessage()]
        assert said == [f"'notes' is the registered checkpoint {registered.resolve()}; the checkpoint "
                        f"folder ./notes in {tmp_path / 'cwd'} is not loaded: write ./notes to load it"]
        assert _resolve_checkpoint("./notes", "--init-from")[0].resolve() == local.resolve()
        # ... and recorded so (a train log's init_from, a soup's ingredients): "notes" named the
        # registered one (the verification round).
        assert registry.shown_path(_resolve_checkpoint("./notes", "--init-from")[0]) == "./notes"
        assert registry.shown_path(registered) == str(registered)
        assert registry.load_embedder("./notes", device="cpu").identity == \
            registry.load_checkpoint(local).identity
    finally:
        registry.set_checkpoint_dir(None)
