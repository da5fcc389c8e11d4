"""Family generator of `arithmetic`: writes the C++ definition of every elementwise overload.

tools/opgen/gen.py calls generate(family, outdir) at build time. For each overload of an op whose
`impl` has `map: F` (and that is not listed in `impl.manual` and returns void) it writes

    void Add(Field3D& out, const Field3D& a, const Image3D& b) {
      const bool dev = detail::prepare("Add", {{"out", &out}, {"a", &a}, {"b", &b}});
      arith::run<math::Add>("Add", dev, arith::target(out), arith::arr(a), arith::arr(b));
    }

into outdir/src/arithmetic_gen_NN.cpp. The per-voxel formula F is a functor of pyca/math/arithmetic.h;
arith::run (core/src/ops/arithmetic_loops.h) runs it on the CPU or the GPU. Rules, from the declaration:

- the first argument is the output (a non-const Image3D& / Field3D&);
- the operands are the arguments after it, in order, except one named `mask`; for an op whose name
  ends in `_I` the output is also the first operand;
- Image3D / Field3D operands are read from memory (an image broadcasts over a field's components),
  float / double / int / Vec3Df operands are constants (a Vec3Df gives one per component);
- an argument `mask` (const Image3D&) restricts the writes to voxels where mask != 0.
"""
from __future__ import annotations

import re
from pathlib import Path

OVERLOADS_PER_FILE = 48
CONST_TYPES = {"float", "double", "int", "Vec3Df"}

PREAMBLE = """\
// Generated from ops/arithmetic.yaml by tools/opgen/family_arithmetic.py. Do not edit: change the description.
#include "ops/arithmetic_loops.h"
#include "pyca/ops/arithmetic.h"

namespace pyca {
"""


class ArithmeticSpecError(ValueError):
    pass


def _functor_arities(root: Path) -> dict[str, int] | None:
    """Functor name -> arity, from the PYCA_ARITH_FUNCTORS_<n> lists of pyca/math/arithmetic.h."""
    header = root / "core/include/pyca/math/arithmetic.h"
    if not header.exists():
        return None
    text = header.read_text().replace("\\\n", " ")
    out: dict[str, int] = {}
    for m in re.finditer(r"#define\s+PYCA_ARITH_FUNCTORS_(\d)\(X\)(.*)", text):
        for name in re.findall(r"X\((\w+)\)", m.group(2)):
            out[name] = int(m.group(1))
    return out


def _definition(op, ov, functor: str) -> str:
    where = f"ops/arithmetic.yaml: {ov.key}"
    if not ov.args or not ov.args[0].is_array or not ov.args[0].is_output:
        raise ArithmeticSpecError(f"{where}: the first argument must be the output (Image3D& or Field3D&)")
    out = ov.args[0]
    in_place = op.name.endswith("_I")
    mask = None
    operands = []
    for i, a in enumerate(ov.args):
        if a.name == "mask":
            if a.type != "Image3D" or not a.const:
                raise ArithmeticSpecError(f"{where}: 'mask' must be a const Image3D&")
            mask = a
            continue
        if i == 0 and not in_place:
            continue
        if a.is_array:
            if i > 0 and not a.const:
                raise ArithmeticSpecError(f"{where}: operand {a.name} must be const")
            if a.type == "Field3D" and out.type != "Field3D":
                raise ArithmeticSpecError(f"{where}: a Field3D operand needs a Field3D output")
            operands.append(f"arith::arr({a.name})")
        elif a.type in CONST_TYPES:
            if a.type == "Vec3Df" and out.type != "Field3D":
                raise ArithmeticSpecError(f"{where}: a Vec3Df operand needs a Field3D output")
            operands.append(f"arith::cst({a.name})")
        else:
            raise ArithmeticSpecError(f"{where}: argument type {a.type} cannot be an elementwise operand")
    params = ", ".join(("const " if a.const else "") + a.type + a.ref + " " + a.name for a in ov.args)
    checks = ", ".join(f'{{"{a.name}", &{a.name}}}' for a in ov.args if a.is_array)
    target = f"arith::target({out.name}, {mask.name})" if mask else f"arith::target({out.name})"
    call_args = ", ".join([f'"{op.name}"', "dev", target] + operands)
    return (
        f"void {ov.name}({params}) {{\n"
        f'  const bool dev = detail::prepare("{op.name}", {{{checks}}});\n'
        f"  arith::run<math::{functor}>({call_args});\n"
        f"}}\n"
    ), len(operands)


def _write_if_changed(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def definitions(family) -> list[str]:
    """The C++ definitions of every generated overload of the family, in YAML order."""
    arities = _functor_arities(Path(family.path).resolve().parent.parent)
    defs = []
    for op in family.ops:
        impl = op.impl or {}
        manual = impl.get("manual", [])
        if manual is True or "map" not in impl:
            continue
        functor = impl["map"]
        if arities is not None and functor not in arities:
            raise ArithmeticSpecError(
                f"ops/arithmetic.yaml: op {op.name}: map {functor!r} is not listed in PYCA_ARITH_FUNCTORS_* "
                f"of core/include/pyca/math/arithmetic.h"
            )
        keys = {ov.key for ov in op.overloads}
        for k in manual:
            if k not in keys:
                raise ArithmeticSpecError(f"ops/arithmetic.yaml: op {op.name}: manual overload {k!r} is not declared")
        for ov in op.overloads:
            if ov.ret != "void" or ov.key in manual:
                continue  # reductions (core/src/ops/reductions.cpp) and hand-written overloads
            text, n = _definition(op, ov, functor)
            if arities is not None and n != arities[functor]:
                raise ArithmeticSpecError(
                    f"ops/arithmetic.yaml: {ov.key}: {n} operands but math::{functor} takes {arities[functor]}"
                )
            defs.append(text)
    return defs


def generate(family, outdir: Path) -> list[Path]:
    defs = definitions(family)
    written = []
    for start in range(0, len(defs), OVERLOADS_PER_FILE):
        chunk = defs[start : start + OVERLOADS_PER_FILE]
        text = PREAMBLE + "\n" + "\n".join(chunk) + "\n}  // namespace pyca\n"
        written.append(_write_if_changed(Path(outdir) / "src" / f"arithmetic_gen_{start // OVERLOADS_PER_FILE:02d}.cpp", text))
    return written
