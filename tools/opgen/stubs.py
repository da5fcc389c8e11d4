"""pyca/core.pyi: type stubs for IDEs and type checkers (installed beside pyca/py.typed).

The stub is the hand-written types part (opgen/core_types.pyi), the enumerations read from the C++
headers (core/include/pyca/mem_type.h, enums.h) and one declaration per overload of every operation
in ops/*.yaml, with the names and defaults of the descriptions (as pyca._signatures gives them at
run time).
"""
from __future__ import annotations

import re
from pathlib import Path

from . import spec

# Stub types of the description's argument types (pyca accepts NumPy scalars for numbers, any
# sequence of three numbers for a Vec3 and ints for enumerations).
_ARG = {
    "Image3D": "Image3D", "Field3D": "Field3D", "GridInfo": "GridInfo",
    "float": "_Float", "double": "_Float", "int": "_Int", "unsigned int": "_Int", "size_t": "_Int", "bool": "bool",
    "Vec3Df": "_Vec3f", "Vec3Di": "_Vec3i",
}
_RET = {"void": "None", "float": "float", "double": "float", "int": "int", "Vec3Df": "Vec3Df",
        "std::pair<float, float>": "tuple[float, float]"}
_ENUM = re.compile(r"enum\s+(\w+)\s*\{(.*?)\}", re.S)


def enums(include_dir: Path) -> dict[str, list[tuple[str, int]]]:
    """{enum name: [(member, value), ...]} of the enumerations in mem_type.h and enums.h."""
    out = {}
    for h in ("mem_type.h", "enums.h"):
        text = re.sub(r"//[^\n]*", "", (include_dir / h).read_text())
        for name, body in _ENUM.findall(text):
            members, value = [], -1
            for item in [i.strip() for i in body.split(",") if i.strip()]:
                m, _, v = item.partition("=")
                value = int(v) if v.strip() else value + 1
                members.append((m.strip(), value))
            out[name] = members
    return out


def _arg(a: spec.Arg) -> str:
    t = _ARG.get(a.type) or (f"{a.type} | int" if a.type in spec.ENUM_TYPES else a.type)
    return f"{a.py_name}: {t}" + (" = ..." if a.default is not None else "")


def op_stubs(fams: list[spec.Family]) -> list[str]:
    lines = []
    for fam in fams:
        lines += ["", f"# ---- {fam.title} (ops/{fam.path.name}; semantics: docs/operations/{fam.name}.md)"]
        for op in fam.ops:
            many = len(op.overloads) > 1
            for ov in op.overloads:
                if many:
                    lines.append("@overload")
                lines.append(f"def {op.name}({', '.join(_arg(a) for a in ov.args)}) -> {_RET[ov.ret]}: ...")
    return lines


def core_stub(fams: list[spec.Family], include_dir: Path, note: str) -> str:
    lines = [f"# {note}", (Path(__file__).parent / "core_types.pyi").read_text().rstrip(), ""]
    for name, members in enums(include_dir).items():
        lines += ["", f"class {name}(_PycaEnum):"]
        lines += [f"    {m} = {v}" for m, v in members]
        lines += [f"{m}: {name}" for m, _ in members]
    lines.append("DEFAULT_INTERP_METHOD: InterpT")
    lines += op_stubs(fams)
    return "\n".join(lines) + "\n"
