"""The documentation site's API reference (tools/opgen/apidocs.py, built by scripts/docs.sh): every
operation is listed with its overloads and a link to its family's semantics page, and the classes
and modules are documented from their docstrings. The MkDocs build itself (warnings as errors) is
scripts/docs.sh, which .ci/run runs."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pyca import registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from opgen import apidocs
    finally:
        sys.path.remove(str(ROOT / "tools"))
    apidocs.write(ROOT / "ops", out)
    return out


def test_every_operation_listed_with_semantics_page(reference):
    pages = {p.name: p.read_text() for p in reference.glob("*.md")}
    index = pages["index.md"]
    for op in registry.ops(builtin=True):
        page = pages[f"operations-{op.family}.md"]
        assert re.search(rf"^## {re.escape(op.name)}$", page, re.M), op.name
        section = page.split(f"## {op.name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"Semantics: [{op.family}](../operations/{op.family}.md)" in section, op.name
        assert f"{op.name}(" in section  # the overloads, with their keyword names
        assert f"(operations-{op.family}.md#{op.name.lower()})" in index, op.name
        assert (ROOT / "docs" / "operations" / f"{op.family}.md").is_file()


def test_classes_and_modules_from_docstrings(reference):
    types = (reference / "types.md").read_text()
    for name in ("## Image3D", "## Field3D", "## GridInfo", "## GaussianFilter", "`MEM_HOST` (1)"):
        assert name in types
    assert "from_array(a, grid=None, *, spacing=None, origin=None)" in types
    assert "- `filter(out: Field3D, in_: Field3D)`" in types  # each overload of a method
    assert "## pyca.io" in (reference / "python.md").read_text()


def test_docs_script_builds_outside_the_checkout(tmp_path):
    """scripts/docs.sh OUT: the site lands in OUT and nothing is written inside the checkout (a
    read-only checkout can build its documentation)."""
    import importlib.util
    import shutil
    import subprocess

    if importlib.util.find_spec("mkdocs") is None or shutil.which("bash") is None:
        pytest.skip("MkDocs is not installed (the docs extra)")
    if not (ROOT / "scripts" / "docs.sh").is_file():
        pytest.skip("not run from a checkout")

    def tree():
        return {p.relative_to(ROOT) for p in ROOT.rglob("*") if ".git" not in p.parts and ".pytest_cache" not in p.parts
                and "__pycache__" not in p.parts}

    before = tree()
    p = subprocess.run(["bash", str(ROOT / "scripts" / "docs.sh"), "site-out"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "site-out" / "site" / "index.html").is_file()
    assert (tmp_path / "site-out" / "site" / "design" / "report.html").is_file()
    assert tree() == before


_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?(?![\w.])")


def test_lddmm_page_states_the_declared_defaults():
    """docs/lddmm.md's parameter table gives each parameter the default pyca.registration.parameters
    declares (per metric where the declaration defers to pyca.registration.metrics): the page is not kept
    in sync by hand alone."""
    from pyca.registration import metrics, parameters

    rows = {}
    for line in (ROOT / "docs" / "lddmm.md").read_text().splitlines():
        m = re.match(r"\| ((?:`\w+`(?:, )?)+)(?: / [^|]*)? \| ([^|]+) \|", line)
        if m:
            rows.update((name, m.group(2)) for name in re.findall(r"`(\w+)`", m.group(1)))
    per_metric = {"alpha": metrics.DEFAULT_ALPHA, "sigma": metrics.DEFAULT_SIGMA,
                  "iterations": metrics.DEFAULT_ITERATIONS, "tol": metrics.DEFAULT_TOL,
                  "momentum": metrics.DEFAULT_MOMENTUM}
    checked = []
    for q in parameters.DECLARED:
        if q.name not in rows:
            continue
        cell = rows[q.name]
        numbers = [float(x) for x in _NUMBER.findall(cell)]
        values = list(per_metric[q.name].values()) if q.name in per_metric else [q.default]
        for v in values:
            if v is None:
                assert cell.strip().lower() == "none", (q.name, cell)
            elif isinstance(v, str):
                assert v in cell, (q.name, v, cell)
            elif isinstance(v, tuple):
                seq = [float(x) for x in v]
                assert any(numbers[i:i + len(seq)] == seq for i in range(len(numbers))), (q.name, v, cell)
            else:
                assert float(v) in numbers, (q.name, v, cell)
        checked.append(q.name)
    assert {"alpha", "gamma", "lpow", "sigma", "iterations", "scales", "tol", "time_steps", "bias_sigma",
            "band_tol", "pad", "momentum", "interp_blur", "fixed_blur", "metric", "radius", "bins", "max_step", "percentiles", "affine",
            "fixed_mask", "moving_mask", "device"} <= set(checked), checked


def test_shoot_page_states_the_defaults():
    """docs/shoot.md's option table gives each option the default of pyca.apps.shoot.DEFAULTS."""
    from pyca.apps import shoot

    checked = []
    for line in (ROOT / "docs" / "shoot.md").read_text().splitlines():
        m = re.match(r"\| ((?:`--[\w-]+`(?:, )?)+) \| ([^|]+) \|", line)
        if not m:
            continue
        names = [o.replace("-", "_") for o in re.findall(r"`--([\w-]+)`", m.group(1))]
        cells = m.group(2).split(", ") if len(names) > 1 else [m.group(2)]
        assert len(cells) == len(names), line
        for name, cell in zip(names, cells):
            v = shoot.DEFAULTS[name]
            if isinstance(v, str):
                assert cell.strip() == v, (name, v, cell)
            else:
                want = [float(x) for x in (v if isinstance(v, tuple) else (v,))]
                assert [float(x) for x in _NUMBER.findall(cell)] == want, (name, v, cell)
            checked.append(name)
    assert set(checked) >= set(shoot.DEFAULTS) - {"percentiles"}, checked
