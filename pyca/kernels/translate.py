"""Python kernels to C++: the subset of Python that ``@ca.kernel``, ``@ca.func`` and the functions given
to ``ca.map``/``ca.reduce``/``ca.scan`` may use, typed statically and written as pyca ``PYCA_HD`` C++
that the host compiler and NVRTC both compile (docs/design/kernels.md).

Types: ``bool``, ``int`` (32 bits), ``float`` (32 bits, pyca's voxel type) and ``double`` (the
accumulator of ``ca.reduce``). A local variable has one type in the whole function: the widest of
the values assigned to it (bool < int < float < double). Numbers of the enclosing scopes (globals,
closures) are constants of the compiled code. Anything outside the subset raises
:class:`KernelSyntaxError` naming the function, the source line and the construct.
"""
from __future__ import annotations

import ast
import builtins
import collections
import math
import numbers

from . import interior
from . import line as linemod
from .source import KernelSyntaxError, function_node

from .values import (ARRAY_PARAM, ARRAY_TYPES, BOOL, FLOAT, INDEX, INT, INT_MAX, INT_MIN, MATH1, MATH2, MATH_BOOL,
                     MATH_INT, RANK, SCALAR_ANN, Expr, Func, cast, current_line, literal, mfun, promote, toint,
                     tuple_parts, tuple_type)

__all__ = ["KernelSyntaxError", "Func", "FuncTranslator", "Context", "function_node", "INDEX"]


class Context:
    """What one compiled source collects: helper definitions (in dependency order), the names given
    to them, and a counter for temporaries."""

    def __init__(self):
        self.helpers: list[str] = []
        self.names: dict[tuple, tuple] = {}  # (Func, arg types) -> (C name, return type, parameter types)
        self.stack: list = []
        self.counter = 0

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"pyca_{base}{self.counter}"

    def helper(self, func: Func, arg_types: tuple, where, ro: tuple = ()) -> tuple[str, str, list]:
        """(C name, return type, parameter types) of func translated for these argument types; ro: the
        names of its array parameters whose reads may go through the read-only cache (the caller never
        stores into what it passes for them)."""
        key = (func, arg_types, ro)
        if key in self.names:
            return self.names[key]
        if func in self.stack:
            where.fail(f"recursive call of {func.__name__} (helpers cannot call themselves)")
        self.stack.append(func)
        try:
            node, lines, filename = function_node(func.fn)
            cname = f"pyca_f_{func.__name__}_{len(self.names)}"
            tr = FuncTranslator(func.fn, node, lines, filename, self, kind="func", param_types=arg_types,
                                cname=cname, what="pyca helper", ro_arrays=ro)
            code = tr.translate()
            self.names[key] = (cname, tr.ret_type, [tr.params[n] for n in tr.args])
            self.helpers.append(code)
        finally:
            self.stack.pop()
        return self.names[key]


def _array_of(node) -> str | None:
    return node.value.id if isinstance(node.value, ast.Name) else None


class _Unknown(Exception):
    """Type inference: a local whose type is not known yet."""


