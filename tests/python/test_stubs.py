"""The installed type stubs (pyca/core.pyi, generated from ops/*.yaml and the types) and py.typed:
they declare every public name of pyca.core, agree with the run-time signatures, and a type checker
(mypy) accepts a small user script and rejects a wrong call through them."""
from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pyca
import pyca.core

PKG = Path(pyca.__file__).parent
STUB = PKG / "core.pyi"


def _stub_tree():
    return ast.parse(STUB.read_text())


def _declared(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_py_typed_and_stub_installed():
    assert (PKG / "py.typed").is_file()
    assert STUB.is_file()


def test_stub_declares_every_public_name():
    declared = _declared(_stub_tree())
    public = {n for n in dir(pyca.core) if not n.startswith("_") and n not in {"typing", "cvar"}}
    public -= {n for n in public if inspect.ismodule(getattr(pyca.core, n))}
    missing = sorted(public - declared)
    assert not missing, f"pyca.core names missing from core.pyi: {missing}"


def test_stub_parameters_match_runtime_signatures():
    tree = _stub_tree()
    first = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name not in first:
            first[node.name] = [a.arg for a in node.args.args]
    from pyca import registry

    for op in registry.ops(builtin=True):
        assert first[op.name] == list(inspect.signature(op.call).parameters), op.name


GOOD = """
import numpy as np
import pyca as ca

g = ca.GridInfo((8, 8, 4), spacing=(1.0, 1.0, 2.0))
im = ca.Image3D(g, ca.MEM_HOST)
out = ca.Image3D(g)
h = ca.Field3D(g)
ca.SetToIdentity(h)
ca.ApplyH(out, im, h, bg=ca.BACKGROUND_STRATEGY_ZERO)
ca.ApplyH(out, im, h, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_CUBIC, 0.0)
ca.AddC(out, im, np.float32(2))
ca.MulC(out, im, 3)
ca.Copy(out, h, 0)
total: float = ca.Sum(im)
lo, hi = ca.MinMax(im)
f = ca.GaussianFilter()
f.updateParams(g.size(), sigma=ca.Vec3Df(1, 1, 1), kRadius=(2, 2, 2))
f.filter(out, im)
a = ca.Image3D.from_array(np.zeros((4, 4, 4), np.float32), spacing=2.0)
mem: ca.MemoryType = a.memType()
v = a[1, 2, 3]
"""

BAD = """
import pyca as ca

g = ca.GridInfo((8, 8, 4))
im = ca.Image3D(g)
ca.AddC(im, im, "2")
ca.ApplyH(im, im, im, bg=ca.BACKGROUND_STRATEGY_ZERO)
ca.Sum(im, im, im)
"""


def _mypy(tmp_path, name, text):
    pytest.importorskip("mypy", reason="mypy (in the test extra) checks the stubs")
    script = tmp_path / name
    script.write_text(textwrap.dedent(text))
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context",
                        "--cache-dir", str(tmp_path / ".mypy_cache"), "--python-version",
                        f"{sys.version_info.major}.{sys.version_info.minor}", str(script)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_mypy_accepts_a_user_script_and_rejects_wrong_calls(tmp_path):
    rc, out = _mypy(tmp_path, "good.py", GOOD)
    assert rc == 0, out
    rc, out = _mypy(tmp_path, "bad.py", BAD)
    assert rc == 1, out
    lines = [ln for ln in out.splitlines() if ": error:" in ln]
    assert [ln.split(":")[1] for ln in lines] == ["6", "7", "8"], out
    assert '"AddC"' in lines[0] and '"ApplyH"' in lines[1] and '"Sum"' in lines[2], out
