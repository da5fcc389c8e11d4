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
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading

from . import _pickle

__all__ = ["visible_gpus", "local_cluster", "gpu_worker_specs", "open_client", "tree_reduce", "cached_image",
           "worker_addresses", "bytes_sent", "check_workers", "check_cluster", "Terminated", "command_session"]


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


def local_cluster(n_workers=None, device="auto", tasks=None, dashboard=True, threads=None, worker_log=None):
    """An embedded Dask cluster on this machine (returns a distributed SpecCluster / LocalCluster).

    device 'auto' | 'gpu': one worker per visible GPU (n_workers caps the count); 'cpu' (or 'auto'
    with no GPU): n_workers processes (default: one per core, at most `tasks`), each running one task
    at a time with cores // n_workers OpenMP threads (`threads` overrides); n_workers is checked by
    check_workers. worker_log: a file the worker processes write their standard error to (from their
    first instruction: a Ctrl-C that reaches them while they start prints there, not on the terminal)."""
    gpus = visible_gpus() if device in ("auto", "gpu") else []
    if device == "gpu" and not gpus:
        from . import core

        raise core.CudaError("pyca.distributed: device 'gpu' requested but no GPU is visible "
                             "(CUDA_VISIBLE_DEVICES / nvidia-smi)")
    with _stderr_to(worker_log):
        return _make_cluster(n_workers, gpus, tasks, dashboard, threads)


