"""``import PyCA.Common as common``: pyca.common (the modern import is ``import pyca.common``)."""
from pyca import common as _common
from pyca.common import *  # noqa: F401,F403

__all__ = list(_common.__all__)
