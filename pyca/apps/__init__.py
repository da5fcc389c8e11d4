"""Applications built on pyca's operations.

- ``pyca.apps.lddmm``: LDDMM image registration (``register(fixed, moving, **params)``), the engine of
  the ``pyca lddmm`` command.
- ``pyca.apps.data``: built-in, deterministically generated test images (``builtin_pair()``).

The submodules are imported on use (``from pyca.apps import lddmm``) so that ``import pyca`` stays light.
"""
__all__ = ["lddmm", "data"]
