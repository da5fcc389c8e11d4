"""Waiting for pyca's GPU work in the apps and the CLI, without touching the GPU on a CPU run."""
from __future__ import annotations

from .. import core as ca


def wait(mem):
    """Waits for the work queued on pyca's current stream when `mem` is device memory. A CPU run returns
    at once: it queued nothing there, and in a process that also runs GPU work it must not wait for
    that (its times would include it). (synchronize() itself starts no CUDA context in a process that
    has none: runtime.h.)"""
    if int(mem) == int(ca.MEM_DEVICE):
        ca.synchronize()
