"""The CPU body of a kernel as a strip of voxels along x (docs/design/kernels.md, "Loops in kernels").

A per-voxel body with a loop inside (a stencil's taps) does not vectorise over voxels: GCC cannot
vectorise the voxel loop around the tap loop. When every condition and every range() bound of the body
is the same for all voxels of a row (uniform: built from scalar parameters, constants, shapes, j, k
and uniform locals), the body is run once per strip of up to PYCA_K_W voxels of a row instead: uniform
statements (the tap loop, its counters) run once, and each statement whose value varies along x runs
as a loop over the strip's lanes, which vectorises; locals that vary are arrays of PYCA_K_W values.
Each lane computes the same expressions, in the same order, as the per-voxel body (bit-identical
results). Reads im[i + u, j', k'] (u, j', k' uniform) load a row: a pointer into the image when the
strip's reads lie inside the grid, else a copy with clamped indices; writes out[i, j, k] store straight
into the row when it is inside the grid, else through the per-voxel checked store.

Kernels whose control flow varies along x (an if on a voxel's value) keep the per-voxel body.
"""
from __future__ import annotations

import ast
import re

from .translate import FLOAT, INT, INDEX, Expr, FuncTranslator, cast

__all__ = ["StripTranslator", "NotUniform"]

U, A, V = 0, 1, 2  # uniform along the strip, i + uniform (affine, step 1), varying


class NotUniform(Exception):
    """The kernel's control flow varies along x: use the per-voxel body."""


def _join_assign(old, new):
    if old is None or old == new:
        return new
    return V


