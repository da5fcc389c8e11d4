"""Interior copies of stencil loops for the CUDA half of ``@ca.kernel``.

Every image read clamps its indices to the grid (kernel_rt.h ``rd``): two integer instructions per
coordinate, about half of the instructions of a stencil's tap loop on the GPU. For an innermost
``for v in range(a, b)`` (constant positive step, ``v`` assigned only by the loop) the translator
emits, on the device only, a second copy of the loop whose reads of the forms below skip the clamp,
taken by the threads for which one test before the loop shows that every such read lies inside
its array (the others, near the borders, run the clamped loop). Indices of a matched read, per
coordinate: ``x`` (a voxel coordinate of ``i, j, k = ca.index()``, never reassigned), ``x + v``,
``v + x``, ``x - v``, ``v``, or an int constant; a Field3D component must be a constant 0, 1 or 2.
The values are those of the clamped loop, bit for bit (the clamps they skip are no-ops there).
Reads ``t[d]`` of a ``ca.line`` (d = ``v``, ``-v`` or an int constant) read the block's tile in the
copy without testing the offset each time, when the test before the loop finds a tile
(``pyca_line.s``) whose radius covers every offset of the loop.
"""
from __future__ import annotations

import ast

_AXES = "xyz"


def _coord(node, var: str, own: dict) -> tuple | None:
    """(kind, name) of one index: ("x", X), ("x+v", X), ("x-v", X), ("v", None), ("c", value); None
    when the index has another form."""
    if isinstance(node, ast.Name):
        if node.id in own:
            return ("x", node.id)
        if node.id == var:
            return ("v", None)
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return ("c", node.value) if node.value >= 0 else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        a, b = node.left, node.right
        if not (isinstance(a, ast.Name) and isinstance(b, ast.Name)):
            return None
        if isinstance(node.op, ast.Add):
            x = a.id if a.id in own and b.id == var else (b.id if b.id in own and a.id == var else None)
            return ("x+v", x) if x else None
        return ("x-v", a.id) if a.id in own and b.id == var else None
    return None


def _line_offset(d, var: str) -> tuple | None:
    """("v", None) for an offset v or -v (v the loop's variable), ("c", value) for an int constant."""
    if isinstance(d, ast.UnaryOp) and isinstance(d.op, (ast.USub, ast.UAdd)):
        k = _line_offset(d.operand, var)
        return None if k is None else (k[0], -k[1] if k[0] == "c" and isinstance(d.op, ast.USub) else k[1])
    if isinstance(d, ast.Name) and d.id == var:
        return ("v", None)
    if isinstance(d, ast.Constant) and type(d.value) is int:
        return ("c", d.value)
    return None


def plan(loop: ast.For, var: str, own: dict, params: dict, start: str, stop: str):
    """(C++ condition, ids of the reads that may skip their clamps) for the loop `loop` over `var`,
    whose range is [start, stop) (C++ names); None when no read qualifies. own: Python name -> C++
    name of the voxel coordinates."""
    reads, checks = set(), []
    for n in ast.walk(loop):
        d = getattr(n, "pyca_line_d", None)
        if d is not None:  # t[d] of a ca.line: the block's tile when every offset lies within its radius
            k = _line_offset(d, var)
            if k is None:
                continue
            checks.append("pyca_line.s != nullptr")
            if k[0] == "v":  # d and -d over [start, stop - 1]
                checks += [f"-({start}) <= pyca_line.r", f"{start} <= pyca_line.r", f"-({stop} - 1) <= pyca_line.r",
                           f"{stop} - 1 <= pyca_line.r"]
            else:
                checks.append(f"{abs(k[1])} <= pyca_line.r")
            reads.add(id(n))
            continue
        if not (isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)
                and params.get(n.value.id) in ("Image3D", "Field3D")):
            continue
        arr, kind = n.value.id, params[n.value.id]
        elts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
        if len(elts) != (3 if kind == "Image3D" else 4):
            continue
        if kind == "Field3D" and not (isinstance(elts[3], ast.Constant) and elts[3].value in (0, 1, 2)
                                      and type(elts[3].value) is int):
            continue
        coords = [_coord(e, var, own) for e in elts[:3]]
        if None in coords:
            continue
        for axis, (k, x) in enumerate(coords):
            size = f"p_{arr}.size.{_AXES[axis]}"
            if k == "x":
                checks.append(f"{own[x]} < {size}")
            elif k == "x+v":
                checks += [f"{own[x]} + {start} >= 0", f"{own[x]} + ({stop} - 1) < {size}"]
            elif k == "x-v":
                checks += [f"{own[x]} - ({stop} - 1) >= 0", f"{own[x]} - {start} < {size}"]
            elif k == "v":
                checks += [f"{start} >= 0", f"{stop} - 1 < {size}"]
            else:
                checks.append(f"{x} < {size}")
        reads.add(id(n))
    if not reads:
        return None
    return " && ".join(f"({c})" for c in dict.fromkeys(checks)), reads


def eligible(loop: ast.For, var: str) -> bool:
    """An innermost loop (no loop in its body) whose body does not assign its variable."""
    inner = [n for b in loop.body for n in ast.walk(b)]
    return not any(isinstance(n, (ast.For, ast.While)) or (isinstance(n, ast.Name) and n.id == var
                                                           and isinstance(n.ctx, ast.Store)) for n in inner)
