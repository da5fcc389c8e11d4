"""Generate pyca's code and docs from the operation descriptions in ops/*.yaml.

    python -m opgen.gen --ops-dir ops --out build/generated          # what the build runs
    python -m opgen.gen --ops-dir ops --docs-table docs/operations-table.md   # refresh the docs table
    python -m opgen.gen --ops-dir ops --check-docs docs/operations-table.md   # fail if it drifted

Writes under --out:
  include/pyca/ops/<family>.h   C++ declarations (namespace pyca), one header per family
  include/pyca/ops.h            includes every family header
  swig/ops.i                    SWIG docstrings + %include of the headers
  python/_opspec.py             the registry data of the built-in operations (pyca._opspec)
  python/core.pyi               type stubs of pyca.core: types, enumerations, every operation (stubs.py)
  src/...                       whatever a family generator (opgen/family_<family>.py) writes
Files are rewritten only when their content changes, so builds stay incremental.
"""
from __future__ import annotations

import argparse
import importlib
import pprint
import sys
from pathlib import Path

from . import spec, stubs

HEADER_NOTE = "Generated from {src} by tools/opgen/gen.py. Do not edit: change the description."


def write_if_changed(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def _comment_block(text: str, prefix: str = "/// ", width: int = 100) -> list[str]:
    import textwrap

    return [prefix + line for line in textwrap.wrap(text, width - len(prefix))] or [prefix.rstrip()]


def family_header(fam: spec.Family) -> str:
    lines = [
        "// " + HEADER_NOTE.format(src=f"ops/{fam.path.name}"),
        f"// {fam.title}",
        "#pragma once",
        "",
        "#include <utility>",
        "",
        '#include "pyca/array3d.h"',
        '#include "pyca/enums.h"',
        '#include "pyca/grid_info.h"',
        '#include "pyca/vec3.h"',
        "",
        "namespace pyca {",
        "",
    ]
    for op in fam.ops:
        lines += _comment_block(op.doc)
        lines += [ov.cpp() + ";" for ov in op.overloads]
        lines.append("")
    lines += ["}  // namespace pyca", ""]
    return "\n".join(lines)


def python_signature(ov: spec.Overload) -> str:
    args = []
    for a in ov.args:
        s = f"{a.name}: {a.type}"
        if a.default is not None:
            s += f" = {a.default.replace('pyca::', '')}"
        args.append(s)
    ret = {"void": "None", "std::pair<float, float>": "tuple[float, float]"}.get(ov.ret, ov.ret)
    return f"{ov.name}({', '.join(args)}) -> {ret}"


def swig_interface(fams: list[spec.Family]) -> str:
    lines = ["// " + HEADER_NOTE.format(src="ops/*.yaml"), ""]
    for fam in fams:
        for op in fam.ops:
            sigs = "\n".join("    " + python_signature(ov) for ov in op.overloads)
            doc = f"{op.doc}\n\nOverloads:\n{sigs}\n\nSemantics: docs/operations/{fam.name}.md"
            doc = doc.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'%feature("docstring") pyca::{op.name} "{doc}";')
    lines.append("")
    lines += [f'%include "pyca/ops/{fam.name}.h"' for fam in fams]
    return "\n".join(lines) + "\n"


def registry_module(fams: list[spec.Family]) -> str:
    ops = []
    for fam in fams:
        for op in fam.ops:
            ops.append(
                {
                    "name": op.name,
                    "family": fam.name,
                    "doc": op.doc,
                    "parity": op.parity,
                    "inputs": op.inputs,
                    "any_size": list(op.any_size),
                    "fixed": dict(op.fixed),
                    "overloads": [
                        {
                            "ret": ov.ret,
                            "signature": python_signature(ov),
                            "args": [
                                {"name": a.name, "py_name": a.py_name, "type": a.type, "const": a.const, "ref": a.ref, "default": a.default}
                                for a in ov.args
                            ],
                        }
                        for ov in op.overloads
                    ],
                }
            )
    body = pprint.pformat(ops, width=110, sort_dicts=False)
    return (
        f'"""The built-in operations, as described in ops/*.yaml. {HEADER_NOTE.format(src="ops/*.yaml")}"""\n\n'
        f"FAMILIES = {[f.name for f in fams]!r}\n\nOPS = {body}\n"
    )


def docs_table(fams: list[spec.Family]) -> str:
    out = [
        "# Operations table",
        "",
        "<!-- " + HEADER_NOTE.format(src="ops/*.yaml") + " Refresh: "
        "`cd tools && python -m opgen.gen --ops-dir ../ops --docs-table ../docs/operations-table.md` -->",
        "",
        "Every operation runs on host (CPU, OpenMP) and device (CUDA) memory; the semantics of each",
        "family are written once in `docs/operations/<family>.md`.",
        "",
    ]
    for fam in fams:
        out += [f"## {fam.title} (`{fam.name}`, [semantics](operations/{fam.name}.md))", ""]
        out += ["| Operation | Overloads | Meaning |", "|---|---|---|"]
        for op in fam.ops:
            sigs = "<br>".join("`" + python_signature(ov).replace("|", "\\|") + "`" for ov in op.overloads)
            out.append(f"| `{op.name}` | {sigs} | {op.doc.replace('|', chr(92) + '|')} |")
        out.append("")
    return "\n".join(out)


def generate(ops_dir: Path, out: Path) -> list[Path]:
    fams = spec.load_all(ops_dir)
    written = []
    for fam in fams:
        written.append(write_if_changed(out / "include/pyca/ops" / f"{fam.name}.h", family_header(fam)))
        try:
            plugin = importlib.import_module(f"opgen.family_{fam.name}")
        except ModuleNotFoundError as e:
            if e.name != f"opgen.family_{fam.name}":
                raise
            plugin = None
        if plugin is not None:
            written += list(plugin.generate(fam, out) or [])
    umbrella = ["// " + HEADER_NOTE.format(src="ops/*.yaml"), "#pragma once", ""]
    umbrella += [f'#include "pyca/ops/{fam.name}.h"' for fam in fams]
    written.append(write_if_changed(out / "include/pyca/ops.h", "\n".join(umbrella) + "\n"))
    written.append(write_if_changed(out / "swig/ops.i", swig_interface(fams)))
    written.append(write_if_changed(out / "python/_opspec.py", registry_module(fams)))
    include = Path(ops_dir).resolve().parent / "core/include/pyca"
    written.append(write_if_changed(out / "python/core.pyi",
                                    stubs.core_stub(fams, include, HEADER_NOTE.format(src="ops/*.yaml"))))
    # Sources a family generator no longer writes must not linger in the build.
    keep = {p.resolve() for p in written}
    for stale in (out / "src").glob("*") if (out / "src").exists() else []:
        if stale.resolve() not in keep:
            stale.unlink()
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--docs-table", type=Path, help="write the docs table here")
    ap.add_argument("--check-docs", type=Path, help="fail if this docs table differs from the descriptions")
    a = ap.parse_args(argv)
    try:
        if a.out:
            generate(a.ops_dir, a.out)
        fams = spec.load_all(a.ops_dir)
        if a.docs_table:
            write_if_changed(a.docs_table, docs_table(fams))
        if a.check_docs:
            if not a.check_docs.exists() or a.check_docs.read_text() != docs_table(fams):
                print(f"{a.check_docs} is stale: regenerate it with --docs-table", file=sys.stderr)
                return 1
    except spec.SpecError as e:
        print(f"opgen: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