class StripTranslator(FuncTranslator):
    """A FuncTranslator (kind "kernel") that emits the strip body, or raises NotUniform."""

    def __init__(self, *args, force_v=(), **kw):
        super().__init__(*args, **kw)
        self.force_v = set(force_v)
        self.hoists: list[str] = []
        self.caches: list[str] = []
        self.lk: dict[str, int] = {}
        self._analyse()

    # -- which values vary along the strip
    def kind_of(self, node) -> int:
        if isinstance(node, ast.Constant) or isinstance(node, ast.Attribute):
            return U
        if isinstance(node, ast.Name):
            return self.lk.get(node.id, U) if node.id in self.local_names else U
        if isinstance(node, ast.BinOp):
            a, b = self.kind_of(node.left), self.kind_of(node.right)
            if a == U and b == U:
                return U
            if isinstance(node.op, ast.Add) and {a, b} == {A, U}:
                return A
            if isinstance(node.op, ast.Sub) and (a, b) == (A, U):
                return A
            return V
        if isinstance(node, ast.UnaryOp):
            k = self.kind_of(node.operand)
            return k if k == U or isinstance(node.op, ast.UAdd) else V
        if isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
                return U
            sl = node.slice
            elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            return U if all(self.kind_of(x) == U for x in elts) else V
        if isinstance(node, ast.Call):
            parts = list(node.args)
        elif isinstance(node, ast.BoolOp):
            parts = list(node.values)
        elif isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif isinstance(node, ast.IfExp):
            parts = [node.test, node.body, node.orelse]
        else:
            return V
        return U if all(self.kind_of(p) == U for p in parts) else V

    def _analyse(self):
        for _ in range(30):
            before = dict(self.lk)
            self._walk(self._body(), check=False)
            if before == self.lk:
                break
        else:
            raise NotUniform("kinds did not settle")
        self._walk(self._body(), check=True)

    def _body(self):
        body = self.node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        return body

    def _set(self, name, k):
        if name in self.params:
            return
        if name in self.force_v:
            k = V
        self.lk[name] = _join_assign(self.lk.get(name), k)

    def _walk(self, stmts, check):
        for s in stmts:
            if isinstance(s, (ast.Assign, ast.AnnAssign)):
                tgts = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in tgts:
                    if isinstance(t, ast.Name):
                        self._set(t.id, self.kind_of(s.value))
                    elif isinstance(t, ast.Tuple):
                        names = [e.id for e in t.elts if isinstance(e, ast.Name)]
                        v = s.value
                        if isinstance(v, ast.Call) and self.static(v.func) is not INDEX:
                            raise NotUniform("x, y, z = a helper's tuple")  # (the per-voxel body)
                        if isinstance(v, ast.Call) and self.static(v.func) is INDEX:
                            for n, k in zip(names, (A, U, U)):
                                self._set(n, k)
                        elif isinstance(v, ast.Tuple):
                            used = {n.id for e in v.elts for n in ast.walk(e) if isinstance(n, ast.Name)}
                            if used & set(names):
                                raise NotUniform("a, b = b, a")
                            for n, e in zip(names, v.elts):
                                self._set(n, self.kind_of(e))
                        else:
                            for n in names:
                                self._set(n, U)
            elif isinstance(s, ast.AugAssign):
                if isinstance(s.target, ast.Name):
                    load = ast.Name(id=s.target.id, ctx=ast.Load())
                    self._set(s.target.id, self.kind_of(ast.BinOp(left=load, op=s.op, right=s.value)))
            elif isinstance(s, (ast.If, ast.While)):
                if check and self.kind_of(s.test) != U:
                    raise NotUniform("a condition that varies along x")
                self._walk(s.body, check)
                self._walk(s.orelse, check)
            elif isinstance(s, ast.For):
                it = s.iter
                if check and (not isinstance(it, ast.Call) or any(self.kind_of(a) != U for a in it.args)):
                    raise NotUniform("range() bounds that vary along x")
                if isinstance(s.target, ast.Name):
                    self._set(s.target.id, U)
                self._walk(s.body, check)

    # -- code
    def translate(self) -> str:
        code = super().translate()
        bad = {n for n, k in self.lk.items() if k == A and self.locals.get(n) != INT}
        if bad:
            raise _Retry(bad)
        return code

    def name(self, node) -> Expr:
        e = super().name(node)
        n = node.id
        if n in self.local_names and n not in self.params and e.code == f"v_{n}":
            k = self.lk.get(n, U)
            if k == V:
                return Expr(f"v_{n}[pyca_l]", e.type, e.const)
            if k == A:
                return Expr(f"(v_{n} + pyca_l)", e.type, e.const)
        return e

    def _lanes(self, ind: str, body: str) -> str:
        hoists, self.hoists = self.hoists, []
        inner = f"{ind}  PYCA_K_LANES\n{ind}  for (int pyca_l = 0; pyca_l < pyca_n; ++pyca_l) {body}\n"
        return f"{ind}{{\n" + "".join(f"{ind}  {h}\n" for h in hoists) + inner + f"{ind}}}\n"

    def _assign_name(self, name: str, e: Expr, node, ind: str) -> str:
        self._set_local(name, e.type, node)
        if self.infer:
            self.hoists = []
            return ""
        t = self.params.get(name) or self.locals[name]
        k = self.lk.get(name, U) if name not in self.params else U
        if k == U:
            self.hoists = []
            return f"{ind}{self.var(name)} = {cast(e, t)};\n"
        if k == A:
            self.hoists = []
            return f"{ind}v_{name} = {_at0(cast(e, t))};\n"
        return self._lanes(ind, f"v_{name}[pyca_l] = {cast(e, t)};")

    def assign(self, tgt, value, s, ind) -> str:
        if isinstance(tgt, ast.Tuple):
            names = [el.id if isinstance(el, ast.Name) else None for el in tgt.elts]
            if isinstance(value, ast.Call) and self.static(value.func) is INDEX and len(names) == 3 and None not in names:
                return "".join(self._assign_name(n, Expr(c, INT), s, ind)
                               for n, c in zip(names, ("(pyca_i0 + pyca_l)", "pyca_j", "pyca_k")))
            if isinstance(value, ast.Tuple) and len(value.elts) == len(names) and None not in names:
                return "".join(self._assign_name(n, self.expr(v), s, ind) for n, v in zip(names, value.elts))
            return super().assign(tgt, value, s, ind)
        if isinstance(tgt, ast.Subscript) and not self.infer:
            arr, idx = self.subscript_parts(tgt)
            e = self.expr(value)
            if e.type not in ("bool", "int", "float", "double"):
                self.fail(f"storing a {e.type} into an image")
            ln = self._line(s)
            fn = "wr" if self.params[arr] == "Image3D" else "wrf"
            slow = f"pyca_k::{fn}<Idx>(p_{arr}, {', '.join(idx)}, {cast(e, FLOAT)}, pyca_err, {ln});"
            kinds = [self.kind_of(x) for x in _elts(tgt)]
            if kinds[0] == A and all(k == U for k in kinds[1:]) and "pyca_err" not in "".join(idx):
                q = self.ctx.fresh("w")
                rest = ", ".join(idx[1:])
                self.hoists.append(f"float* const {q} = pyca_k::{fn}row<Idx>(p_{arr}, {_at0(idx[0])}, {rest}, pyca_n);")
                body = f"{q}[pyca_l] = {cast(e, FLOAT)};"
                hoists, self.hoists = self.hoists, []
                return (f"{ind}{{\n" + "".join(f"{ind}  {h}\n" for h in hoists)
                        + f"{ind}  if ({q}) {{\n{ind}    PYCA_K_LANES\n"
                        f"{ind}    for (int pyca_l = 0; pyca_l < pyca_n; ++pyca_l) {body}\n"
                        f"{ind}  }} else {{\n{ind}    for (int pyca_l = 0; pyca_l < pyca_n; ++pyca_l) {slow}\n"
                        f"{ind}  }}\n{ind}}}\n")
            return self._lanes(ind, slow)
        return super().assign(tgt, value, s, ind)

    def _stmt(self, s, depth, ind) -> str:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and not self.infer:
            e = self.expr(s.value)
            if self.kind_of(s.value) == U:
                self.hoists = []
                return f"{ind}(void)({e.code});\n"
            return self._lanes(ind, f"(void)({e.code});")
        return super()._stmt(s, depth, ind)

    def expr(self, node, condition: bool = False) -> Expr:
        if (isinstance(node, ast.Subscript) and not self.infer and not (
                isinstance(node.value, ast.Attribute) and node.value.attr == "shape")):
            kinds = [self.kind_of(x) for x in _elts(node)]
            if kinds and kinds[0] == A and all(k == U for k in kinds[1:]):
                arr, idx = self.subscript_parts(node)
                if "pyca_err" not in "".join(idx):
                    q, b = self.ctx.fresh("q"), self.ctx.fresh("c")
                    fn = "rdrow" if self.params[arr] == "Image3D" else "rdfrow"
                    self.caches.append(b)
                    self.hoists.append(f"const float* const {q} = pyca_k::{fn}<Idx>(p_{arr}, {_at0(idx[0])}, "
                                       f"{', '.join(idx[1:])}, pyca_n, pyca_i0, {b});")
                    return Expr(f"{q}[pyca_l]", FLOAT)
        return super().expr(node, condition)

    def decl(self) -> str:
        out = ""
        for n in sorted(self.locals):
            k = self.lk.get(n, U)
            out += f"  {self.locals[n]} v_{n}[PYCA_K_W] = {{}};\n" if k == V else f"  {self.locals[n]} v_{n} = 0;\n"
        return out


