"""Spacings and origins: non-finite or non-positive values are refused by GridInfo itself (its
constructor and setters), so that every path that makes or changes a grid is covered (issue 19)."""
import math

import pytest

import pyca as ca

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("spacing", [(1, INF, 1), (NAN, 1, 1), (1, 1, -INF), (0, 1, 1), (1, -2, 1)])
def test_grid_spacing_must_be_finite_and_positive(refused, spacing):
    refused(lambda: ca.GridInfo((4, 5, 6), spacing), ValueError, ["GridInfo", "spacing"])


@pytest.mark.parametrize("origin", [(NAN, 0, 0), (0, INF, 0), (0, 0, -INF)])
def test_grid_origin_must_be_finite(refused, origin):
    refused(lambda: ca.GridInfo((4, 5, 6), (1, 1, 1), origin), ValueError, ["GridInfo", "origin"])


def test_grid_setters_refuse_and_keep_the_grid(refused):
    g = ca.GridInfo((4, 5, 6), (1.0, 2.0, 3.0), (4.0, 5.0, 6.0))
    refused(lambda: g.setSpacing(ca.Vec3Df(INF, 1, 1)), ValueError, ["spacing"], g)
    refused(lambda: g.setOrigin(ca.Vec3Df(1, NAN, 1)), ValueError, ["origin"], g)


@pytest.mark.parametrize("kind", ["image", "field"])
def test_array_setters_refuse_and_keep_the_array(refused, make, kind):
    a = make(kind, (4, 5, 6), (1.0, 2.0, 3.0), (4.0, 5.0, 6.0))
    refused(lambda: a.setSpacing(ca.Vec3Df(1, 1, INF)), ValueError, ["spacing"], a)
    refused(lambda: a.setOrigin(ca.Vec3Df(NAN, 0, 0)), ValueError, ["origin"], a)
    refused(lambda: a.setGrid(ca.GridInfo((4, 5, 6), (1, 1, 1), (INF, 0, 0))), ValueError, ["origin"], a)
