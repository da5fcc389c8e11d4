"""Load and check the operation descriptions in ops/*.yaml.

One YAML file per family of operations. Each file:

    family: arithmetic              # name of the generated header pyca/ops/<family>.h
    title: Image and field arithmetic
    ops:
      - name: Add
        doc: out = a + b, voxel by voxel (fields component by component).
        overloads:                  # C++ declarations, exactly as in the generated header
          - void Add(Image3D& out, const Image3D& a, const Image3D& b)
          - void Add(Field3D& out, const Field3D& a, const Field3D& b)
        parity: {rtol: 1.0e-6, atol: 1.0e-6}   # optional CPU/GPU tolerance; or {skip: reason}
        inputs: {a: positive}       # optional hints for the random-input factory, by argument name
        any_size: [im]              # optional: input arrays that may have another size than the
                                    # output (the parity tests add cases where they do)
        fixed: {hist: [8, 6, 1], bins: 8}   # optional: example values the parity tests use for these
                                    # arguments (an array: its size; a scalar: its value)
        impl: {...}                 # optional, free-form: read only by the family's own generator
                                    # tools/opgen/family_<family>.py (e.g. an elementwise formula)

Everything else (the C++ header, the SWIG docstrings, the Cython .pxd, the Python registry,
the docs table, the parity tests) is generated from these files.
"""
from __future__ import annotations

import dataclasses
import keyword
import re
from pathlib import Path

import yaml

# Argument types an operation may take, and what each means to the generators.
ARRAY_TYPES = {"Image3D", "Field3D"}
SCALAR_TYPES = {"float", "double", "int", "unsigned int", "bool", "size_t"}
VALUE_TYPES = {"Vec3Df", "Vec3Di", "GridInfo"}
ENUM_TYPES = {"BackgroundStrategy", "InterpT", "DimT", "DiffT", "BoundaryCondT", "MemoryType"}
RETURN_TYPES = {"void", "float", "double", "int", "Vec3Df", "std::pair<float, float>"}

# Hints the random-input factory understands (see pyca.testing).
INPUT_HINTS = {"positive", "nonzero", "unit", "mask", "identity_h", "small_v", "small", "angle", "any"}

_DECL = re.compile(r"^\s*(?P<ret>.+?)\s+(?P<name>[A-Za-z_]\w*)\s*\((?P<args>.*)\)\s*$")
_ARG = re.compile(
    r"^\s*(?P<const>const\s+)?(?P<type>[A-Za-z_][\w:]*(?:\s+int\b)?)\s*(?P<ref>[&*]?)\s*"
    r"(?P<name>[A-Za-z_]\w*)\s*(?:=\s*(?P<default>.+?))?\s*$"
)


@dataclasses.dataclass(frozen=True)
class Arg:
    name: str
    type: str  # base type without const/&: "Image3D", "float", "BackgroundStrategy", ...
    const: bool
    ref: str  # "", "&" or "*"
    default: str | None

    @property
    def is_array(self) -> bool:
        return self.type in ARRAY_TYPES

    @property
    def py_name(self) -> str:
        """The keyword name in Python: a Python keyword gets a trailing underscore (`in` -> `in_`)."""
        return self.name + "_" if keyword.iskeyword(self.name) else self.name

    @property
    def is_output(self) -> bool:
        """Written by the operation: a non-const Image3D&/Field3D& (or float& result)."""
        return self.ref == "&" and not self.const

    def cpp(self) -> str:
        s = ("const " if self.const else "") + self.type + self.ref + " " + self.name
        return s + (" = " + self.default if self.default is not None else "")


@dataclasses.dataclass(frozen=True)
class Overload:
    ret: str
    name: str
    args: tuple[Arg, ...]

    def cpp(self) -> str:
        return f"{self.ret} {self.name}({', '.join(a.cpp() for a in self.args)})"

    @property
    def key(self) -> str:
        """'Add(Image3D&, const Image3D&, const Image3D&)': unique per overload."""
        parts = [("const " if a.const else "") + a.type + a.ref for a in self.args]
        return f"{self.name}({', '.join(parts)})"


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    family: str
    doc: str
    overloads: tuple[Overload, ...]
    parity: dict
    inputs: dict
    impl: dict
    any_size: tuple[str, ...] = ()
    fixed: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    title: str
    path: Path
    ops: tuple[Op, ...]