class _Retry(Exception):
    def __init__(self, names):
        super().__init__(names)
        self.names = names


def _elts(node):
    sl = node.slice
    return sl.elts if isinstance(sl, ast.Tuple) else [sl]


def _at0(code: str) -> str:
    """The code of an affine index at lane 0 (its uniform base)."""
    return re.sub(r"\bpyca_l\b", "0", code)


def strip_body(make, cname: str, param_types: dict, args: list) -> str:
    """The strip body `cname` (host only), or raises NotUniform. make(force_v) -> StripTranslator."""
    force: set = set()
    for _ in range(4):
        tr = make(force)
        try:
            tr.translate()
        except _Retry as r:
            force |= r.names
            continue
        break
    else:
        raise NotUniform("affine locals did not settle")
    tr.returns = []
    tr.hoists, tr.caches = [], []
    code = tr.block(tr.body, 1)
    ps = ["int pyca_i0", "int pyca_n", "int pyca_j", "int pyca_k"]
    for n in args:
        t = param_types[n]
        ps.append({"Image3D": f"const pyca::ImageView& p_{n}", "Field3D": f"const pyca::FieldView& p_{n}"}
                  .get(t, f"{t} p_{n}"))
    ps.append("pyca_k::Err* pyca_err")
    caches = "".join(f"  pyca_k::RowCache {c};\n" for c in tr.caches)
    if tr.line is not None:  # reads of the line that are not rows: through the image (no tile on the CPU)
        caches += "  const pyca_k::Line pyca_line{nullptr, 0, 0};\n  (void)pyca_line;\n"
    return f"template <class Idx>\nstatic inline void {cname}({', '.join(ps)}) {{\n{tr.decl()}{caches}{code}}}\n"
