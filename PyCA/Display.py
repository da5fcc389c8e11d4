"""``import PyCA.Display as display``: pyca.display (the modern import is ``import pyca.display``).
Like it, adds ``matplotlib.pyplot.hold`` (removed in matplotlib 3) as a no-op where it is missing."""
from pyca import display as _display
from pyca.display import *  # noqa: F401,F403

__all__ = list(_display.__all__)
