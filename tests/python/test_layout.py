"""The package's layout rules that code can check (BRIEF.md: no private names imported across modules).

A module's `_name` is its own: another pyca module that needs it gets it under a public name (a module
whose own name starts with `_`, e.g. pyca.apps._atlas_tasks, is private to its package, and its
public names are what its neighbours use). Read from the sources with `ast`, so that a function-level
import or an attribute (`module._name`) counts as well as `from module import _name`."""
import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PKG = os.path.join(ROOT, "pyca")

# The generated modules' names (pyca.core is the SWIG module over the compiled pyca._core; pyca._opspec is
# written by tools/opgen at build time, so a checkout without a build has no file for it).
GENERATED = ("pyca.core", "pyca._core", "pyca._opspec")


def _modules():
    mods = {}
    for folder, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                mods[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return mods


def _source_module(cur, is_pkg, level, module):
    if level == 0:
        return module
    parts = cur.split(".") if is_pkg else cur.split(".")[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def private_uses(mods):
    """(module, 'other.module._name') for each private name of another pyca module that `module` uses."""
    found = set()
    known = set(mods) | set(GENERATED)
    for name, path in mods.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        aliases = {}  # local name -> pyca module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = _source_module(name, path.endswith("__init__.py"), node.level, node.module)
                for a in node.names:
                    if f"{src}.{a.name}" in known:
                        aliases[a.asname or a.name] = f"{src}.{a.name}"
                    elif src != name and src.split(".")[0] == "pyca" and a.name.startswith("_") \
                            and not a.name.startswith("__"):
                        found.add((name, f"{src}.{a.name}"))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "pyca" and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                mod, attr = aliases[node.value.id], node.attr
                if mod != name and attr.startswith("_") and not attr.startswith("__") and f"{mod}.{attr}" not in known:
                    found.add((name, f"{mod}.{attr}"))
    return {(m, n) for m, n in found if n.rsplit(".", 1)[0] not in GENERATED}


def test_no_private_name_is_used_across_modules():
    mods = _modules()
    assert "pyca.apps.batch" in mods and len(mods) > 40
    bad = sorted(private_uses(mods))
    assert not bad, "private names used outside their module: " + ", ".join(f"{m} uses {n}" for m, n in bad)


@pytest.mark.parametrize("source, found", [
    ("from .atlas import AtlasError, _names\n", ("pyca.apps.x", "pyca.apps.atlas._names")),
    ("from .. import cli\ncli._importable('a')\n", ("pyca.apps.x", "pyca.cli._importable")),
    ("from . import _atlas_tasks as t\nt._INPUT_ERRORS\n", ("pyca.apps.x", "pyca.apps._atlas_tasks._INPUT_ERRORS")),
])
def test_the_check_finds_each_form(tmp_path, source, found):
    """The scan itself: an import of a private name, and attribute uses through a module alias."""
    path = tmp_path / "x.py"
    path.write_text(source)
    mods = _modules()
    mods["pyca.apps.x"] = str(path)
    assert found in private_uses(mods)
    assert ("pyca.apps.x", "pyca.apps._atlas_tasks") not in private_uses(mods)  # a private module is fine
