"""``python -m pyca``: the ``pyca`` command (pyca/cli.py). A Ctrl-C or SIGTERM while the package loads
is one line, as for the console script (pyca/__init__.py starts _pyca_console's guard)."""
import sys

try:
    from .cli import main
finally:
    if "_pyca_console" in sys.modules:
        sys.modules["_pyca_console"].release()

if __name__ == "__main__":
    sys.exit(main())
