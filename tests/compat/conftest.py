"""Shared set-up of the PyCA compatibility suite (tests/compat): makes compat_helpers importable."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
