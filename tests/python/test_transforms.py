"""Transforms out and in (issue 38): pyca's registrations as ANTs/ITK files, ANTs' and ITK's files read
back, pyca.apply_transforms and `pyca apply` on images, labels and points, proven against the peer
itself (antspyx: ants.apply_transforms, ants.apply_transforms_to_points, ants.registration) and
SimpleITK. Small grids with anisotropic spacing, an LAS-stored fixed image and origins away from 0.
"""
from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

import pyca as ca
import pyca.io as pio
from pyca.registration import apply as pa
from pyca.registration import transform_files as tf



@pytest.fixture(scope="module")
def ants():
    """antspyx, the peer (the test extra); the tests that need it skip without it, the others run."""
    return pytest.importorskip("ants", reason="antspyx (the test extra) is the reference for transform files")

L = np.diag([-1.0, -1.0, 1.0])


def _blobs(shape, sp, org, direction, centre, radii, seed=0):
    """A smooth image of a few Gaussian blobs (world coordinates), 0 near its border."""
    g = ca.GridInfo(shape, sp, org, direction)
    W = np.eye(4)
    W[:3, :3] = np.asarray(direction) @ np.diag(sp)
    W[:3, 3] = org
    idx = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), -1).reshape(-1, 3)
    x = idx @ W[:3, :3].T + W[:3, 3]
    a = np.zeros(len(x))
    rs = np.random.default_rng(seed)
    for k in range(4):
        c = np.asarray(centre) + (rs.normal(size=3) * 5 if k else 0)
        r = np.asarray(radii) * (1.0 if k == 0 else 0.35)
        a += (1.0 if k == 0 else 0.6) * np.exp(-np.sum(((x - c) / r) ** 2, axis=1))
    return ca.Image3D.from_array(np.asfortranarray(a.reshape(shape).astype(np.float32)), g)


def _labels_of(im, levels=(0.15, 0.45, 0.8)):
    a = np.asarray(im)
    lab = np.zeros(a.shape, np.float32)
    for k, t in enumerate(levels):
        lab[a > t] = [3, 7, 12][k]
    return ca.Image3D.from_array(np.asfortranarray(lab), im.grid())