class SpecError(ValueError):
    pass


def split_top_level(s: str) -> list[str]:
    """Splits at the commas that are not inside <...> or (...)."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def parse_overload(decl: str, where: str) -> Overload:
    m = _DECL.match(decl)
    if not m:
        raise SpecError(f"{where}: cannot parse declaration {decl!r}")
    ret = " ".join(m["ret"].split())
    if ret not in RETURN_TYPES:
        raise SpecError(f"{where}: return type {ret!r} not one of {sorted(RETURN_TYPES)}")
    args = []
    for a in split_top_level(m["args"]):
        am = _ARG.match(a)
        if not am:
            raise SpecError(f"{where}: cannot parse argument {a!r} of {decl!r}")
        t = " ".join(am["type"].split())
        if t not in ARRAY_TYPES | SCALAR_TYPES | VALUE_TYPES | ENUM_TYPES:
            raise SpecError(f"{where}: argument type {t!r} of {decl!r} is not supported")
        args.append(Arg(am["name"], t, bool(am["const"]), am["ref"], am["default"]))
    return Overload(ret, m["name"], tuple(args))


def load_family(path: Path) -> Family:
    data = yaml.safe_load(path.read_text())
    fam = data.get("family")
    if not fam or not re.fullmatch(r"[a-z_]+", fam):
        raise SpecError(f"{path}: 'family' must be a lower_case name")
    ops = []
    for i, o in enumerate(data.get("ops") or []):
        where = f"{path.name}: op #{i} ({o.get('name', '?')})"
        for key in ("name", "doc", "overloads"):
            if key not in o:
                raise SpecError(f"{where}: missing '{key}'")
        unknown = set(o) - {"name", "doc", "overloads", "parity", "inputs", "impl", "any_size", "fixed"}
        if unknown:
            raise SpecError(f"{where}: unknown keys {sorted(unknown)}")
        ovs = tuple(parse_overload(d, where) for d in o["overloads"])
        for ov in ovs:
            if ov.name != o["name"]:
                raise SpecError(f"{where}: overload {ov.cpp()!r} does not declare {o['name']}")
        inputs = dict(o.get("inputs") or {})
        for arg, hint in inputs.items():
            if hint not in INPUT_HINTS:
                raise SpecError(f"{where}: input hint {hint!r} for {arg!r} not in {sorted(INPUT_HINTS)}")
        any_size = tuple(o.get("any_size") or ())
        const_arrays = {a.name for ov in ovs for a in ov.args if a.is_array and a.const}
        for arg in any_size:
            if arg not in const_arrays:
                raise SpecError(f"{where}: any_size names {arg!r}, not an input array of {o['name']}")
        fixed = dict(o.get("fixed") or {})
        args = {a.name: a for ov in ovs for a in ov.args}
        for arg, v in fixed.items():
            a = args.get(arg)
            if a is None:
                raise SpecError(f"{where}: fixed names {arg!r}, not an argument of {o['name']}")
            if a.is_array != isinstance(v, list) or (a.is_array and (len(v) != 3 or not all(isinstance(k, int) and k > 0 for k in v))):
                raise SpecError(f"{where}: fixed {arg!r} must be " + ("a size [x, y, z]" if a.is_array else "a number"))
        ops.append(Op(o["name"], fam, " ".join(str(o["doc"]).split()), ovs, dict(o.get("parity") or {}), inputs,
                      dict(o.get("impl") or {}), any_size, fixed))
    return Family(fam, data.get("title", fam), path, tuple(ops))


def load_all(ops_dir: Path) -> list[Family]:
    fams = [load_family(p) for p in sorted(Path(ops_dir).glob("*.yaml"))]
    seen: dict[str, str] = {}
    owner: dict[str, str] = {}
    for f in fams:
        for op in f.ops:
            if owner.setdefault(op.name, f.path.name) != f.path.name:
                raise SpecError(f"op {op.name} described in both {owner[op.name]} and {f.path.name}")
            for ov in op.overloads:
                if ov.key in seen:
                    raise SpecError(f"{ov.key} declared twice ({seen[ov.key]} and {f.path.name})")
                seen[ov.key] = f.path.name
    return fams
