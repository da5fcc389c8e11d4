"""``ca.on_device(mapping)``: a block during which pyca arrays live in device memory, with OpenMP-style
map types (the Cython offload proposal's data context, ../shared/seeds):

    "to"      copied to the device at entry; the host data is left as it was at exit
    "from"    device memory allocated at entry (not copied); copied back to the host at exit
    "tofrom"  copied in at entry and back at exit
    "alloc"   device memory only: nothing copied either way

Each object keeps its identity: inside the block it *is* a MEM_DEVICE array (so dispatched
operations and kernels run on the GPU), and at exit it gets its original memory (type and buffer)
back, also when the block raises (then nothing is copied back: the host keeps its data from before
the block). An object already in device memory is left alone, so nested blocks copy nothing twice.
"""
from __future__ import annotations

__all__ = ["on_device", "MAP_TYPES"]

MAP_TYPES = ("to", "from", "tofrom", "alloc")


def _core():
    from .. import core

    return core


def _pairs(mapping):
    core = _core()
    items = list(mapping.items()) if isinstance(mapping, dict) else list(mapping)
    out = []
    for item in items:
        try:
            obj, mode = item
        except (TypeError, ValueError):
            raise TypeError("pyca.on_device: give a dict {array: map type} or (array, map type) pairs") from None
        if not isinstance(obj, (core.Image3D, core.Field3D)):
            raise TypeError(f"pyca.on_device: {type(obj).__name__} is not an Image3D or Field3D")
        if mode not in MAP_TYPES:
            raise ValueError(f"pyca.on_device: map type {mode!r} for {obj!r}; use one of {', '.join(MAP_TYPES)}")
        if any(o is obj for o, _ in out):
            raise ValueError(f"pyca.on_device: {obj!r} is mapped twice")
        out.append((obj, mode))
    return out


class on_device:  # noqa: N801 - used as a function: with ca.on_device({...}):
    """Context manager: puts the mapped arrays in device memory for the block (module docstring).
    Raises pyca.CudaError at entry, before touching anything, when no GPU can be used."""

    def __init__(self, mapping):
        self._pairs = _pairs(mapping)
        self._moved = []

    def __enter__(self):
        core = _core()
        if not core.cuda_available():
            raise core.CudaError(f"pyca.on_device: no usable CUDA GPU ({core.device_info()}); run the block "
                                 "without it (host arrays run every operation on the CPU)")
        try:
            for obj, mode in self._pairs:
                if obj.memType() == core.MEM_DEVICE:
                    continue  # already there (an enclosing block, or the user's): nothing to do at exit
                dev = (core.Image3D if isinstance(obj, core.Image3D) else core.Field3D)(obj.grid(), core.MEM_DEVICE)
                if mode in ("to", "tofrom"):
                    dev.copy_from(obj)
                obj.swap(dev)  # obj is now the device array; dev holds the host buffer until exit
                self._moved.append((obj, mode, dev))
        except BaseException:
            self._restore(copy_back=False)
            raise
        return self

    def _restore(self, copy_back: bool):
        errors = []
        while self._moved:
            obj, mode, host = self._moved.pop()
            try:
                if copy_back and mode in ("from", "tofrom"):
                    host.copy_from(obj)
            except BaseException as e:  # still give the object its memory back
                errors.append(e)
            obj.swap(host)
        if errors:
            raise errors[0]

    def __exit__(self, exc_type, exc, tb):
        self._restore(copy_back=exc_type is None)
        return False
