"""``import PyCA.Core as ca`` / ``from PyCA.Core import *``: pyca's types, constants and operations
(the modern import is ``import pyca as ca``)."""
import pyca as _pyca
from pyca import *  # noqa: F401,F403

__all__ = list(_pyca.__all__)
