"""Permission bits that count for root too: the tests' own ``permissions_count()``.

The CI and this VM run the suite as root, whom unreadable folders do not stop. Within the block
this thread's DAC capabilities are dropped from its effective set (as `capsh --drop` does for a
command) and given back after; an inline index run walks its source in the calling thread."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator

import pytest

_CAP_VERSION_3 = 0x20080522
_DAC = (1 << 1) | (1 << 2) | (1 << 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


@contextlib.contextmanager
def permissions_count() -> Iterator[None]:
    """Within it, this thread is refused what the permission bits refuse (nothing changes for a
    user who is not root); skips the test where the capabilities cannot be changed."""
    if os.geteuid() != 0:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        pytest.skip("capget failed: cannot drop root's permission overrides")
    saved = data[0].effective
    data[0].effective = saved & ~_DAC
    if libc.capset(ctypes.byref(header), data) != 0:
        pytest.skip("capset failed: cannot drop root's permission overrides")
    try:
        yield
    finally:
        data[0].effective = saved
        assert libc.capset(ctypes.byref(header), data) == 0
