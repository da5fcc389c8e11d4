"""The operation descriptions (ops/*.yaml) and what is generated from them stay in step."""
import subprocess
import sys
from pathlib import Path

import pytest

import pyca as ca

ROOT = Path(__file__).resolve().parents[2]


def test_docs_table_is_current():
    r = subprocess.run(
        [sys.executable, "-m", "opgen.gen", "--ops-dir", str(ROOT / "ops"),
         "--check-docs", str(ROOT / "docs/operations-table.md")],
        cwd=ROOT / "tools", capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr + (
        "\nrefresh with: cd tools && python -m opgen.gen --ops-dir ../ops --docs-table ../docs/operations-table.md")


def test_installed_registry_matches_descriptions():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from opgen import spec
    finally:
        sys.path.pop(0)
    described = {op.name: [ov.key for ov in op.overloads] for fam in spec.load_all(ROOT / "ops") for op in fam.ops}
    from pyca import _opspec

    installed = {op["name"]: len(op["overloads"]) for op in _opspec.OPS}
    assert set(installed) == set(described), "rebuild pyca: its registry differs from ops/*.yaml"
    assert all(installed[n] == len(k) for n, k in described.items())


@pytest.mark.parametrize("op", [o["name"] for o in __import__("pyca._opspec", fromlist=["OPS"]).OPS])
def test_every_described_operation_is_callable_with_a_docstring(op):
    fn = getattr(ca, op)
    assert callable(fn)
    assert fn.__doc__ and "Overloads" in fn.__doc__


def test_any_size_names_input_arrays_only(tmp_path):
    """ops/*.yaml's any_size (inputs that may have another size than the output; the parity cases
    add such sources) must name an input array of the operation."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from opgen import spec
    finally:
        sys.path.pop(0)
    ops = {op.name: op for fam in spec.load_all(ROOT / "ops") for op in fam.ops}
    assert ops["ApplyH"].any_size == ("im", "src")
    for bad in ("out", "bgVal", "nope"):
        p = tmp_path / "x.yaml"
        p.write_text("family: x\nops:\n  - name: F\n    doc: d\n    overloads:\n"
                     "      - void F(Image3D& out, const Image3D& im, float bgVal)\n"
                     f"    any_size: [{bad}]\n")
        with pytest.raises(spec.SpecError, match=f"any_size names '{bad}'"):
            spec.load_family(p)
