"""Running pyca work on Dask (``dask.distributed``): a cluster sized to the machine, tree reductions,
per-worker input caching and progress over many tasks. Used by pyca.apps.atlas and pyca.apps.batch.

    from pyca.distributed import open_client
    with open_client() as (client, info):            # an embedded LocalCluster sized to this machine
        ...
    with open_client(scheduler="tcp://host:8786") as (client, info):   # any existing cluster
        ...

The embedded cluster has one worker process per visible GPU, each pinned to its GPU with
CUDA_VISIBLE_DEVICES (its GPU listed first, as dask-cuda's LocalCUDACluster does), one thread each;
without a GPU, worker processes over the CPU cores (one task thread each, the cores shared out as
OpenMP threads). Nothing here is a scheduler of pyca's own: tasks, retries, data movement and worker
replacement are Dask's. docs/design/distributed.md explains the task graph.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess

from . import _pickle

__all__ = ["visible_gpus", "local_cluster", "gpu_worker_specs", "open_client", "tree_reduce", "cached_image",
           "worker_addresses", "bytes_sent"]


def visible_gpus():
    """The GPU ids this process may use, found without initialising CUDA here: CUDA_VISIBLE_DEVICES
    when set, else one id per line of ``nvidia-smi -L``, else [] (also when pyca has no CUDA backend)."""
    from . import core

    if not getattr(core, "built_with_cuda", lambda: False)():
        return []
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]


def local_cluster(n_workers=None, device="auto", tasks=None, dashboard=True, threads=None):
    """An embedded Dask cluster on this machine (returns a distributed SpecCluster / LocalCluster).

    device 'auto' | 'gpu': one worker per visible GPU (n_workers caps the count); 'cpu' (or 'auto'
    with no GPU): n_workers processes (default: one per core, at most `tasks`), each running one task
    at a time with cores // n_workers OpenMP threads (`threads` overrides)."""
    from distributed import LocalCluster, Scheduler, SpecCluster

    gpus = visible_gpus() if device in ("auto", "gpu") else []
    if device == "gpu" and not gpus:
        from . import core

        raise core.CudaError("pyca.distributed: device 'gpu' requested but no GPU is visible "
                             "(CUDA_VISIBLE_DEVICES / nvidia-smi)")
    dash = ":0" if dashboard else None
    cores = os.cpu_count() or 1
    if gpus:
        n = len(gpus) if n_workers is None else max(1, min(int(n_workers), len(gpus)))
        workers = gpu_worker_specs(gpus[:n], str(threads or max(1, cores // n)))
        sched = {"cls": Scheduler, "options": {"dashboard": bool(dashboard), "dashboard_address": dash}}
        return SpecCluster(scheduler=sched, workers=workers, name="pyca-gpu", silence_logs=40)
    n = int(n_workers) if n_workers else max(1, min(cores, tasks or cores))
    omp = str(threads or max(1, cores // n))
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=dash or ":0",
                        scheduler_kwargs={"dashboard": bool(dashboard)},
                        silence_logs=40, env={"OMP_NUM_THREADS": omp},
                        name="pyca-cpu")


def gpu_worker_specs(gpus, omp="1"):
    """SpecCluster worker specs: one Nanny per GPU id, one task thread, CUDA_VISIBLE_DEVICES listing
    its own GPU first (device 0 in the worker is its GPU), a 'GPU' resource of 1."""
    from distributed import Nanny

    workers = {}
    for i, gpu in enumerate(gpus):
        order = list(gpus[i:]) + list(gpus[:i])
        workers[f"gpu-{gpu}"] = {"cls": Nanny, "options": {
            "nthreads": 1, "resources": {"GPU": 1}, "name": f"gpu-{gpu}", "silence_logs": 40,
            "env": {"CUDA_VISIBLE_DEVICES": ",".join(order), "OMP_NUM_THREADS": omp}}}
    return workers


def _dashboard(client):
    import importlib.util

    if importlib.util.find_spec("bokeh") is None:
        return None  # distributed serves no dashboard without bokeh
    try:
        return client.dashboard_link
    except Exception:  # noqa: BLE001 - no dashboard is not an error
        return None


@contextlib.contextmanager
def open_client(scheduler=None, client=None, n_workers=None, device="auto", tasks=None, dashboard=True):
    """Yields (client, info). `client` (a distributed.Client) or `scheduler` (an address) use an
    existing cluster, which is left running; otherwise an embedded cluster (local_cluster) is started
    and closed at the end. info: scheduler address, dashboard link (or None), kind of cluster."""
    from distributed import Client

    _pickle.register_dask()
    if client is not None and scheduler is not None:
        raise ValueError("pyca.distributed: give client= or scheduler=, not both")
    if client is not None:
        yield client, _info(client, "given client")
        return
    if scheduler is not None:
        try:
            c = Client(scheduler, timeout="20s")
        except OSError as e:
            raise ConnectionError(f"cannot connect to the Dask scheduler at {scheduler!r}: {e}") from None
        try:  # workers register pyca's serializers when they import pyca (pyca/_pickle.py)
            yield c, _info(c, f"existing cluster at {scheduler}")
        finally:
            c.close()
        return
    cluster = local_cluster(n_workers=n_workers, device=device, tasks=tasks, dashboard=dashboard)
    c = Client(cluster)
    try:
        c.wait_for_workers(len(cluster.workers), timeout=120)
        yield c, _info(c, f"embedded {cluster.name} cluster")
    finally:
        c.close()
        cluster.close()


def worker_addresses(client):
    """Sorted addresses of the cluster's workers now."""
    return sorted(_workers(client))


def _takes_n_workers():
    import inspect

    from distributed import Client

    return "n_workers" in inspect.signature(Client.scheduler_info).parameters


def _workers(client):
    # Recent distributed lists only 5 workers unless told otherwise.
    return client.scheduler_info(**({"n_workers": -1} if _takes_n_workers() else {}))["workers"]


def _info(client, kind):
    workers = _workers(client)
    return {"kind": kind, "scheduler": client.scheduler.address, "dashboard": _dashboard(client),
            "workers": [{"address": a, "name": str(w.get("name")), "nthreads": w.get("nthreads"),
                         "resources": w.get("resources", {})} for a, w in sorted(workers.items())]}


def _sent(dask_worker):
    return int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0))


def bytes_sent(client):
    """Bytes the workers have sent so far (task results to other workers and to clients), summed over
    the workers; None when the cluster does not say (distributed's per-worker counter, which starts
    again at 0 when a worker restarts)."""
    try:
        return sum(client.run(_sent).values())
    except Exception:  # noqa: BLE001 - a measurement, never a failure
        return None


# ------------------------------------------------------------------------------------------------
def tree_reduce(client, futures, combine, groups=None, key=None):
    """One future holding combine(...) of all `futures`, built as a binary tree of Dask tasks.

    groups (one label per future, e.g. the worker address a future was pinned to) makes the tree
    reduce inside each group first, on that group's worker (nothing moves), and only then across
    groups: W workers move W - 1 partial results, whatever the number of futures. The shape of the
    tree depends only on the order of `futures` and `groups`, so the result is reproducible."""
    if not futures:
        raise ValueError("tree_reduce: nothing to reduce")
    labels = list(groups) if groups is not None else [None] * len(futures)
    order = []
    for g in dict.fromkeys(labels):  # groups in first-seen order
        order.append((g, [f for f, lab in zip(futures, labels) if lab == g]))
    n = [0]

    def pairwise(items, worker):
        while len(items) > 1:
            nxt = []
            for i in range(0, len(items) - 1, 2):
                n[0] += 1
                kw = {"workers": [worker], "allow_other_workers": True} if worker else {}
                nxt.append(client.submit(combine, items[i], items[i + 1], pure=False,
                                         key=f"{key or 'reduce'}-{n[0]}", **kw))
            if len(items) % 2:
                nxt.append(items[-1])
            items = nxt
        return items[0]

    partials = [pairwise(items, g) for g, items in order]
    return pairwise(partials, None)


# ------------------------------------------------------------------------------------------------
# A per-process cache of input images: a worker reads each file once and keeps it across iterations.
_CACHE = {}
_CACHE_BYTES = [0]
_CACHE_LIMIT = int(os.environ.get("PYCA_WORKER_CACHE_MB", "2048")) * 2 ** 20


def cached_image(path):
    """pyca.io.load_image(path) (host memory), read once per process while the file is unchanged."""
    from . import io as pio

    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
    im = _CACHE.get(key)
    if im is None:
        im = pio.load_image(path)
        nbytes = 4 * im.grid().nVox()
        while _CACHE and _CACHE_BYTES[0] + nbytes > _CACHE_LIMIT:  # oldest first
            old = next(iter(_CACHE))
            _CACHE_BYTES[0] -= 4 * _CACHE.pop(old).grid().nVox()
        _CACHE[key] = im
        _CACHE_BYTES[0] += nbytes
    return im
