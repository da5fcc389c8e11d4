"""The installed distribution: named pyca3d (import name pyca), its version the one of
pyca/__init__.py, and the metadata a package index shows."""
from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

import pytest

import pyca


@pytest.fixture(scope="module")
def dist():
    try:
        d = md.distribution("pyca3d")
    except md.PackageNotFoundError:
        pytest.skip("pyca is not installed as the pyca3d distribution here")
    # The distribution found must be the one that holds this pyca.
    files = [f for f in d.files or [] if str(f) == "pyca/__init__.py"]
    if not files or Path(d.locate_file(files[0])).resolve() != Path(pyca.__file__).resolve():
        pytest.skip("the pyca3d distribution found is not the pyca imported")
    return d


def test_version_comes_from_one_place(dist):
    assert dist.version == pyca.__version__
    assert pyca.__version__.count(".") >= 2


def test_metadata(dist):
    m = dist.metadata
    assert m["Name"] == "pyca3d"
    assert m["Requires-Python"] == ">=3.10"
    assert "License :: OSI Approved :: BSD License" in m.get_all("Classifier")
    assert "cuda" in m.get_all("Provides-Extra")
    reqs = dist.requires or []
    assert any(r.startswith("nvidia-cufft") and 'extra == "cuda"' in r for r in reqs), reqs
    assert any(r.startswith("nvidia-cuda-nvrtc") and 'extra == "cuda"' in r for r in reqs), reqs
    # The licence text travels with the wheel.
    assert any(Path(str(f)).name == "LICENSE" for f in dist.files or [])
