"""PyCA, as pyca provides it: ``import PyCA.Core as ca``, ``import PyCA.Common as common`` and
``import PyCA.Display as display`` give pyca's modules, so code written for PyCA runs without editing
its imports. The modern imports are ``import pyca as ca``, ``import pyca.common as common`` and
``import pyca.display as display``; importing this package says so once (a PyCACompatibilityNote
warning, which ``warnings.filterwarnings("ignore", category=PyCA.PyCACompatibilityNote)`` silences).
"""
from __future__ import annotations

import warnings

__all__ = ["Core", "Common", "Display", "PyCACompatibilityNote"]


class PyCACompatibilityNote(UserWarning):
    """The note that `PyCA` is pyca's compatibility package and which import replaces it."""


_noted = False


def _note(stacklevel=3):
    global _noted
    if _noted:
        return
    _noted = True
    warnings.warn("PyCA is provided by pyca's compatibility package; the modern imports are "
                  "'import pyca as ca', 'import pyca.common as common' and 'import pyca.display as display'",
                  PyCACompatibilityNote, stacklevel=stacklevel)


_note()
