"""`facet worker` raises its soft open-files limit before its pool forks, as `facet serve`
does (tests/app/test_open_files_limit.py): a pool process holds the store's shard files and the
broker's connections, and at a soft limit of 1024 it kept that. A real worker on a real Redis,
started with a soft limit of 256; the pool process's limit read from /proc."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.test_open_files_limit import EXPECTED, soft_open_files

pytestmark = pytest.mark.skipif(not Path("/proc/self/limits").exists() or EXPECTED <= 256,
                                reason="needs Linux's /proc and a hard open-files limit over 256")


def test_a_workers_pool_process_inherits_the_raised_limit(stack) -> None:
    worker = stack.start_worker("query", open_files=256)
    children = Path(f"/proc/{worker.proc.pid}/task/{worker.proc.pid}/children").read_text().split()
    assert children, "the worker started no pool process"
    assert soft_open_files(worker.proc.pid) == EXPECTED
    assert [soft_open_files(int(pid)) for pid in children] == [EXPECTED] * len(children)
