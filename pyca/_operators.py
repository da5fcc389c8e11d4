"""Python operators on Image3D and Field3D, as PyCA had them: ``a + b``, ``a - b``, ``a * b``,
``a / b``, their in-place forms (``a += b``, ...) and reflected forms (``2 - im``), plus unary ``-a``,
``+a`` and ``abs(a)``.

Operands: Image3D, Field3D, Vec3Df / Vec3Di (fields only) and Python or NumPy numbers.

* The result of a binary operator is a new object in the MEMORY TYPE OF THE LEFT OPERAND, on the left
  operand's grid. When the right operand lives on the other side (host vs device), it is first copied
  to the left operand's memory type (a temporary copy; the operand itself is not moved).
* Image op Image and Field op Field work voxel by voxel (fields component by component).
* Field op Image (either order) applies the image to every component and gives a Field3D
  (``f * im`` scales every component by im; ``im / f`` divides im by each component).
* A Vec3Df (or Vec3Di) operand gives one constant per component of a field; with an image it is a
  TypeError. A number applies to every voxel (and component).
* In-place forms modify the left operand and keep its type: ``im += f`` is a TypeError (the result
  would be a field), ``f *= im`` scales f.

Every operator is implemented with pyca's operations (Add, AddC, Add_I, AddC_I, Sub, ..., MulCAddC),
so it runs on the CPU for host objects and on the GPU for device objects.

The operator methods themselves are those of Image3D and Field3D (pyca/_mixins.py); they call the
functions here.
"""
from __future__ import annotations

import numbers

from . import core

__all__ = ["binary", "reflected", "inplace", "neg", "pos", "absolute"]

_Image3D = core.Image3D
_Field3D = core.Field3D


def _is_number(o) -> bool:
    return isinstance(o, numbers.Real)


def _is_vec3(o) -> bool:
    return isinstance(o, (core.Vec3Df, core.Vec3Di))


def _on_device(obj) -> bool:
    return obj.memType() == core.MEM_DEVICE


def _same_side(a, b):
    """`b`, or a copy of it in `a`'s memory type when it lives on the other side (host / device)."""
    if _on_device(a) != _on_device(b):
        return b.clone(a.memType())
    return b


def _new_like(kind, ref):
    return kind(ref.grid(), ref.memType())


def _operand(o):
    """Classify an operand: 'image', 'field', 'vec' or 'num' (None when not supported)."""
    if isinstance(o, _Field3D):
        return "field"
    if isinstance(o, _Image3D):
        return "image"
    if _is_vec3(o):
        return "vec"
    if _is_number(o) and not isinstance(o, bool):
        return "num"
    return None


def _unsupported(a, b, sym):
    """NotImplemented for operands Python may still try the other way; TypeError for arrays and
    sequences, which NumPy would otherwise take over (and which PyCA never accepted)."""
    if isinstance(b, (list, tuple)) or hasattr(b, "__array__") or hasattr(b, "__array_interface__"):
        raise TypeError(
            f"unsupported operand for {type(a).__name__} {sym} {type(b).__name__}: pyca operators take an Image3D, "
            "a Field3D, a Vec3Df/Vec3Di or a number; for NumPy arithmetic use np.asarray(obj) (host memory) "
            "or obj.numpy()")
    return NotImplemented


def _const(o, kind):
    return o if kind == "vec" else float(o)  # a Vec3Di is taken where a Vec3Df is expected


# ------------------------------------------------------------------------------------------------
# Binary operators. Each function computes `a OP b` into a new object, with `a` giving the memory
# type; `a` is an Image3D or a Field3D.

def binary(a, b, name):
    ka = "field" if isinstance(a, _Field3D) else "image"
    kb = _operand(b)
    if kb is None:
        return _unsupported(a, b, _SYMBOL[name])
    if kb in ("image", "field"):
        b = _same_side(a, b)
    if ka == "image" and kb == "vec":
        return NotImplemented  # no meaning for an image; Python raises TypeError
    if ka == "image" and kb == "field":
        return _image_op_field(a, b, name)
    out = _new_like(_Field3D if ka == "field" else _Image3D, a)
    if kb in ("image", "field"):
        getattr(core, name)(out, a, b)  # Add(out, a, b): image/image, field/field, field/image
    else:
        getattr(core, name + "C")(out, a, _const(b, kb))  # AddC(out, a, c)
    return out


def _image_op_field(im, f, name):
    """im OP f for an Image3D im and a Field3D f: a Field3D in im's memory type."""
    out = _new_like(_Field3D, im)
    if name in ("Add", "Mul"):  # commutative
        getattr(core, name)(out, f, im)
    elif name == "Sub":  # im - f = -(f - im)
        core.Sub(out, f, im)
        core.Neg_I(out)
    else:  # Div: im / f, every component
        for dim in range(3):
            core.Copy(out, im, dim)
        core.Div_I(out, f)
    return out


def reflected(a, b, name):
    """b OP a, where b is not an Image3D/Field3D (a number or a Vec3) and a is."""
    ka = "field" if isinstance(a, _Field3D) else "image"
    kb = _operand(b)
    if kb is None:
        return _unsupported(a, b, _SYMBOL[name])
    if kb not in ("num", "vec") or (ka == "image" and kb == "vec"):
        return NotImplemented
    if name in ("Add", "Mul"):
        return binary(a, b, name)
    c = _const(b, kb)
    out = _new_like(_Field3D if ka == "field" else _Image3D, a)
    if name == "Sub":  # c - a = a * (-1) + c
        if ka == "field":  # MulCAddC takes Vec3Df constants for a field
            c = c if kb == "vec" else core.Vec3Df(c, c, c)
            core.MulCAddC(out, a, core.Vec3Df(-1.0, -1.0, -1.0), c)
        else:
            core.MulCAddC(out, a, -1.0, c)
    else:  # Div: c / a
        core.SetMem(out, c)
        core.Div_I(out, a)
    return out


def inplace(a, b, name):
    ka = "field" if isinstance(a, _Field3D) else "image"
    kb = _operand(b)
    if kb is None:
        return _unsupported(a, b, _SYMBOL[name] + "=")
    if ka == "image" and kb in ("field", "vec"):
        raise TypeError(
            f"Image3D {_SYMBOL[name]}= {type(b).__name__}: the result would be a Field3D; "
            f"write f = im {_SYMBOL[name]} other instead")
    if kb in ("image", "field"):
        getattr(core, name + "_I")(a, _same_side(a, b))
    else:
        getattr(core, name + "C_I")(a, _const(b, kb))
    return a


_SYMBOL = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}


def neg(self):
    out = _new_like(_Field3D if isinstance(self, _Field3D) else _Image3D, self)
    core.Neg(out, self)
    return out


def pos(self):
    return self.copy()


def absolute(self):
    out = _new_like(_Field3D if isinstance(self, _Field3D) else _Image3D, self)
    core.Abs(out, self)
    return out
