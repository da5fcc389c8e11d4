"""CUDA graphs of pyca's device work: record a sequence of pyca operations and kernels once, replay it
with one launch. For loops whose every step is a chain of small launches (a band-limited geodesic on
a 64^3 grid: about 60 launches of a few microseconds each per iteration), where the host's time per
launch, not the device's, sets the pace.

    s = Stream()                       # a stream of pyca's own (capture needs one: not the legacy stream 0)
    with s:                            # pyca's current stream while inside
        step()                         # once eagerly: compiles kernels, makes cuFFT plans for this stream
        g = Graph(step)                # records step()'s device work (step() runs no device work now)
        for _ in range(n):
            g.launch()                 # replays it on s

What may be recorded: device work queued on pyca's current stream with the same arrays and scalars
each time (the graph keeps pointers and values as they were when recorded). What may not: anything
that waits for the device or reads a result on the host (ca.Sum2, ca.Dot, float(...)): the recording
fails with the driver's error, and nothing is replayed. The driver API is reached through ctypes
(libcuda.so.1), so this needs no library beyond the driver.
"""
from __future__ import annotations

import ctypes
import weakref

from . import core as _ca

__all__ = ["Stream", "Graph", "available"]

_lib = None
_STREAM_NON_BLOCKING = 1
_CAPTURE_THREAD_LOCAL = 1
_EVENT_DISABLE_TIMING = 2
_streams: "weakref.WeakValueDictionary[int, Stream]" = weakref.WeakValueDictionary()  # handle -> Stream


def _cu():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        P = ctypes.c_void_p
        for name, args in (("cuStreamCreate", [ctypes.POINTER(P), ctypes.c_uint]),
                           ("cuStreamDestroy_v2", [P]),
                           ("cuStreamSynchronize", [P]),
                           ("cuStreamBeginCapture_v2", [P, ctypes.c_int]),
                           ("cuStreamEndCapture", [P, ctypes.POINTER(P)]),
                           ("cuGraphInstantiateWithFlags", [ctypes.POINTER(P), P, ctypes.c_ulonglong]),
                           ("cuGraphGetNodes", [P, P, ctypes.POINTER(ctypes.c_size_t)]),
                           ("cuGraphLaunch", [P, P]),
                           ("cuGraphExecDestroy", [P]),
                           ("cuGraphDestroy", [P]),
                           ("cuCtxGetCurrent", [ctypes.POINTER(P)]),
                           ("cuEventCreate", [ctypes.POINTER(P), ctypes.c_uint]),
                           ("cuEventRecord", [P, P]),
                           ("cuEventDestroy_v2", [P]),
                           ("cuStreamWaitEvent", [P, P, ctypes.c_uint]),
                           ("cuGetErrorName", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        _lib = lib
    return _lib


def _check(r, what):
    if r != 0:
        name = ctypes.c_char_p()
        _cu().cuGetErrorName(r, ctypes.byref(name))
        raise RuntimeError(f"pyca.cuda_graph: {what} failed: {name.value.decode() if name.value else r}")


def available():
    """Whether the CUDA driver can be reached and a context is current (pyca has used the device)."""
    try:
        ctx = ctypes.c_void_p()
        return _cu().cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and bool(ctx.value)
    except OSError:
        return False


def _order(before, after):
    """Work queued on stream `after` from now on waits for the work queued on `before` so far (an event)."""
    ev = ctypes.c_void_p()
    _check(_cu().cuEventCreate(ctypes.byref(ev), _EVENT_DISABLE_TIMING), "cuEventCreate")
    try:
        _check(_cu().cuEventRecord(ev, ctypes.c_void_p(before)), "cuEventRecord")
        _check(_cu().cuStreamWaitEvent(ctypes.c_void_p(after), ev, 0), "cuStreamWaitEvent")
    finally:
        _cu().cuEventDestroy_v2(ev)  # (released once the wait is done)


class Stream:
    """A non-blocking CUDA stream; `with` it: pyca's current stream inside (the previous one after). Entering
    makes it wait for the work queued on the previous stream, leaving makes the previous stream wait for
    its work (a non-blocking stream does not order itself against the legacy stream 0 otherwise)."""

    def __init__(self):
        if not available():
            raise RuntimeError("pyca.cuda_graph: no CUDA context is current (use the device with pyca first)")
        self.handle = ctypes.c_void_p()
        _check(_cu().cuStreamCreate(ctypes.byref(self.handle), _STREAM_NON_BLOCKING), "cuStreamCreate")
        self._prev = []
        _streams[self.handle.value] = self

    def __enter__(self):
        prev = _ca.current_stream()
        _order(prev, self.handle.value)
        self._prev.append(prev)
        _ca.set_current_stream(self.handle.value)
        return self

    def __exit__(self, *exc):
        prev = self._prev.pop()
        _ca.set_current_stream(prev)
        _order(self.handle.value, prev)

    def __del__(self):
        try:
            if self.handle.value:
                _cu().cuStreamDestroy_v2(self.handle)  # (its queued work still completes)
        except Exception:  # noqa: S110 (interpreter shutdown)
            pass

    def synchronize(self):
        _check(_cu().cuStreamSynchronize(self.handle), "cuStreamSynchronize")


class Graph:
    """The device work fn() queues on pyca's current stream (which must be a Stream's), recorded once;
    launch() replays it there, and only while that stream is pyca's current one (inside its `with`). nodes: the number of nodes the graph holds (kernels, copies, ...)."""

    def __init__(self, fn):
        s = _ca.current_stream()
        if not s:
            raise RuntimeError("pyca.cuda_graph: recording needs pyca's current stream to be a Stream's, not 0")
        self._stream = ctypes.c_void_p(s)
        self._owner = _streams.get(s)  # (a Stream's: kept alive while this graph can be launched on it)
        self._graph, self._exec = ctypes.c_void_p(), ctypes.c_void_p()
        _check(_cu().cuStreamBeginCapture_v2(self._stream, _CAPTURE_THREAD_LOCAL), "cuStreamBeginCapture")
        err = None
        try:
            fn()
        except Exception as e:  # the recording must end either way
            err = e
        r = _cu().cuStreamEndCapture(self._stream, ctypes.byref(self._graph))
        if err is not None:
            raise RuntimeError(f"pyca.cuda_graph: recording failed: {err}") from err
        _check(r, "cuStreamEndCapture (recording)")
        n = ctypes.c_size_t(0)
        _check(_cu().cuGraphGetNodes(self._graph, None, ctypes.byref(n)), "cuGraphGetNodes")
        self.nodes = int(n.value)
        _check(_cu().cuGraphInstantiateWithFlags(ctypes.byref(self._exec), self._graph, 0), "cuGraphInstantiate")

    def launch(self):
        if _ca.current_stream() != self._stream.value:  # (unordered against the work around it otherwise)
            raise RuntimeError("pyca.cuda_graph: launch() outside the Stream it was recorded on: enter it first "
                               "(`with stream:`)")
        _check(_cu().cuGraphLaunch(self._exec, self._stream), "cuGraphLaunch")

    def __del__(self):
        try:
            if self._exec.value:
                _cu().cuGraphExecDestroy(self._exec)
            if self._graph.value:
                _cu().cuGraphDestroy(self._graph)
        except Exception:  # noqa: S110 (interpreter shutdown)
            pass