def _rel_rms(a, b, ref):
    return float(np.sqrt(np.mean((np.asarray(a, float) - np.asarray(b, float)) ** 2)) / (ref.max() - ref.min()))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A pyca lddmm run: fixed LAS with an origin, moving on another grid; outputs written."""
    from pyca.apps import lddmm

    d = tmp_path_factory.mktemp("pair")
    las = np.diag([-1.0, 1.0, 1.0])
    fixed = _blobs((36, 40, 30), (1.5, 1.25, 2.0), (40.0, -30.0, -12.0), las, (13.0, -5.0, 18.0), (9, 10, 10))
    moving = _blobs((32, 36, 28), (1.6, 1.4, 2.1), (-15.0, -28.0, -10.0), np.eye(3), (11.0, -3.0, 17.0), (8, 11, 9),
                    seed=1)
    labels = _labels_of(moving)
    for n, im in (("fixed", fixed), ("moving", moving)):
        pio.save_image(im, str(d / f"{n}.nii.gz"))
    pio.save_image(labels, str(d / "labels.nii.gz"), dtype=np.int16)
    res = lddmm.register(fixed, moving, device="cpu", scales=(2, 1), iterations=(10, 10), moving_labels=labels)
    out = d / "out"
    lddmm.write_outputs(res, fixed, moving, str(out), report=False)
    return {"dir": d, "out": out, "res": res, "fixed": fixed, "moving": moving, "labels": labels,
            "summary": json.loads((out / "summary.json").read_text())}


def _ants_list(pair, which):
    t = pair["summary"]["transforms"][which]
    return [str(pair["out"] / f) for f in t["transformlist"]], t["whichtoinvert"]


# ------------------------------------------------------------------------------------------------
# Writing
def test_summary_lists_the_transforms_in_ants_order(pair):
    t = pair["summary"]["transforms"]
    assert t["forward"] == {"transformlist": ["warp.nii.gz", "affine.mat"], "whichtoinvert": [False, False]}
    assert t["inverse"] == {"transformlist": ["affine.mat", "inverse_warp.nii.gz"], "whichtoinvert": [True, False]}
    for f in ("warp.nii.gz", "inverse_warp.nii.gz", "affine.mat", "affine.txt"):
        assert f in pair["summary"]["files"] and (pair["out"] / f).is_file()


def test_headers_say_what_the_files_hold(pair):
    nib = pytest.importorskip("nibabel")
    for name in ("warp", "inverse_warp"):
        img = nib.load(str(pair["out"] / f"{name}.nii.gz"))
        assert img.shape == (36, 40, 30, 1, 3) and int(img.header["intent_code"]) == 1007  # as ITK writes
        assert img.get_data_dtype() == np.float32
        np.testing.assert_allclose(img.affine, nib.load(str(pair["dir"] / "fixed.nii.gz")).affine, atol=1e-5)
    for name in ("phiinv", "phi", "phiinv_full"):  # voxel coordinates: not a displacement field
        img = nib.load(str(pair["out"] / f"{name}.nii.gz"))
        assert int(img.header["intent_code"]) == 1008


def test_ants_applies_pycas_forward_transforms(pair, ants):
    F = ants.image_read(str(pair["dir"] / "fixed.nii.gz"))
    M = ants.image_read(str(pair["dir"] / "moving.nii.gz"))
    tl, inv = _ants_list(pair, "forward")
    got = ants.apply_transforms(F, M, tl, whichtoinvert=inv).numpy()
    want = np.asarray(pair["res"].deformed)
    assert _rel_rms(got, want, want) <= 1e-3
    lab = ants.image_read(str(pair["dir"] / "labels.nii.gz"))
    got_l = ants.apply_transforms(F, lab, tl, whichtoinvert=inv, interpolator="nearestNeighbor").numpy()
    assert np.mean(got_l == np.asarray(pair["res"].labels)) >= 0.999


def test_ants_applies_pycas_inverse_transforms(pair, ants):
    F = ants.image_read(str(pair["dir"] / "fixed.nii.gz"))
    M = ants.image_read(str(pair["dir"] / "moving.nii.gz"))
    tl, inv = _ants_list(pair, "inverse")
    got = ants.apply_transforms(M, F, tl, whichtoinvert=inv).numpy()
    mine = pa.apply_transforms(pair["moving"], pair["fixed"], str(pair["out"]), inverse=True, device="cpu")
    assert _rel_rms(got, np.asarray(mine), got) <= 1e-3
    # and the inverse undoes the forward: the fixed image through phi then phiinv, where it is inside
    fwd = pa.apply_transforms(pair["fixed"], mine, str(pair["out"]), device="cpu")
    f = np.asarray(pair["fixed"])
    assert _rel_rms(np.asarray(fwd), f, f) < 0.05


def test_round_trip_pyca_files_pyca(pair, tmp_path):
    res = pair["res"]
    h = tf.read_displacement(str(pair["out"] / "warp.nii.gz"))
    np.testing.assert_allclose(np.asarray(h), np.asarray(res.phiinv), atol=2e-5)
    h = tf.read_displacement(str(pair["out"] / "inverse_warp.nii.gz"))
    np.testing.assert_allclose(np.asarray(h), np.asarray(res.phi), atol=2e-5)
    for f in ("affine.mat", "affine.txt"):
        np.testing.assert_allclose(tf.read_affine(str(pair["out"] / f)), res.affine.matrix, rtol=0, atol=1e-12)
    # the whole chain: the H-field pyca composes from the files is the registration's full map
    chain = pa.load_transforms(pa.resolve_transforms(str(pair["out"])))
    H = pa.transform_hfield(pair["fixed"].grid(), pair["moving"].grid(), chain, ca.MEM_HOST)
    np.testing.assert_allclose(np.asarray(H), np.asarray(res.full_map), atol=2e-4)
    # MetaImage too (SimpleITK)
    pytest.importorskip("SimpleITK")
    tf.write_displacement(res.phiinv, str(tmp_path / "w.mha"))
    np.testing.assert_allclose(np.asarray(tf.read_displacement(str(tmp_path / "w.mha"))), np.asarray(res.phiinv),
                               atol=2e-5)


def test_pyca_apply_labels_stay_integer_and_match_ants(pair, tmp_path, ants):
    out = tmp_path / "lab.nii.gz"
    r = _cli("apply", "--reference", pair["dir"] / "fixed.nii.gz", "--input", pair["dir"] / "labels.nii.gz",
             "--transforms", pair["out"], "--interpolation", "label", "--output", out, "--device", "cpu")
    assert r.returncode == 0, r.stderr
    nib = pytest.importorskip("nibabel")
    img = nib.load(str(out))
    assert img.get_data_dtype() == np.int16
    got = np.asarray(img.dataobj)
    assert set(np.unique(got)) <= {0, 3, 7, 12}
    F = ants.image_read(str(pair["dir"] / "fixed.nii.gz"))
    lab = ants.image_read(str(pair["dir"] / "labels.nii.gz"))
    tl, inv = _ants_list(pair, "forward")
    want = ants.apply_transforms(F, lab, tl, whichtoinvert=inv, interpolator="genericLabel").numpy()
    assert np.mean(got == want) >= 0.999
    r = _cli("apply", "--reference", pair["dir"] / "fixed.nii.gz", "--input", pair["dir"] / "labels.nii.gz",
             "--transforms", pair["out"], "--interpolation", "nearest", "--output", tmp_path / "nn.nii.gz")
    assert r.returncode == 0, r.stderr
    nn = nib.load(str(tmp_path / "nn.nii.gz"))
    assert nn.get_data_dtype() == np.int16
    assert np.mean(np.asarray(nn.dataobj) == np.asarray(pair["res"].labels)) >= 0.999


# ------------------------------------------------------------------------------------------------
# Reading ANTs' own registrations
@pytest.fixture(scope="module")
def ants_reg(tmp_path_factory, ants):
    d = tmp_path_factory.mktemp("antsreg")
    las = np.diag([-1.0, 1.0, 1.0])
    fixed = _blobs((32, 34, 28), (1.5, 1.3, 2.0), (30.0, -20.0, -5.0), las, (8.0, 2.0, 22.0), (8, 9, 9))
    moving = _blobs((30, 32, 26), (1.6, 1.4, 2.1), (-20.0, -18.0, -4.0), np.eye(3), (6.0, 3.0, 21.0), (7, 10, 8),
                    seed=2)
    pio.save_image(fixed, str(d / "fixed.nii.gz"))
    pio.save_image(moving, str(d / "moving.nii.gz"))
    F, M = ants.image_read(str(d / "fixed.nii.gz")), ants.image_read(str(d / "moving.nii.gz"))
    reg = ants.registration(F, M, "SyN", reg_iterations=(20, 10), aff_iterations=(50, 20), aff_shrink_factors=(2, 1),
                            aff_smoothing_sigmas=(1, 0), outprefix=str(d / "r_"))
    return {"dir": d, "F": F, "M": M, "reg": reg, "fixed": fixed, "moving": moving}


def test_pyca_applies_ants_transforms(ants_reg, ants):
    F, M, reg = ants_reg["F"], ants_reg["M"], ants_reg["reg"]
    want = ants.apply_transforms(F, M, reg["fwdtransforms"]).numpy()
    got = pa.apply_transforms(ants_reg["fixed"], ants_reg["moving"], reg["fwdtransforms"], device="cpu")
    assert _rel_rms(np.asarray(got), want, want) <= 1e-3
    inv = [False] * len(reg["invtransforms"])
    inv[0] = True  # ANTs' inverse list: [affine (inverted), InverseWarp]
    want = ants.apply_transforms(M, F, reg["invtransforms"], whichtoinvert=inv).numpy()
    got = pa.apply_transforms(ants_reg["moving"], ants_reg["fixed"], reg["invtransforms"], whichtoinvert=inv,
                              device="cpu")
    assert _rel_rms(np.asarray(got), want, want) <= 1e-3


def test_points_both_ways_against_ants(ants_reg, pair, ants):
    pd = pytest.importorskip("pandas")
    rs = np.random.default_rng(3)
    for tl, inv, grid in ((ants_reg["reg"]["fwdtransforms"], None, ants_reg["fixed"].grid()),
                          (ants_reg["reg"]["invtransforms"], [True, False], ants_reg["moving"].grid()),
                          (*_ants_list(pair, "forward"), pair["fixed"].grid()),
                          (*_ants_list(pair, "inverse"), pair["moving"].grid())):
        W = np.eye(4)
        W[:3, :3] = np.asarray(grid.direction()) @ np.diag(grid.spacing())
        W[:3, 3] = grid.origin()
        vox = rs.uniform(2, np.array(tuple(grid.size())) - 3, size=(40, 3))
        ras = vox @ W[:3, :3].T + W[:3, 3]
        lps = ras @ L
        want = ants.apply_transforms_to_points(3, pd.DataFrame(lps, columns=["x", "y", "z"]), tl,
                                               whichtoinvert=inv).values[:, :3]
        got = pa.transform_points(lps, tl, whichtoinvert=inv, lps=True, device="cpu")
        assert np.abs(got - want).max() < 0.05
        np.testing.assert_allclose(pa.transform_points(ras, tl, whichtoinvert=inv, device="cpu"), want @ L,
                                   atol=0.05)


def test_read_ants_affine_like_ants(ants_reg, ants):
    mat = ants_reg["reg"]["fwdtransforms"][-1]
    M = tf.read_affine(mat)
    t = ants.read_transform(mat)
    for p in ([1.0, 2.0, 3.0], [-20.0, 5.0, 40.0]):
        np.testing.assert_allclose(L @ (M[:3, :3] @ (L @ p) + M[:3, 3]), t.apply_to_point(p), atol=1e-4)


def test_simpleitk_reads_pycas_files(pair):
    sitk = pytest.importorskip("SimpleITK")
    tl, _ = _ants_list(pair, "forward")
    field = sitk.ReadImage(tl[0], sitk.sitkVectorFloat64)
    warp = sitk.DisplacementFieldTransform(field)
    aff = sitk.ReadTransform(tl[1])
    comp = sitk.CompositeTransform([aff, warp])  # ITK applies the last added first: the warp, then the affine
    g = pair["fixed"].grid()
    W = np.eye(4)
    W[:3, :3] = np.asarray(g.direction()) @ np.diag(g.spacing())
    W[:3, 3] = g.origin()
    full = np.asarray(pair["res"].full_map)
    Wm = np.eye(4)
    gm = pair["moving"].grid()
    Wm[:3, :3] = np.asarray(gm.direction()) @ np.diag(gm.spacing())
    Wm[:3, 3] = gm.origin()
    for v in ([5, 7, 9], [20, 30, 15], [17, 3, 25]):
        p = L @ (W @ np.append(v, 1.0))[:3]
        want = L @ (Wm @ np.append(full[tuple(v)], 1.0))[:3]
        np.testing.assert_allclose(comp.TransformPoint(tuple(p)), want, atol=1e-3)


# ------------------------------------------------------------------------------------------------
# Bad input: one line naming the file, exit 2, nothing written
def _cli(*args):
    """`pyca ARGS...` run in this process (pyca.cli.main, as the console script runs it): exit code and
    stderr (one subprocess per call would cost its imports a dozen times)."""
    import contextlib
    import io
    import types

    from pyca import cli

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = cli.main([str(a) for a in args])
        except SystemExit as e:  # argparse's own exits
            rc = e.code
    return types.SimpleNamespace(returncode=rc, stderr=err.getvalue(), stdout=out.getvalue())


def _refused(r, out, name):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pyca apply: error:") and name in lines[0], r.stderr
    assert not os.path.exists(out) and not [f for f in os.listdir(os.path.dirname(out)) if "tmp" in f]


def test_bad_inputs_are_refused(pair, tmp_path):
    d, o = pair["dir"], pair["out"]
    out = str(tmp_path / "x.nii.gz")
    base = ["apply", "--reference", d / "fixed.nii.gz", "--input", d / "moving.nii.gz", "--output", out]
    _refused(_cli(*base, "--transforms", o / "missing.mat"), out, "missing.mat")
    _refused(_cli(*base, "--transforms", o / "phiinv.nii.gz"), out, "phiinv.nii.gz")  # an H-field
    _refused(_cli("apply", "--reference", d / "fixed.nii.gz", "--input", d / "moving.nii.gz", "--transforms", o,
                  "--interpolation", "label", "--output", out), out, "moving.nii.gz")
    # a 2-D transform for 3-D images (dimension)
    two = tmp_path / "a2.txt"
    two.write_text("#Insight Transform File V1.0\n#Transform 0\nTransform: AffineTransform_double_2_2\n"
                   "Parameters: 1 0 0 1 0 0\nFixedParameters: 0 0\n")
    _refused(_cli(*base, "--transforms", two), out, "a2.txt")
    # a displacement field on a grid far from the reference's (grid mismatch)
    far = ca.Field3D(ca.GridInfo((8, 8, 8), (1.0, 1.0, 1.0), (500.0, 500.0, 500.0)), ca.MEM_HOST)
    ca.SetToIdentity(far)
    tf.write_displacement(far, str(tmp_path / "far.nii.gz"))
    _refused(_cli(*base, "--transforms", tmp_path / "far.nii.gz"), out, "far.nii.gz")
    # points without x, y, z columns; a missing points file
    pts = tmp_path / "p.csv"
    pts.write_text("a,b,c\n1,2,3\n")
    pout = str(tmp_path / "p_out.csv")
    _refused(_cli("apply", "--points", pts, "--transforms", o, "--output", pout), pout, "p.csv")
    _refused(_cli("apply", "--points", tmp_path / "none.csv", "--transforms", o, "--output", pout), pout, "none.csv")
    _refused(_cli(*base[:4], d / "nothere.nii.gz", *base[5:], "--transforms", o), out, "nothere.nii.gz")
    # an affine whose entries float32 cannot hold (pyca maps points in float32): refused when read, in one line
    import scipy.io as sio

    m = sio.loadmat(str(o / "affine.mat"))
    key = next(k for k in m if k.startswith("AffineTransform"))
    huge = m[key].copy()
    huge[0] = 1e308
    sio.savemat(str(tmp_path / "huge.mat"), {key: huge, "fixed": m["fixed"]}, format="4")
    _refused(_cli(*base, "--transforms", tmp_path / "huge.mat"), out, "huge.mat")


def test_an_input_is_never_replaced_and_a_bad_output_name_is_refused_first(pair, tmp_path):
    """--output naming an input (--input, --reference, --points, a transform file or its folder's summary) is
    refused in one line and the file is left as it was; an output type pyca does not write is refused before
    the inputs are read (a missing --input is not what is reported)."""
    import shutil

    d, o = pair["dir"], pair["out"]
    moving = tmp_path / "moving.nii.gz"
    shutil.copy(d / "moving.nii.gz", moving)
    pts = tmp_path / "p.csv"
    pts.write_text("x,y,z\n1,2,3\n")
    image = ["apply", "--reference", d / "fixed.nii.gz", "--input", moving, "--transforms", o, "--output"]
    for args, target, flag in [(image, moving, "--input"), (image, d / "fixed.nii.gz", "--reference"),
                               (image, o / "warp.nii.gz", "--transforms"),
                               (["apply", "--points", pts, "--transforms", o, "--output"], pts, "--points"),
                               (["apply", "--points", pts, "--transforms", o, "--output"], o / "summary.json",
                                "--transforms")]:
        before = target.read_bytes()
        r = _cli(*args, os.path.join(tmp_path, "..", tmp_path.name, os.path.relpath(target, tmp_path)))  # respelt
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert f"is the {flag} file" in r.stderr and r.stderr.startswith("pyca apply: error: --output"), r.stderr
        assert target.read_bytes() == before
    out = str(tmp_path / "x.txt")
    _refused(_cli("apply", "--reference", d / "fixed.nii.gz", "--input", tmp_path / "nothere.nii.gz",
                  "--transforms", o, "--output", out), out, "unknown file type")


def test_cli_points_keep_other_columns(pair, tmp_path):
    pts = tmp_path / "p.csv"
    g = pair["fixed"].grid()
    c = (np.asarray(g.direction()) @ (np.array(tuple(g.size())) / 2 * np.array(tuple(g.spacing())))) + g.origin()
    with open(pts, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["label", "X", "y", "z"])
        w.writerow(["a", *c])
        w.writerow(["b", *(c + 3)])
    out = tmp_path / "o.csv"
    r = _cli("apply", "--points", pts, "--transforms", pair["out"], "--output", out, "-q")
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(open(out)))
    assert rows[0] == ["label", "X", "y", "z"] and [r[0] for r in rows[1:]] == ["a", "b"]
    got = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    np.testing.assert_allclose(got, pa.transform_points(np.array([c, c + 3]), str(pair["out"]), device="cpu"),
                               atol=1e-6)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_gpu_gives_the_cpu_answer(pair):
    """The same files applied on the GPU and on the CPU (the CPU is the reference): images, labels, points
    (no antspyx needed: this runs on the GPU machine whatever is installed there)."""
    for interp, src in (("linear", pair["dir"] / "moving.nii.gz"), ("label", pair["dir"] / "labels.nii.gz"),
                        ("nearest", pair["dir"] / "labels.nii.gz")):
        cpu = pa.apply_transforms(pair["dir"] / "fixed.nii.gz", str(src), str(pair["out"]), interpolation=interp,
                                  device="cpu")
        gpu = pa.apply_transforms(pair["dir"] / "fixed.nii.gz", str(src), str(pair["out"]), interpolation=interp,
                                  device="gpu")
        assert gpu.is_on_device
        if interp == "linear":
            np.testing.assert_allclose(gpu.numpy(), np.asarray(cpu), atol=1e-5)
        else:
            assert np.mean(gpu.numpy() == np.asarray(cpu)) >= 0.9999
    g = pair["fixed"].grid()
    pts = np.asarray(g.origin()) + np.random.default_rng(5).uniform(-30, 0, size=(50, 3)) * [-1, 1, 1]
    for inverse in (False, True):
        np.testing.assert_allclose(pa.transform_points(pts, str(pair["out"]), inverse, device="gpu"),
                                   pa.transform_points(pts, str(pair["out"]), inverse, device="cpu"), atol=1e-4)


def test_linear_itk_types_read_as_itk_maps_points(tmp_path):
    """Every linear ITK type pyca reads, written by SimpleITK, maps points as SimpleITK does."""
    sitk = pytest.importorskip("SimpleITK")
    c = (3.0, -4.0, 5.0)
    q = (0.1, 0.2, -0.1, float(np.sqrt(1 - 0.06)))
    zyx = sitk.Euler3DTransform(c, 0.1, -0.2, 0.3, (1, 2, 3))
    zyx.SetComputeZYX(True)
    ts = [sitk.Euler3DTransform(c, 0.1, -0.2, 0.3, (1, 2, 3)), zyx, sitk.VersorRigid3DTransform(q, (1, -2, 3), c),
          sitk.Similarity3DTransform(1.2, q, (1, -2, 3), c), sitk.TranslationTransform(3, (1, 2, 3)),
          sitk.AffineTransform((1.1, 0.1, 0, 0.05, 0.9, 0.02, 0, 0.03, 1.0), (1, 2, 3), c),
          sitk.Euler2DTransform((1.0, 2.0), 0.3, (3.0, 4.0)), sitk.Similarity2DTransform(1.3, 0.3, (3.0, 4.0), (1.0, 2.0))]
    for k, t in enumerate(ts):
        path = str(tmp_path / f"t{k}.txt")
        sitk.WriteTransform(t, path)
        M, n = tf.read_affine_dim(path)
        for p in ([1.0, 2.0, 3.0], [-10.0, 20.0, 7.0]):
            got = L @ (M[:3, :3] @ (L @ np.array(p)) + M[:3, 3])
            np.testing.assert_allclose(got[:n], t.TransformPoint(tuple(p[:n])), atol=1e-9)
            if n == 2:
                assert got[2] == p[2]
    (tmp_path / "bspline.txt").write_text("#Insight Transform File V1.0\n#Transform 0\nTransform: "
                                          "BSplineTransform_double_3_3\nParameters: 0\nFixedParameters: 0\n")
    with pytest.raises(tf.TransformFileError, match="bspline.txt"):
        tf.read_affine(str(tmp_path / "bspline.txt"))