class FuncTranslator:
    """Translates one function (kind "kernel": a per-voxel body; kind "func": a scalar helper or a
    lambda) to C++. param_types: {name: type} for kernels (types or "Image3D"/"Field3D"), a tuple of
    scalar types (or None: from annotations) for helpers."""

    def __init__(self, fn, node, lines, filename, ctx: Context, *, kind: str, param_types, cname: str,
                 ret_type: str | None = None, what: str = "pyca kernel", domain: str | None = None,
                 ro_arrays: tuple = ()):
        self.fn, self.node, self.lines, self.filename = fn, node, lines, filename
        self.ro_arrays = set(ro_arrays)  # a helper's array parameters read through the read-only cache
        self.domain = domain  # the array whose grid a kernel visits: its own voxel is always inside
        self.ctx, self.kind, self.cname, self.what = ctx, kind, cname, what
        self.ret_type = ret_type
        self.args = [a.arg for a in node.args.args]
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            self.fail_node(node, "*args, **kwargs, keyword-only, positional-only or default parameters")
        self.globals = fn.__globals__
        self.closure = {}
        if fn.__closure__:
            for n, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[n] = cell.cell_contents
                except ValueError:
                    pass
        if isinstance(param_types, dict):
            self.params = dict(param_types)
        else:
            self.params = {}
            anns = {x.arg: x.annotation for x in node.args.args}
            for i, n in enumerate(self.args):
                t = param_types[i] if param_types is not None and i < len(param_types) else None
                ann = self._ann_type(anns.get(n)) if anns.get(n) is not None else None
                self.params[n] = ann or t
                if self.params[n] is None:
                    self.fail_node(node, f"parameter {n!r} has no type (annotate it: float, int or bool)")
                if ann in ARRAY_TYPES and t != ann:
                    self.fail_node(node, f"the {ann} parameter {n!r} given {'a ' + t if t else 'no array'}")
                if t in ARRAY_TYPES and ann not in (None, t):
                    self.fail_node(node, f"the {ann} parameter {n!r} given the {t} (index it: name[i, j, k])")
            if self.ret_type is None and isinstance(node, ast.FunctionDef) and node.returns is not None:
                self.ret_type = self._ann_type(node.returns)
        self.locals: dict[str, str] = {}
        self.local_names = self._assigned_names()
        # ca.line: its reads rewritten as image reads marked with their offset (pyca/kernels/line.py)
        self.node, self.line = linemod.rewrite(self, node)
        if self.line is not None:
            node = self.node
            self.local_names = self._assigned_names()
        # Device code generation: arrays never stored into (their reads before any store of this voxel's
        # thread go through the read-only data cache, __ldg) and names assigned once (i, j, k of
        # ca.index(): a store at exactly (i, j, k) of the domain array needs no bounds check).
        self.stored = {_array_of(n) for n in ast.walk(node) if isinstance(n, ast.Subscript)
                       and isinstance(n.ctx, ast.Store)} - {None}
        self.n_stores = collections.Counter(n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                                            and isinstance(n.ctx, ast.Store))
        self.own = None  # (v_i, v_j, v_k) once i, j, k = ca.index() is seen with each name assigned once
        self.own_names: tuple = ()
        self.fast_reads: set = set()  # ids of reads emitted without clamps (interior copies of loops, GPU)
        self.after_store = False  # some store may precede the code being emitted (in this voxel's thread)
        self._stores: dict[int, bool] = {}  # id(statement) -> whether it stores into an array
        self.cur = node
        self.infer = False
        self.returns: list[str] = []

    # -- errors
    def _line(self, node) -> int:
        return getattr(node, "lineno", getattr(self.node, "lineno", 0))

    def fail_node(self, node, what: str):
        ln = self._line(node)
        text = self.lines[ln - 1].strip() if 0 < ln <= len(self.lines) else ""
        name = self.fn.__qualname__
        raise KernelSyntaxError(f"{self.what} {name} ({self.filename}:{ln}: {text!r}): {what} is not supported "
                                "in a kernel (see docs/kernels.md)")

    def fail(self, what: str):
        self.fail_node(self.cur, what)

    def _ann_type(self, ann) -> str | None:
        s = ast.unparse(ann).strip("'\"").split(".")[-1]
        if s in SCALAR_ANN:
            return SCALAR_ANN[s]
        if s in ARRAY_TYPES and self.kind == "func":
            return s
        self.fail_node(ann, f"parameter type {s!r} (helpers take float, int, bool, Image3D or Field3D)")

    def _assigned_names(self) -> set[str]:
        out = set()
        body = self.node.body if isinstance(self.node.body, list) else []
        for st in body:
            for n in ast.walk(st):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    out.add(n.id)
        return out - set(self.args)

    # -- names and static values
    def static(self, node):
        """The Python object a global/closure name or attribute chain stands for, or a sentinel."""
        if isinstance(node, ast.Name):
            if node.id in self.local_names or node.id in self.params:
                return _MISSING
            if node.id in self.closure:
                return self.closure[node.id]
            if node.id in self.globals:
                return self.globals[node.id]
            return getattr(builtins, node.id, _MISSING)
        if isinstance(node, ast.Attribute):
            base = self.static(node.value)
            if base is _MISSING:
                return _MISSING
            return getattr(base, node.attr, _MISSING)
        return _MISSING

    def var(self, name: str) -> str:
        return f"v_{name}" if name not in self.params else f"p_{name}"

    # -- translation entry
    def translate(self) -> str:
        if isinstance(self.node, ast.Lambda):
            body = [ast.Return(value=self.node.body, lineno=self.node.lineno, col_offset=0)]
        else:
            body = self.node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]
        self.body = body
        # Type inference: repeat until the locals' types stop changing.
        self.infer = True
        for _ in range(20):
            before = dict(self.locals)
            self.returns = []
            self.block(body, 0)
            if before == self.locals:
                break
        self.infer = False
        for n in sorted(self.local_names):
            if n not in self.locals:
                self.locals[n] = INT  # only ever assigned something unusable: reported below
        if self.kind == "func":
            tups = [tuple_parts(r) for r in self.returns]
            if any(tups):  # return a, b, ...: every return the same number of numbers
                if not all(tups) or len({n for _, n in tups}) != 1 or self.ret_type is not None:
                    self.fail_node(self.node, "a helper returning tuples of different lengths, or a tuple and a "
                                   "number, or a tuple with a return annotation")
                self.ret_type = tuple_type(promote(*(e for e, _ in tups)), tups[0][1])
            rt = self.ret_type or (promote(*self.returns) if self.returns else None)
            if rt is None:
                self.fail_node(self.node, "a helper that returns no value")
            self.ret_type = rt
            if not _always_returns(body):
                self.fail_node(self.node, "a helper that can end without returning a value")
        self.returns = []
        self.after_store = False
        code = self.block(body, 1)
        decl = "".join(f"  {self.locals[n]} v_{n} = 0;\n" for n in sorted(self.locals))
        if self.kind == "kernel":
            ps = ["int pyca_i", "int pyca_j", "int pyca_k"]
            for n in self.args:
                t = self.params[n]
                ps.append(ARRAY_PARAM.get(t, t) + f" p_{n}")
            if self.line is not None:
                ps.append("pyca_k::Line pyca_line")
            ps.append("pyca_k::Err* pyca_err")
            return f"template <class Idx>\nPYCA_HD void {self.cname}({', '.join(ps)}) {{\n{decl}{code}}}\n"
        ps = [ARRAY_PARAM.get(self.params[n], self.params[n]) + f" p_{n}" for n in self.args]
        ps.append("pyca_k::Err* pyca_err")
        # a helper reading arrays: a template on the voxel index type, as the kernel body that calls it
        tmpl = "template <class Idx>\n" if any(self.params[n] in ARRAY_TYPES for n in self.args) else ""
        return (f"{tmpl}PYCA_HD {self.ret_type} {self.cname}({', '.join(ps)}) {{\n  (void)pyca_err;\n{decl}{code}}}\n")

    # -- statements
    def block(self, stmts, depth: int) -> str:
        return "".join(self.stmt(s, depth) for s in stmts)

    def stmt(self, s, depth: int) -> str:
        self.cur = s
        current_line[0] = self._line(s)
        ind = "  " * depth
        stores = self._stores.get(id(s))
        if stores is None:
            stores = self._stores[id(s)] = any(isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
                                               for n in ast.walk(s))
        if stores and isinstance(s, (ast.For, ast.While)):
            self.after_store = True  # a later iteration's reads follow an earlier one's stores
        try:
            return self._stmt(s, depth, ind)
        except _Unknown:
            return ""
        finally:
            self.after_store |= stores

    def _set_local(self, name: str, t: str, node):
        if name in self.params:
            pt = self.params[name]
            if pt in ARRAY_TYPES:
                self.fail_node(node, f"assigning to the array parameter {name!r}")
            return
        if t in ARRAY_TYPES or t not in RANK:
            self.fail_node(node, f"a variable holding a {t}")
        old = self.locals.get(name)
        self.locals[name] = t if old is None or RANK[t] > RANK[old] else old

    def _assign_name(self, name: str, e: Expr, node, ind: str) -> str:
        self._set_local(name, e.type, node)
        if self.infer:
            return ""
        t = self.params.get(name) or self.locals[name]
        return f"{ind}{self.var(name)} = {cast(e, t)};\n"

    def _stmt(self, s, depth, ind) -> str:
        info = getattr(s, "pyca_line", None)
        if info is not None:  # t = ca.line(im, axis, radius): the axis checked (the CPU raises)
            ax = self.expr(info.axis)
            if self.infer or ax.const in (0, 1, 2):
                return ""
            return f"{ind}pyca_k::line_check({ax.code}, pyca_err, {self._line(s)});\n"
        if isinstance(s, ast.Assign):
            out = ""
            for tgt in s.targets:
                out += self.assign(tgt, s.value, s, ind)
            return out
        if isinstance(s, ast.AnnAssign):
            if not isinstance(s.target, ast.Name) or s.value is None:
                self.fail("an annotation without a value or on something other than a name")
            t = self._ann_type(s.annotation)
            self._set_local(s.target.id, t, s)
            return self.assign(s.target, s.value, s, ind)
        if isinstance(s, ast.AugAssign):
            tgt = s.target
            load = ast.copy_location(
                type(tgt)(**{f: getattr(tgt, f) for f in tgt._fields if f != "ctx"}, ctx=ast.Load()), tgt)
            val = ast.copy_location(ast.BinOp(left=load, op=s.op, right=s.value), s)
            return self.assign(tgt, val, s, ind)
        if isinstance(s, ast.If):
            c = self.cond(s.test)
            out = f"{ind}if ({c}) {{\n{self.block(s.body, depth + 1)}{ind}}}"
            if s.orelse:
                out += f" else {{\n{self.block(s.orelse, depth + 1)}{ind}}}"
            return out + "\n"
        if isinstance(s, ast.While):
            if s.orelse:
                self.fail("while ... else")
            c = self.cond(s.test)
            return f"{ind}while ({c}) {{\n{ind}  PYCA_K_SCALAR_LOOP;\n{self.block(s.body, depth + 1)}{ind}}}\n"
        if isinstance(s, ast.For):
            return self.for_range(s, depth, ind)
        if isinstance(s, ast.Break):
            return f"{ind}break;\n"
        if isinstance(s, ast.Continue):
            return f"{ind}continue;\n"
        if isinstance(s, ast.Pass):
            return ""
        if isinstance(s, ast.Return):
            if self.kind == "kernel":
                if s.value is not None:
                    self.fail("returning a value from a kernel (write results into an output image)")
                return f"{ind}return;\n"
            if s.value is None:
                self.fail("a bare return in a helper")
            if isinstance(s.value, ast.Tuple):  # return a, b, ...: unpacked by the caller, x, y, ... = f(...)
                es = [self.expr(v) for v in s.value.elts]
                if not 2 <= len(es) <= 8 or any(e.type not in RANK for e in es):
                    self.fail("returning a tuple of other than 2 to 8 numbers")
                self.returns.append(tuple_type(promote(*(e.type for e in es)), len(es)))
                if self.infer:
                    return ""
                et = tuple_parts(self.ret_type)[0]
                return f"{ind}return {self.ret_type}{{{{{', '.join(cast(e, et) for e in es)}}}}};\n"
            e = self.expr(s.value)
            self.returns.append(e.type)
            if self.infer:
                return ""
            return f"{ind}return {cast(e, self.ret_type)};\n"
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                return ""  # a string as a comment
            if isinstance(s.value, ast.Call):
                e = self.expr(s.value)
                return "" if self.infer else f"{ind}(void)({e.code});\n"
            self.fail("an expression statement")
        names = {ast.With: "a with block", ast.Try: "try/except", ast.Raise: "raise", ast.Assert: "assert",
                 ast.Global: "global", ast.Nonlocal: "nonlocal", ast.FunctionDef: "a nested function",
                 ast.ClassDef: "a class", ast.Delete: "del", ast.Import: "import", ast.ImportFrom: "import"}
        self.fail(names.get(type(s), f"the statement {type(s).__name__}"))

    def assign(self, tgt, value, s, ind) -> str:
        if isinstance(tgt, ast.Name):
            return self._assign_name(tgt.id, self.expr(value), s, ind)
        if isinstance(tgt, ast.Subscript):
            arr, idx = self.subscript_parts(tgt)
            if self.kind == "func":
                self.fail(f"storing into the array {arr!r} in a helper (helpers read arrays; the kernel writes)")
            e = self.expr(value)
            if e.type not in RANK:
                self.fail(f"storing a {e.type} into an image")
            if self.infer:
                return ""
            ln = self._line(s)
            fn = "wr" if self.params[arr] == "Image3D" else "wrf"
            if arr == self.domain and self.own is not None and tuple(idx[:3]) == self.own:
                fn += "own"  # this voxel of the grid visited: inside it
            return f"{ind}pyca_k::{fn}<Idx>(p_{arr}, {', '.join(idx)}, {cast(e, FLOAT)}, pyca_err, {ln});\n"
        if isinstance(tgt, ast.Tuple):
            names = []
            for el in tgt.elts:
                if not isinstance(el, ast.Name):
                    self.fail("unpacking into something other than names")
                names.append(el.id)
            if isinstance(value, ast.Call) and self.static(value.func) is INDEX:
                if self.kind != "kernel":
                    self.fail("ca.index() outside a @ca.kernel function")
                if len(names) != 3 or value.args or value.keywords:
                    self.fail("ca.index() unpacked into other than three names (i, j, k = ca.index())")
                if all(self.n_stores[n] == 1 for n in names) and len(set(names)) == 3:
                    self.own = tuple(f"v_{n}" for n in names)
                    self.own_names = tuple(names)
                return "".join(self._assign_name(n, Expr(f"pyca_{c}", INT), s, ind) for n, c in zip(names, "ijk"))
            if isinstance(value, ast.Attribute) and value.attr == "shape":
                arr = self.array_name(value.value)
                if len(names) != 3:
                    self.fail("unpacking shape into other than three names (nx, ny, nz = im.shape)")
                return "".join(self._assign_name(n, Expr(f"p_{arr}.size.{c}", INT), s, ind)
                               for n, c in zip(names, "xyz"))
            if isinstance(value, ast.Tuple) and len(value.elts) == len(names):
                vals = [self.expr(v) for v in value.elts]
                out, tmps = "", []
                for v in vals:
                    tmp = self.ctx.fresh("t")
                    tmps.append(tmp)
                    if v.type not in RANK:
                        self.fail(f"a tuple holding a {v.type}")
                    out += f"{ind}const {v.type} {tmp} = {v.code};\n"
                for n, v, tmp in zip(names, vals, tmps):
                    out += self._assign_name(n, Expr(tmp, v.type), s, ind)
                return "" if self.infer else out
            if isinstance(value, ast.Call) and isinstance(self.static(value.func), Func):
                e = self.expr(value)  # x, y, z = a helper's return a, b, c
                parts = tuple_parts(e.type)
                if parts is None or parts[1] != len(names):
                    self.fail(f"unpacking into {len(names)} names a helper that returns "
                              f"{parts[1] if parts else 1} value(s)")
                tmp = self.ctx.fresh("t")
                out = "".join(self._assign_name(n, Expr(f"{tmp}.v[{c}]", parts[0]), s, ind)
                              for c, n in enumerate(names))
                return "" if self.infer else f"{ind}const {e.type} {tmp} = {e.code};\n" + out
            self.fail("this tuple unpacking (only i, j, k = ca.index(), nx, ny, nz = im.shape, x, y, z = a helper's "
                      "return a, b, c and a, b = x, y)")
        self.fail(f"assigning to {type(tgt).__name__}")

    def for_range(self, s, depth, ind) -> str:
        if s.orelse:
            self.fail("for ... else")
        if not isinstance(s.target, ast.Name):
            self.fail("a for loop whose target is not one name")
        it = s.iter
        if not (isinstance(it, ast.Call) and self.static(it.func) is range and not it.keywords
                and 1 <= len(it.args) <= 3):
            self.fail("a for loop over something other than range(...)")
        args = [self.expr(a) for a in it.args]
        for a in args:
            if a.type not in (INT, BOOL):
                self.fail(f"range() of a {a.type} (range takes ints)")
        start, stop, step = (Expr("0", INT, 0), args[0], Expr("1", INT, 1)) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else Expr("1", INT, 1))
        name = s.target.id
        self._set_local(name, INT, s)
        before = self.after_store
        body = self.block(s.body, depth + 2)
        if self.infer:
            return ""
        t, e, st = self.ctx.fresh("i"), self.ctx.fresh("e"), self.ctx.fresh("s")
        if step.const is not None:
            if step.const == 0:
                self.fail("range() with step 0")
            cond = f"{t} < {e}" if step.const > 0 else f"{t} > {e}"
            head = f"{ind}{{\n{ind}  const int {e} = {stop.code};\n"
            loop = f"{ind}  PYCA_K_UNROLL for (int {t} = {start.code}; {cond}; {t} += {step.code}) {{\n"
            if step.const > 0 and self.domain is not None and self.own and interior.eligible(s, name):
                a = self.ctx.fresh("a")
                p = interior.plan(s, name, dict(zip(self.own_names, self.own)), self.params, a, e)
                if p is not None:  # the GPU's interior copy (pyca/kernels/interior.py)
                    after, self.after_store, self.fast_reads = self.after_store, before, p[1]
                    fast = self.block(s.body, depth + 3)
                    self.after_store, self.fast_reads = after, set()
                    head += f"{ind}  const int {a} = {start.code};\n"
                    loop = loop.replace(f"= {start.code};", f"= {a};", 1)
                    # 32-bit indices only: in the 64-bit instantiation the copy cost the kernel 8 registers
                    head += (f"#if PYCA_K_INTERIOR\n{ind}  if (sizeof(Idx) == 4 && {p[0]}) {{\n  {loop}"
                             f"{ind}      PYCA_K_SCALAR_LOOP;\n{ind}      {self.var(name)} = {t};\n{fast}"
                             f"{ind}    }}\n{ind}  }} else\n#endif\n")
        else:
            head = (f"{ind}{{\n{ind}  const int {e} = {stop.code};\n{ind}  const int {st} = {step.code};\n"
                    f"{ind}  if ({st} == 0) pyca_k::report(pyca_err, pyca_k::kErrRange, {self._line(s)});\n")
            loop = f"{ind}  if ({st} != 0) for (int {t} = {start.code}; {st} > 0 ? {t} < {e} : {t} > {e}; {t} += {st}) {{\n"
        assign = f"{ind}    PYCA_K_SCALAR_LOOP;\n{ind}    {self.var(name)} = {t};\n"
        return head + loop + assign + body + f"{ind}  }}\n{ind}}}\n"

    # -- expressions
    def cond(self, node) -> str:
        e = self.expr(node, condition=True)
        if e.type not in RANK:
            self.fail(f"a {e.type} as a condition")
        return e.code if e.type == BOOL else f"({e.code}) != 0"

    def array_name(self, node) -> str:
        if isinstance(node, ast.Name) and self.params.get(node.id) in ARRAY_TYPES:
            return node.id
        if isinstance(node, (ast.List, ast.Tuple, ast.Dict)):
            self.fail(f"a {type(node).__name__.lower()}")
        self.fail("indexing or .shape of something other than an Image3D/Field3D parameter")

    def subscript_parts(self, node) -> tuple[str, list[str]]:
        arr = self.array_name(node.value)
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if any(isinstance(x, ast.Slice) for x in elts):
            self.fail("slicing (index one voxel: im[i, j, k])")
        want = 3 if self.params[arr] == "Image3D" else 4
        if len(elts) != want:
            self.fail(f"{self.params[arr]} {arr} indexed with {len(elts)} indices (it takes "
                      f"{'[i, j, k]' if want == 3 else '[i, j, k, c]'})")
        idx = []
        for x in elts:
            e = self.expr(x)
            if e.type not in (INT, BOOL):
                self.fail(f"a {e.type} index (indices are ints: use int(...))")
            idx.append(e.code)
        return arr, idx

    def _read_only(self, arr: str) -> bool:
        """Whether reads of the array arr may go through the read-only cache: not stored into by this
        kernel (a helper: as its caller said), or not yet in this voxel's thread."""
        if self.kind == "func":
            return arr in self.ro_arrays
        return arr not in self.stored and not self.after_store

    def expr(self, node, condition: bool = False) -> Expr:
        self.cur_expr = node
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return Expr(literal(v, BOOL), BOOL, v)
            if isinstance(v, int):
                if not INT_MIN <= v <= INT_MAX:
                    self.fail(f"the integer constant {v} (ints are 32 bits)")
                return Expr(literal(v, INT), INT, v)
            if isinstance(v, float):
                return Expr(literal(v, FLOAT), FLOAT, v)
            self.fail(f"the constant {v!r}")
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        if isinstance(node, ast.UnaryOp):
            e = self.expr(node.operand, condition=isinstance(node.op, ast.Not))
            if e.type not in RANK:
                self.fail(f"an operator on a {e.type}")
            if isinstance(node.op, ast.Not):
                return Expr(f"(!({e.code}))", BOOL)
            if isinstance(node.op, ast.Invert):
                if e.type not in (INT, BOOL):
                    self.fail("~ on a float")
                return Expr(f"(~{cast(e, INT)})", INT)
            t = promote(e.type)
            op = "-" if isinstance(node.op, ast.USub) else "+"
            const = (-e.const if op == "-" else +e.const) if e.const is not None else None
            return Expr(f"({op}{cast(e, t)})", t, const)
        if isinstance(node, ast.BoolOp):
            vals = [self.expr(v, condition=True) for v in node.values]
            if not condition and any(v.type != BOOL for v in vals):
                self.fail("and/or on values that are not bools outside a condition (Python would return one of "
                          "the values; compare them instead)")
            op = " && " if isinstance(node.op, ast.And) else " || "
            return Expr("(" + op.join(v.code if v.type == BOOL else f"(({v.code}) != 0)" for v in vals) + ")", BOOL)
        if isinstance(node, ast.Compare):
            parts = []
            left = self.expr(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.expr(right_node)
                sym = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}.get(type(op))
                if sym is None:
                    self.fail(f"the comparison {type(op).__name__} (is, in: only numbers compare)")
                if left.type not in RANK or right.type not in RANK:
                    self.fail("comparing something other than numbers")
                t = promote(left.type, right.type)
                parts.append(f"({cast(left, t)} {sym} {cast(right, t)})")
                left = right
            return Expr("(" + " && ".join(parts) + ")", BOOL)
        if isinstance(node, ast.IfExp):
            c = self.cond(node.test)
            a, b = self.expr(node.body), self.expr(node.orelse)
            if a.type not in RANK or b.type not in RANK:
                self.fail("a conditional expression that is not a number")
            t = max(a.type, b.type, key=lambda x: RANK[x])
            return Expr(f"(({c}) ? {cast(a, t)} : {cast(b, t)})", t)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
                arr = self.array_name(node.value.value)
                k = node.slice
                if not (isinstance(k, ast.Constant) and isinstance(k.value, int) and -3 <= k.value <= 2):
                    self.fail("shape indexed by other than a constant 0, 1 or 2")
                return Expr(f"p_{arr}.size.{'xyz'[k.value]}", INT)
            arr, idx = self.subscript_parts(node)
            ro = ", true" if self._read_only(arr) else ""
            if getattr(node, "pyca_line_d", None) is not None:  # t[d] of t = ca.line(im, axis, radius)
                d = self.expr(node.pyca_line_d)
                if id(node) in self.fast_reads:  # within the tile (an interior copy of a loop, GPU)
                    return Expr(f"pyca_line.s[{cast(d, INT)} * pyca_line.stride]", FLOAT)
                own = ", ".join(self.expr(ast.Name(id=x, ctx=ast.Load())).code for x in self.line.own)
                return Expr(f"pyca_k::line_rd<Idx{ro}>(pyca_line, p_{arr}, {own}, {self.expr(self.line.axis).code}, "
                            f"{cast(d, INT)})", FLOAT)
            fn = ("rd" if self.params[arr] == "Image3D" else "rdf") + ("u" if id(node) in self.fast_reads else "")
            return Expr(f"pyca_k::{fn}<Idx{ro}>(p_{arr}, {', '.join(idx)})", FLOAT)
        if isinstance(node, ast.Attribute):
            v = self.static(node)
            if v is not _MISSING and isinstance(v, numbers.Number):
                return self.constant(v)
            if node.attr == "shape":
                self.fail("shape used as a value (unpack it: nx, ny, nz = im.shape, or index it: im.shape[0])")
            self.fail(f"the attribute .{node.attr}")
        names = {ast.Lambda: "a lambda inside a kernel", ast.ListComp: "a list comprehension", ast.List: "a list",
                 ast.Dict: "a dict", ast.Set: "a set", ast.Tuple: "a tuple here", ast.JoinedStr: "an f-string",
                 ast.GeneratorExp: "a generator", ast.NamedExpr: "the := operator", ast.Starred: "*unpacking"}
        self.fail(names.get(type(node), f"the expression {type(node).__name__}"))

    def constant(self, v) -> Expr:
        if isinstance(v, (bool,)) or type(v).__name__ == "bool_":
            return Expr(literal(bool(v), BOOL), BOOL, bool(v))
        if isinstance(v, numbers.Integral):
            if not INT_MIN <= int(v) <= INT_MAX:
                self.fail(f"the integer constant {v} (ints are 32 bits)")
            return Expr(literal(int(v), INT), INT, int(v))
        if isinstance(v, numbers.Real):
            return Expr(literal(float(v), FLOAT), FLOAT, float(v))
        self.fail(f"the value {v!r}")

    def name(self, node) -> Expr:
        n = node.id
        if n in self.params:
            t = self.params[n]
            if t in ARRAY_TYPES:
                self.fail(f"the {t} {n!r} used as a value (index it: {n}[i, j, k])")
            return Expr(f"p_{n}", t)
        if n in self.local_names:
            if n not in self.locals:
                if self.infer:
                    raise _Unknown(n)
                self.fail(f"the variable {n!r} before it is assigned")
            return Expr(f"v_{n}", self.locals[n])
        v = self.static(node)
        if v is _MISSING:
            self.fail(f"the undefined name {n!r}")
        if isinstance(v, numbers.Number) and not isinstance(v, complex):
            return self.constant(v)
        self.fail(f"the name {n!r} (a {type(v).__name__}) as a value")

    def binop(self, node) -> Expr:
        a, b = self.expr(node.left), self.expr(node.right)
        if a.type not in RANK or b.type not in RANK:
            self.fail("arithmetic on something other than numbers")
        op = node.op
        ln = self._line(node)
        t = promote(a.type, b.type)
        sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}.get(type(op))
        if sym:
            return Expr(f"({cast(a, t)} {sym} {cast(b, t)})", t)
        if isinstance(op, ast.Div):
            t = promote(t, FLOAT)
            return Expr(f"({cast(a, t)} / {cast(b, t)})", t)
        if isinstance(op, (ast.FloorDiv, ast.Mod)):
            f = "floordiv" if isinstance(op, ast.FloorDiv) else "mod"
            if t == INT:
                return Expr(f"pyca_k::{f}({cast(a, t)}, {cast(b, t)}, pyca_err, {ln})", INT)
            return Expr(f"pyca_k::{f}({cast(a, t)}, {cast(b, t)})", t)
        if isinstance(op, ast.Pow):
            if b.const is not None and isinstance(b.const, int) and not isinstance(b.const, bool) and b.const >= 0:
                if t == INT:
                    return Expr(f"pyca_k::ipow({cast(a, INT)}, {b.const})", INT)
                if b.const == 2:
                    return Expr(f"pyca_k::sq({cast(a, t)})", t)
            t = promote(t, FLOAT)
            return Expr(f"{mfun('pow', t)}({cast(a, t)}, {cast(b, t)})", t)
        sym = {ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&"}.get(type(op))
        if sym:
            if t != INT:
                self.fail(f"the bit operator {sym} on floats")
            return Expr(f"({cast(a, INT)} {sym} {cast(b, INT)})", INT)
        self.fail(f"the operator {type(op).__name__}")

    def call(self, node) -> Expr:
        f = self.static(node.func)
        if node.keywords:
            self.fail("keyword arguments in a call")
        if f is INDEX:
            self.fail("ca.index() other than as i, j, k = ca.index()")
        if isinstance(f, Func):  # a helper: numbers, and the arrays of this function (read only)
            args = [Expr(f"p_{a.id}", self.params[a.id]) if isinstance(a, ast.Name) and
                    self.params.get(a.id) in ARRAY_TYPES else self.expr(a) for a in node.args]
        else:
            args = [self.expr(a) for a in node.args]
        for a in args:
            if a.type not in RANK and not (isinstance(f, Func) and a.type in ARRAY_TYPES):
                self.fail(f"passing a {a.type} to a function")
        if isinstance(f, Func):
            if len(args) != f.fn.__code__.co_argcount:
                self.fail(f"calling {f.__name__} with {len(args)} arguments (it takes {f.fn.__code__.co_argcount})")
            names = f.fn.__code__.co_varnames
            ro = tuple(names[n] for n, (a, x) in enumerate(zip(args, node.args))
                       if a.type in ARRAY_TYPES and self._read_only(x.id))
            cname, rt, params = self.ctx.helper(f, tuple(promote(a.type) if a.type == BOOL else a.type for a in args),
                                                self, ro)
            tmpl = "<Idx>" if any(a.type in ARRAY_TYPES for a in args) else ""
            codes = [a.code if a.type in ARRAY_TYPES else cast(a, t) for a, t in zip(args, params)] + ["pyca_err"]
            return Expr(f"{cname}{tmpl}({', '.join(codes)})", rt)
        if f in (min, max):
            if len(args) < 2:
                self.fail(f"{f.__name__}() of fewer than two numbers (it takes numbers, not sequences)")
            t = promote(*(a.type for a in args))
            code = cast(args[0], t)
            for a in args[1:]:
                code = f"pyca_k::{f.__name__}2<{t}>({code}, {cast(a, t)})"
            return Expr(code, t)
        if f is abs and len(args) == 1:
            t = promote(args[0].type)
            return Expr(f"pyca_k::absv({cast(args[0], t)})", t)
        if f is float and len(args) == 1:
            return Expr(cast(args[0], FLOAT), FLOAT, float(args[0].const) if args[0].const is not None else None)
        if f is int and len(args) == 1:
            return Expr(cast(args[0], INT), INT)
        if f is bool and len(args) == 1:
            return Expr(f"(({args[0].code}) != 0)", BOOL)
        if f is round and len(args) == 1:
            t = promote(args[0].type, FLOAT)
            return Expr(toint(f"{mfun('rint', t)}({cast(args[0], t)})"), INT)
        mname = _math_name(f)
        if mname is not None:
            if mname in MATH1 and len(args) == 1:
                t = promote(args[0].type, FLOAT)
                return Expr(f"{mfun(MATH1[mname], t)}({cast(args[0], t)})", t)
            if mname == "log" and len(args) == 2:
                t = promote(args[0].type, args[1].type, FLOAT)
                lg = mfun("log", t)
                return Expr(f"({lg}({cast(args[0], t)}) / {lg}({cast(args[1], t)}))", t)
            if mname in MATH2 and len(args) == 2:
                t = promote(args[0].type, args[1].type, FLOAT)
                return Expr(f"{mfun(MATH2[mname], t)}({cast(args[0], t)}, {cast(args[1], t)})", t)
            if mname in MATH_INT and len(args) == 1:
                if args[0].type in (INT, BOOL):
                    return Expr(cast(args[0], INT), INT)
                t = args[0].type
                return Expr(toint(f"{mfun(MATH_INT[mname], t)}({args[0].code})"), INT)
            if mname in MATH_BOOL and len(args) == 1:
                t = promote(args[0].type, FLOAT)
                return Expr(f"bool({MATH_BOOL[mname]}({cast(args[0], t)}))", BOOL)
            self.fail(f"math.{mname} with {len(args)} arguments")
        label = ast.unparse(node.func)
        self.fail(f"calling {label}() (kernels call math.*, min, max, abs, float, int, round and @ca.func helpers)")


_MISSING = object()
_MATH_OBJECTS = {getattr(math, n): n for n in list(MATH1) + list(MATH2) + list(MATH_INT) + list(MATH_BOOL) + ["log"]
                 if hasattr(math, n)}


def _math_name(f) -> str | None:
    try:
        return _MATH_OBJECTS.get(f)
    except TypeError:
        return None


def _always_returns(stmts) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    return False
