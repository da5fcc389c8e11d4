"""Waiting for pyca's GPU work in the apps and the CLI, without touching the GPU on a CPU run."""
from __future__ import annotations

from .. import core as ca


def wait(mem):
    """Waits for the work queued on pyca's current stream when `mem` is device memory. A CPU run returns
    at once: synchronize()'s first call starts a CUDA context, which takes GPU memory (and fails with
    "out of memory" where another process holds it)."""
    if int(mem) == int(ca.MEM_DEVICE):
        ca.synchronize()
