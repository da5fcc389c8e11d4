"""``ca.line(im, axis, radius)`` in a ``@ca.kernel``: the voxels of `im` along one axis through this
voxel, read as ``t[d]`` (docs/kernels.md, "Stencils along an axis").

Meaning (both backends): ``t[d]`` is ``im[i + d, j, k]`` for axis 0, ``im[i, j + d, k]`` for axis 1,
``im[i, j, k + d]`` for axis 2, with (i, j, k) the voxel of ``ca.index()`` and the indices clamped to
the grid as every read is. `radius` says which offsets the kernel reads (-radius .. radius); it does
not change any value.

How: before translation the kernel's syntax tree is rewritten (a copy): each ``t[d]`` becomes the
read ``im[i + (d if axis == 0 else 0), j + (d if axis == 1 else 0), k + (d if axis == 2 else 0)]``,
marked with its offset, so that the CPU's per-voxel body and its strips (rows of the image,
pyca/kernels/strip.py) treat it as any read; the device code reads it through ``pyca_k::line_rd``,
which takes the block's tile in shared memory (``pyca_k::lineTiles``, staged once per block with the
halo; compiled only with PYCA_KERNEL_TILES=1 until measured on a GPU) when the offset lies within the
radius. The statement ``t = ca.line(...)`` becomes a check of
the axis (the CPU call raises ValueError for an axis other than 0, 1, 2).
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

__all__ = ["LINE", "LineInfo", "rewrite"]


def LINE(image, axis, radius):  # noqa: N802 - the object behind ca.line
    """Inside a @ca.kernel: ``t = ca.line(im, axis, radius)``; ``t[d]`` is im at this voxel moved d
    voxels along axis (0 x, 1 y, 2 z), clamped to the grid. With PYCA_KERNEL_TILES=1 the GPU stages im
    per block with `radius` voxels of halo in shared memory (reads of offsets within the radius come
    from there)."""
    raise RuntimeError("ca.line() is only meaningful inside a @ca.kernel function")


@dataclass
class LineInfo:
    name: str  # the local holding the line (t)
    image: str  # the Image3D parameter
    axis: ast.expr  # an int constant or int parameter
    radius: ast.expr
    own: tuple  # the names of i, j, k


def _is_line_call(tr, node) -> bool:
    return isinstance(node, ast.Call) and tr.static(node.func) is LINE


def _uniform_int(tr, node, what: str):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return
    if isinstance(node, ast.Name) and tr.params.get(node.id) == "int":
        return
    if isinstance(node, ast.Name) and node.id not in tr.params and type(tr.static(node)) is int:
        return
    tr.fail_node(node, f"ca.line's {what} other than an int constant or an int parameter")


def rewrite(tr, node):
    """(node, LineInfo | None): the kernel's syntax tree with its line reads rewritten (a copy when it
    has a ca.line), for the FuncTranslator `tr` (its static names, parameters and errors)."""
    calls = [n for n in ast.walk(node) if _is_line_call(tr, n)]
    if not calls:
        return node, None
    if tr.kind != "kernel":
        tr.fail_node(calls[0], "ca.line outside a @ca.kernel function")
    node = copy.deepcopy(node)
    body = node.body
    at = [s for s in body if isinstance(s, ast.Assign) and _is_line_call(tr, s.value)]
    inner = [n for n in ast.walk(node) if _is_line_call(tr, n)]
    if len(inner) > 1:
        tr.fail_node(inner[1], "a second ca.line (a kernel has one)")
    if not at:
        tr.fail_node(inner[0], "ca.line other than as 't = ca.line(im, axis, radius)' in the kernel's body "
                               "(outside if/for/while)")
    st = at[0]
    call = st.value
    if len(st.targets) != 1 or not isinstance(st.targets[0], ast.Name):
        tr.fail_node(st, "ca.line assigned to other than one name")
    name = st.targets[0].id
    if call.keywords or len(call.args) != 3:
        tr.fail_node(st, "ca.line with other than three positional arguments (im, axis, radius)")
    im, axis, radius = call.args
    if not (isinstance(im, ast.Name) and tr.params.get(im.id) == "Image3D"):
        tr.fail_node(st, "ca.line of something other than an Image3D parameter")
    if any(isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
           and n.value.id == im.id for n in ast.walk(node)):
        tr.fail_node(st, f"ca.line of {im.id!r}, which the kernel also writes")
    _uniform_int(tr, axis, "axis")
    _uniform_int(tr, radius, "radius")
    stores = [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    if sum(n.id == name for n in stores) != 1:
        tr.fail_node(st, f"the line {name!r} assigned more than once")
    from .translate import INDEX

    own = None
    for s in body[:body.index(st)]:
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and tr.static(s.value.func) is INDEX \
                and isinstance(s.targets[0], ast.Tuple):
            own = tuple(e.id for e in s.targets[0].elts if isinstance(e, ast.Name))
    if own is None or len(own) != 3 or any(sum(n.id == x for n in stores) != 1 for x in own):
        tr.fail_node(st, "ca.line before 'i, j, k = ca.index()' (or with i, j, k reassigned)")
    info = LineInfo(name, im.id, axis, radius, own)

    class _Reads(ast.NodeTransformer):
        def visit_Subscript(self, n):  # noqa: N802
            if not (isinstance(n.value, ast.Name) and n.value.id == name):
                return self.generic_visit(n)
            n.slice = self.visit(n.slice)
            if isinstance(n.slice, (ast.Tuple, ast.Slice)):
                tr.fail_node(n, f"the line {name!r} indexed with other than one offset ({name}[d])")
            if not isinstance(n.ctx, ast.Load):
                tr.fail_node(n, f"storing into the line {name!r} (a line is read-only)")
            d = n.slice
            coords = []
            for a, x in enumerate(own):
                test = ast.Compare(left=copy.deepcopy(axis), ops=[ast.Eq()], comparators=[ast.Constant(a)])
                off = ast.IfExp(test=test, body=copy.deepcopy(d), orelse=ast.Constant(0))
                coords.append(ast.BinOp(left=ast.Name(id=x, ctx=ast.Load()), op=ast.Add(), right=off))
            new = ast.Subscript(value=ast.Name(id=im.id, ctx=ast.Load()),
                                slice=ast.Tuple(elts=coords, ctx=ast.Load()), ctx=ast.Load())
            new.pyca_line_d = d
            for m in ast.walk(new):
                ast.copy_location(m, n)
            return new

        def visit_Name(self, n):  # noqa: N802
            if n.id == name and isinstance(n.ctx, ast.Load):
                tr.fail_node(n, f"the line {name!r} used other than as {name}[d]")
            return n

    marker = ast.Expr(value=ast.Constant(value=None))
    ast.copy_location(marker, st)
    marker.value.lineno = st.lineno
    marker.pyca_line = info
    body[body.index(st)] = marker
    node = _Reads().visit(node)
    return node, info
