"""The kernel language's values as C++ (pyca.kernels.translate): the scalar types and their ranks, a
helper's tuple, literals, casts and promotions, the math functions kernels may call, and the objects
behind ``ca.index`` and ``@ca.func``."""
from __future__ import annotations

import inspect
import math

from .source import KernelSyntaxError

__all__ = ["BOOL", "INT", "FLOAT", "DOUBLE", "RANK", "SCALAR_ANN", "ARRAY_TYPES", "ARRAY_PARAM", "INT_MIN", "INT_MAX",
           "MATH1", "MATH2", "MATH_INT", "MATH_BOOL", "MATH_CONST", "INDEX", "Func", "Expr", "literal", "current_line",
           "toint", "cast", "promote", "mfun", "tuple_type", "tuple_parts"]

BOOL, INT, FLOAT, DOUBLE = "bool", "int", "float", "double"
RANK = {BOOL: 0, INT: 1, FLOAT: 2, DOUBLE: 3}
SCALAR_ANN = {"float": FLOAT, "int": INT, "bool": BOOL, "double": DOUBLE}
ARRAY_TYPES = ("Image3D", "Field3D")
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
ARRAY_PARAM = {"Image3D": "const pyca::ImageView&", "Field3D": "const pyca::FieldView&"}


def tuple_type(t: str, n: int) -> str:
    """The C++ type of a helper's return of n numbers of type t (`return a, b, c`)."""
    return f"pyca_k::Tup<{t}, {n}>"


def tuple_parts(t: str):
    """(element type, n) of a tuple_type, or None."""
    if not t.startswith("pyca_k::Tup<"):
        return None
    e, n = t[len("pyca_k::Tup<"):-1].split(", ")
    return e, int(n)


def INDEX():  # noqa: N802 - the object behind ca.index (see pyca.kernels.index)
    raise RuntimeError("ca.index() is only meaningful inside a @ca.kernel function")


class Func:
    """A helper written in the kernel subset of Python (``@ca.func``): callable from kernels (and from
    Python, as the plain function). Parameters are typed by their annotations (float, int, bool),
    else by the arguments of each call site; the return type by its annotation, else inferred."""

    def __init__(self, fn):
        if not inspect.isfunction(fn):
            raise TypeError(f"@ca.func needs a Python function, got {type(fn).__name__}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<pyca kernel helper {self.__qualname__}>"


# ------------------------------------------------------------------------------------------------
class Expr:
    """A translated expression: C++ code, its type, and its value when it is a constant."""

    __slots__ = ("code", "type", "const")

    def __init__(self, code: str, type_: str, const=None):
        self.code, self.type, self.const = code, type_, const


def literal(value, t: str) -> str:
    if t == BOOL:
        return "true" if value else "false"
    if t == INT:
        return str(int(value))
    v = float(value)
    if math.isnan(v):
        return "pyca_k::fnan()" if t == FLOAT else "double(pyca_k::fnan())"
    if math.isinf(v):
        s = "pyca_k::finf()" if t == FLOAT else "double(pyca_k::finf())"
        return s if v > 0 else f"(-{s})"
    r = repr(v)
    if "e" not in r and "." not in r:
        r += ".0"
    return r + ("f" if t == FLOAT else "")


current_line = [0]  # the Python line of the statement being translated (for toint's error record)


def toint(code: str) -> str:
    return f"pyca_k::toint({code}, pyca_err, {current_line[0]})"


def cast(e: Expr, t: str) -> str:
    if e.const is not None:
        if t == INT and isinstance(e.const, float):
            if not math.isfinite(e.const) or not INT_MIN <= int(e.const) <= INT_MAX:
                raise KernelSyntaxError(f"int() of the constant {e.const!r} (line {current_line[0]})")
            return str(int(e.const))
        return literal(e.const, t)
    if e.type == t:
        return e.code
    if t == INT and e.type in (FLOAT, DOUBLE):
        return toint(e.code)
    return f"{t}({e.code})"


def promote(*types: str) -> str:
    t = max(types, key=lambda x: RANK[x])
    return INT if t == BOOL else t


# Functions of math with the same meaning in C (float overloads get the f suffix).
MATH1 = {n: n for n in ("sqrt exp log sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh log2 log10 "
                         "expm1 log1p erf erfc fabs cbrt").split()}
MATH2 = {"atan2": "atan2", "pow": "pow", "hypot": "hypot", "copysign": "copysign", "fmod": "fmod"}
MATH_INT = {"floor": "floor", "ceil": "ceil", "trunc": "trunc"}  # return int in Python
MATH_BOOL = {"isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite"}
MATH_CONST = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan}


def mfun(name: str, t: str) -> str:
    return name + ("f" if t == FLOAT else "")