def _make_cluster(n_workers, gpus, tasks, dashboard, threads):
    from distributed import LocalCluster, Scheduler, SpecCluster

    dash = ":0" if dashboard else None
    cores = os.cpu_count() or 1
    if gpus:
        n = len(gpus) if n_workers is None else max(1, min(int(n_workers), len(gpus)))
        workers = gpu_worker_specs(gpus[:n], str(threads or max(1, cores // n)))
        sched = {"cls": Scheduler, "options": {"dashboard": bool(dashboard), "dashboard_address": dash}}
        return SpecCluster(scheduler=sched, workers=workers, name="pyca-gpu", silence_logs=40)
    n = check_workers(n_workers, tasks) if n_workers is not None else max(1, min(cores, tasks or cores))
    omp = str(threads or max(1, cores // n))
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=dash or ":0",
                        scheduler_kwargs={"dashboard": bool(dashboard)},
                        silence_logs=40, env={"OMP_NUM_THREADS": omp},
                        name="pyca-cpu")


def check_workers(n_workers, tasks=None, flag="--workers"):
    """The worker processes of an embedded CPU cluster for `n_workers` asked: an integer in
    [1, cores] (ValueError in one line otherwise: more processes than cores only compete for them),
    and no more than `tasks` (a worker without a task is not started)."""
    cores = os.cpu_count() or 1
    if isinstance(n_workers, bool) or int(n_workers) != n_workers or not 1 <= int(n_workers) <= cores:
        raise ValueError(f"{flag} must be an integer from 1 to {cores} (this machine's cores: each worker process "
                         f"runs one registration at a time on its share of them), got {n_workers}")
    return max(1, min(int(n_workers), tasks or int(n_workers)))


def check_cluster(n_workers, scheduler=None, client=None, tasks=None, prog="pyca.distributed"):
    """Before any work: n_workers sizes the embedded cluster only (refused in one line with an existing
    cluster, a scheduler address or a client, whose own workers run), and check_workers' rule. Returns the
    workers to start, or None."""
    if n_workers is None:
        return None
    if scheduler is not None or client is not None:
        raise ValueError(f"{prog}: --workers (n_workers) sizes the embedded cluster; an existing cluster "
                         f"({'--scheduler' if scheduler is not None else 'client'}) runs its own workers")
    return check_workers(n_workers, tasks)


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


# What a run says when Dask serves no dashboard (bokeh missing).
NO_DASHBOARD = "no dashboard (it needs bokeh: pip install bokeh)"


def _dashboard(client):
    import importlib.util

    if importlib.util.find_spec("bokeh") is None:
        return None  # distributed serves no dashboard without bokeh
    try:
        return client.dashboard_link
    except Exception:  # noqa: BLE001 - no dashboard is not an error
        return None


@contextlib.contextmanager
def open_client(scheduler=None, client=None, n_workers=None, device="auto", tasks=None, dashboard=True,
                worker_log=None):
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
    cluster = local_cluster(n_workers=n_workers, device=device, tasks=tasks, dashboard=dashboard,
                            worker_log=worker_log)
    c = None
    try:
        c = Client(cluster)
        c.wait_for_workers(len(cluster.workers), timeout=120)
        yield c, _info(c, f"embedded {cluster.name} cluster")
    finally:
        _close_quietly(c, cluster, worker_log)


def _close_quietly(client, cluster, log=None):
    """Closes an embedded cluster, whatever state it is in: what Dask raises or prints while it shuts
    down (workers still starting, a Ctrl-C meanwhile) goes to `log` (or nowhere), never to the caller; a
    Ctrl-C during the close is raised once it is done."""
    interrupted = None
    with _stderr_to(log or os.devnull):
        for obj in (client, cluster):
            if obj is None:
                continue
            try:
                obj.close()
            except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - shutting down: nothing left to save
                if isinstance(e, KeyboardInterrupt):
                    interrupted = e
    if interrupted is not None:
        raise interrupted


@contextlib.contextmanager
def _stderr_to(path):
    """File descriptor 2 (this process's and every process started meanwhile) appended to `path` for the
    duration of the block (None: unchanged). Only from the main thread."""
    if path is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


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


# ------------------------------------------------------------------------------------------------
# The command line's session around Dask: one line for whatever happens
class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread (so that files being written are discarded as on Ctrl-C)."""


def _raise_terminated(signum, frame):
    raise Terminated()


_DASK_LOGGERS = ("distributed", "asyncio", "tornado", "bokeh")


@contextlib.contextmanager
def command_session(cmd, out=None):
    """The session of a command that runs on Dask (`pyca atlas`, `pyca register-batch`): yields a dict
    whose 'worker_log' is the file the embedded cluster's processes write their standard error to (pass
    it to open_client). Dask's own log records are silenced (they are not the command's messages), SIGTERM
    raises Terminated, and when the block ends by an exception, the temporary folders of files being
    written under `out` (.pyca-tmp-*, also those of killed workers) are removed; the log is removed when
    nothing was written to it. The caller turns the exception into its one line (pyca/apps/_atlas_cli.py,
    run_command)."""
    import tempfile

    fd, log = tempfile.mkstemp(prefix=f"pyca-{cmd.split()[-1]}-workers-", suffix=".log")
    os.close(fd)
    for n in _DASK_LOGGERS:
        logging.getLogger(n).setLevel(logging.CRITICAL + 1)
    main = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
    session = {"worker_log": log}
    ok = False
    try:
        yield session
        ok = True
    finally:
        if main:
            signal.signal(signal.SIGTERM, old_term)
        if not ok and out is not None:
            sweep_temporary(out)
        if os.path.isfile(log) and os.path.getsize(log) == 0:
            os.remove(log)
        elif ok:
            with contextlib.suppress(OSError):
                os.remove(log)
        else:
            session["log_kept"] = log
        # Dask's loggers stay silent: its objects may still report their shutdown as the interpreter
        # exits, after this command's last line.


def sweep_temporary(out):
    """Removes every .pyca-tmp-* folder under `out` (files being written when a run stopped)."""
    from ._files import TMP_PREFIX

    if not out or not os.path.isdir(out):
        return
    for root, dirs, _files in os.walk(out):
        for d in list(dirs):
            if d.startswith(TMP_PREFIX):
                shutil.rmtree(os.path.join(root, d), ignore_errors=True)
                dirs.remove(d)
