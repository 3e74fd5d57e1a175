"""docker-compose.yml validates against the compose schema (no Docker engine here) and says
what the deployment needs: GPU workers, Redis with AOF, healthchecks, named volumes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    if not Path(exe).exists():
        pytest.skip("check-jsonschema is not installed (the dev extra)")
    return subprocess.run([exe, "--builtin-schema", "vendor.compose-spec", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_compose_file_validates_against_the_compose_schema() -> None:
    done = _validate(COMPOSE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_invalid_compose_file_is_refused(tmp_path: Path) -> None:
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["worker"]["healthcheck"]["retries"] = "three"  # must be a number
    broken["services"]["redis"]["restrat"] = "always"  # a misspelt key
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    assert _validate(path).returncode != 0


def test_the_stack_has_what_the_deployment_needs() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    services = spec["services"]
    assert set(services) == {"qdrant", "redis", "postgres", "worker", "api"}
    assert all("healthcheck" in s for s in services.values())
    assert services["qdrant"]["image"].startswith("qdrant/qdrant:v1.")
    assert "--appendonly" in services["redis"]["command"]
    gpu = services["worker"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["capabilities"] == ["gpu"] and gpu["count"] == 1
    assert services["worker"]["command"][:4] == ["facet", "worker", "--queues", "index,query"]
    assert services["api"]["command"][:2] == ["facet", "serve"]
    env = services["worker"]["environment"]
    assert {"FACET_BROKER_URL", "FACET_QDRANT_URL", "FACET_DATABASE_URL"} <= set(env)
    assert {"qdrant-data", "redis-data", "model-cache"} <= set(spec["volumes"])
    assert (ROOT / "Dockerfile").is_file()


def test_nothing_is_published_beyond_this_host_by_default() -> None:
    """The API (no key by default) and Qdrant (no key) were published on every interface."""
    import re

    services = yaml.safe_load(COMPOSE.read_text())["services"]
    published = {name: spec.get("ports", []) for name, spec in services.items() if spec.get("ports")}
    assert set(published) == {"api", "qdrant"}
    # Each by a variable of its own: publishing the API (with its key) on every interface
    # published a keyless Qdrant too while both followed FACET_PUBLISH_HOST.
    variables = {"api": "FACET_PUBLISH_HOST", "qdrant": "FACET_QDRANT_PUBLISH_HOST"}
    for name, ports in published.items():
        for port in ports:
            default_host = re.fullmatch(r"\$\{(FACET_[A-Z_]+):-([^}]*)\}:\d+:\d+", str(port))
            assert default_host and default_host.group(2) == "127.0.0.1", (name, port)
            assert default_host.group(1) == variables[name], (name, port)
