"""Atlas building and batch registration on Dask (pyca.apps.atlas, pyca.apps.batch, pyca.distributed).

Small on purpose (2-D 32 x 32 cohort of 6, 3 template iterations, 2 worker processes): the values are
checked against the cohort's known ground truth and against runs without failures or interrupts."""
import hashlib
import json
import os
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

import pyca as ca  # noqa: E402
from pyca import io as pio  # noqa: E402
from pyca.apps import atlas  # noqa: E402
from pyca.apps._atlas_cohort import synthetic_cohort  # noqa: E402

COHORT = dict(cohort=6, cohort_size=(32, 32, 1), seed=3)
REG = dict(time_steps=4, scales=(4, 2, 1), iterations=(20, 15, 10), device="cpu")
ITERS = 3


@pytest.fixture(scope="module")
def cluster():
    from pyca.distributed import local_cluster

    with local_cluster(n_workers=2, device="cpu", dashboard=False) as c, distributed.Client(c) as client:
        client.wait_for_workers(2)
        yield c, client


@pytest.fixture
def two_workers(cluster):
    """The module's cluster with both workers up (after the kill test, the nanny's restart may lag)."""
    cluster[1].wait_for_workers(2, timeout=300)
    return cluster


@pytest.fixture(scope="module")
def reference(cluster, tmp_path_factory):
    """The uninterrupted, failure-free atlas the other tests compare with."""
    out = tmp_path_factory.mktemp("atlas") / "ref"
    res = atlas.build(out=out, template_iterations=ITERS, client=cluster[1], quiet=True, **COHORT, **REG)
    return res


def _template(out):
    return np.asarray(pio.load_image(os.path.join(out, "template.nii.gz")))


def test_cohort_is_deterministic_diffeomorphic_and_centred():
    a, truth = synthetic_cohort(6, (24, 24, 16), seed=1)
    b, _ = synthetic_cohort(6, (24, 24, 16), seed=1)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    c, _ = synthetic_cohort(6, (24, 24, 16), seed=2)
    assert not np.array_equal(np.asarray(a[0]), np.asarray(c[0]))
    # subjects differ from the phantom, and their mean is closer to it than a single subject (centred)
    t = np.asarray(truth)
    d = [np.mean((np.asarray(s) - t) ** 2) for s in a]
    assert min(d) > 1e-4
    mean = np.mean([np.asarray(s) for s in a], axis=0)
    # intensity mass is kept by the shears, scaled by the antithetic scalings only
    assert abs(np.asarray(a[0]).sum() / t.sum() - 1) < 0.25
    assert np.all(np.isfinite(mean))


def test_template_recovers_the_ground_truth(reference):
    s = reference.summary
    its = s["iterations"]
    assert [e["iteration"] for e in its] == list(range(ITERS + 1))
    assert s["excluded"] == {}
    # the spread (mean squared distance template <-> deformed subjects) falls by >= 50%
    assert its[-1]["spread"] <= 0.5 * its[0]["spread"]
    # the template is closer to the known phantom than the initial mean is
    gt = np.asarray(pio.load_image(s["truth"])).astype(np.float64)
    t = reference.template
    init = np.asarray(pio.load_image(os.path.join(reference.out, "templates", "template_iter000.nii.gz")))
    assert np.mean((np.asarray(t) - gt) ** 2) < 0.7 * np.mean((init - gt) ** 2)
    # the initial template is the plain mean of the subjects (checked with NumPy)
    subs = [np.asarray(pio.load_image(p)) for p in s["sources"]]
    np.testing.assert_allclose(init, np.mean(subs, axis=0), atol=1e-6)


def test_template_update_is_the_jacobian_weighted_mean(reference):
    out = reference.out
    names = reference.summary["names"]
    d = [np.asarray(pio.load_image(os.path.join(out, "subjects", n, "deformed.nii"))) for n in names]
    j = [np.asarray(pio.load_image(os.path.join(out, "subjects", n, "jacdet.nii"))) for n in names]
    want = np.sum([a * b for a, b in zip(d, j)], axis=0) / np.sum(j, axis=0)
    np.testing.assert_allclose(np.asarray(reference.template), want, rtol=1e-4, atol=1e-6)
    phi = pio.load_field(os.path.join(out, "subjects", names[0], "phiinv.nii"))
    assert tuple(phi.grid().size()) == (32, 32, 1)


def _fd_jacobian_det(h, vox2world_fixed, vox2world_moving):
    """det of the world derivative of an H-field h (x, y, z, 3: fixed voxel -> moving voxel) by NumPy's
    central differences (one-sided at the border): det D h (voxels) x the ratio of the voxel volumes
    (signed: an orientation flip between the grids is no fold)."""
    g = np.stack([np.stack(np.gradient(h[..., i].astype(np.float64), axis=(0, 1, 2)), -1) for i in range(3)], -2)
    lin = lambda m: np.linalg.det(np.asarray(m, dtype=np.float64)[:3, :3])  # noqa: E731
    return np.linalg.det(g) * lin(vox2world_moving) / lin(vox2world_fixed)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.skipif(
    not ca.cuda_available(), reason="needs a CUDA GPU"))])
def test_subject_jacdet_is_that_of_its_phiinv(tmp_path, device):
    """A subject's jacdet is det D of the map its phiinv describes (template -> subject, the linear stage
    included; the volume ratio in world units), not of the LDDMM stage alone: checked against NumPy's
    finite-difference determinant of the written phiinv, on a subject 1.2 times larger in every axis
    (det A about 1.7) and stored LAS."""
    import nibabel as nib
    from pyca.apps import _atlas_tasks

    n = 20
    x, y, z = np.mgrid[:n, :n, :n].astype(np.float32)
    blob = np.exp(-(((x - 9.5) / 4) ** 2 + ((y - 9.5) / 5) ** 2 + ((z - 9.5) / 3.5) ** 2))
    blob += 0.5 * np.exp(-(((x - 6) / 2) ** 2 + ((y - 12) / 2) ** 2 + ((z - 8) / 2) ** 2))
    ta = np.eye(4)
    ta[:3, 3] = -9.5
    sa = np.diag([-1.2, 1.2, 1.2, 1.0])
    sa[:3, 3] = [11.4, -11.4, -11.4]
    nib.save(nib.Nifti1Image(blob.astype(np.float32), ta), str(tmp_path / "t.nii"))
    nib.save(nib.Nifti1Image(blob.astype(np.float32), sa), str(tmp_path / "s.nii"))
    p = dict(atlas.DEFAULTS, scales=(2, 1), iterations=(5, 5), device=device, affine="affine")
    r = _atlas_tasks.register(str(tmp_path / "s.nii"), str(tmp_path / "t.nii"), "s", str(tmp_path), p, 1)
    assert r["ok"], r
    folder = tmp_path / "subjects" / "s"
    h = np.asarray(pio.load_field(str(folder / "phiinv.nii")))
    jac = np.asarray(pio.load_image(str(folder / "jacdet.nii"))).astype(np.float64)
    want = _fd_jacobian_det(h, ta, sa)
    assert 1.5 < np.median(want) < 2.0  # the linear stage found the scale
    inner = (slice(1, -1),) * 3  # the border's one-sided differences may differ from JacDetH's
    np.testing.assert_allclose(jac[inner], want[inner], rtol=2e-3, atol=1e-4)
    # the template update weighs each subject by the same determinant
    np.testing.assert_allclose(np.asarray(r["den"]), jac, rtol=1e-6)
    rec = r["record"]
    assert rec["jacobian_min"] == pytest.approx(jac.min(), rel=1e-6)
    assert rec["jacobian_max"] == pytest.approx(jac.max(), rel=1e-6)


def test_subject_maps_reproduce_their_deformed_images(reference):
    """A subject's phiinv (template voxel -> subject voxel, the linear stage included) and its ANTs/ITK
    files (subjects/NAME/transforms.json) give its deformed image back (issue 38)."""
    from pyca.registration import apply as pa

    out, s = reference.out, reference.summary
    for name, src in list(zip(s["names"], s["sources"]))[:2]:
        folder = os.path.join(out, "subjects", name)
        subject = pio.load_image(src)
        deformed = np.asarray(pio.load_image(os.path.join(folder, "deformed.nii")))
        phiinv = pio.load_field(os.path.join(folder, "phiinv.nii"))
        got = ca.Image3D(phiinv.grid(), ca.MEM_HOST)
        ca.ApplyH(got, subject, phiinv, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_LINEAR)
        rng = deformed.max() - deformed.min()
        assert np.sqrt(np.mean((np.asarray(got) - deformed) ** 2)) / rng < 1e-5
        viafiles = pa.apply_transforms(os.path.join(folder, "deformed.nii"), src, folder, device="cpu")
        assert np.sqrt(np.mean((np.asarray(viafiles) - deformed) ** 2)) / rng < 1e-3


def test_outputs_and_summary(reference):
    out = reference.out
    with open(os.path.join(out, "summary.json")) as fh:
        s = json.load(fh)
    assert s["completed_iteration"] == ITERS and len(s["workers"]) == 2
    assert s["scheduler"].startswith("tcp://")
    last = s["iterations"][-1]
    assert set(last["energies"]) == set(s["names"]) and all(e > 0 for e in last["energies"].values())
    assert last["wall_s"] > 0 and last["registration_s_per_subject"] > 0
    assert s["provenance"]["pyca"]["version"] == ca.__version__ and s["provenance"]["command"]
    assert len(s["provenance"]["peak_memory"]["workers"]) == 2
    assert os.path.getsize(os.path.join(out, "report.png")) > 10000
    assert not [f for f in os.listdir(out) if ".tmp" in f]


def test_killed_worker_is_replaced_and_the_atlas_is_unchanged(cluster, reference, tmp_path):
    _, client = cluster
    killed = []

    def kill_during(k, _summary):
        if k != 1:
            return

        def killer():  # kill the worker running a registration of iteration 2
            t_end = time.time() + 60
            while time.time() < t_end and not killed:
                for addr, keys in client.processing().items():
                    if any(str(key).startswith("atlas-2-") for key in keys):
                        killed.append(addr)
                        try:
                            client.run(os._exit, 1, workers=[addr])
                        except Exception:  # noqa: BLE001 - the worker dies while answering
                            pass
                        return
                time.sleep(0.02)

        threading.Thread(target=killer, daemon=True).start()

    res = atlas.build(out=tmp_path / "killed", template_iterations=ITERS, client=client, quiet=True,
                      on_iteration=kill_during, **COHORT, **REG)
    assert killed, "no worker was killed"
    client.wait_for_workers(2, timeout=300)  # the nanny restarted it (slow on a loaded machine)
    assert killed[0] not in client.scheduler_info(n_workers=-1)["workers"]
    assert res.summary["excluded"] == {}
    np.testing.assert_allclose(np.asarray(res.template), np.asarray(reference.template), atol=1e-5)


def test_resume_after_interrupt_gives_the_same_template(two_workers, reference, tmp_path):
    cluster = two_workers
    out = tmp_path / "resumed"

    def interrupt(k, _summary):
        if k == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atlas.build(out=out, template_iterations=ITERS, client=cluster[1], quiet=True, on_iteration=interrupt,
                    **COHORT, **REG)
    with open(out / "summary.json") as fh:
        assert json.load(fh)["completed_iteration"] == 1
    with pytest.raises(atlas.AtlasError, match="already holds an atlas"):
        atlas.build(out=out, client=cluster[1], quiet=True, **COHORT, **REG)
    res = atlas.build(out=out, resume=True, client=cluster[1], quiet=True)
    assert [e["iteration"] for e in res.summary["iterations"]] == list(range(ITERS + 1))
    np.testing.assert_allclose(np.asarray(res.template), np.asarray(reference.template), atol=1e-5)


def _files(tmp_path, n=4):
    subs, _ = synthetic_cohort(n, (24, 24, 1), seed=5)
    paths = []
    for i, s in enumerate(subs):
        paths.append(str(tmp_path / f"s{i}.nii.gz"))
        pio.save_image(s, paths[-1])
    return paths


def test_bad_subject_is_excluded_and_too_many_stop(cluster, tmp_path, capsys):
    paths = _files(tmp_path, 5)
    bad = tmp_path / "broken.nii.gz"
    bad.write_bytes(b"not an image")
    res = atlas.build(paths + [str(bad)], out=tmp_path / "one-bad", template_iterations=1, client=cluster[1],
                      progress=False, **REG)
    err = capsys.readouterr().err
    assert "subject broken excluded at iteration 0" in err
    assert set(res.summary["excluded"]) == {"broken"}
    assert res.summary["iterations"][-1]["succeeded"] == 5
    with pytest.raises(atlas.AtlasError, match=r"[23] of 5 subjects failed, more than the allowed fraction 0.25"):
        atlas.build(paths[:2] + [str(bad), str(tmp_path / "missing.nii.gz"), str(tmp_path / "nope.nii")],
                    out=tmp_path / "many-bad", template_iterations=1, client=cluster[1], quiet=True, **REG)


def test_inputs_are_resolved_from_folder_and_glob(tmp_path):
    paths = _files(tmp_path, 3)
    assert atlas.resolve_inputs(str(tmp_path)) == sorted(paths)
    assert atlas.resolve_inputs(str(tmp_path / "s*.nii.gz")) == sorted(paths)
    with pytest.raises(FileNotFoundError, match="no file matches"):
        atlas.resolve_inputs(str(tmp_path / "x*.nii"))
    with pytest.raises(ValueError, match="at least 2"):
        atlas.resolve_inputs([paths[0]])
    with pytest.raises(TypeError, match="unknown parameter"):
        atlas.build(paths, out=tmp_path / "o", bogus=1)


def test_tree_reduce_matches_numpy_and_moves_little(two_workers):
    cluster = two_workers
    from pyca.distributed import tree_reduce, worker_addresses

    client = cluster[1]
    w = worker_addresses(client)
    futs = [client.submit(np.full, 4, float(i), pure=False, workers=[w[i % 2]]) for i in range(11)]
    total = tree_reduce(client, futs, np.add, [w[i % 2] for i in range(11)], key="t")
    np.testing.assert_array_equal(total.result(), np.full(4, 55.0))
    with pytest.raises(ValueError):
        tree_reduce(client, [], np.add)


def test_cli_register_batch_on_an_existing_scheduler(cluster, tmp_path, capsys):
    from pyca.cli import main

    paths = _files(tmp_path, 2)
    tmpl = tmp_path / "tmpl.nii.gz"
    pio.save_image(synthetic_cohort(2, (24, 24, 1), seed=5)[1], str(tmpl))
    bad = tmp_path / "bad.nii.gz"
    bad.write_text("x")
    sched = cluster[1].scheduler.address
    rc = main(["register-batch", "--template", str(tmpl), "--subjects", *paths, str(bad), "--out",
               str(tmp_path / "b"), "--scheduler", sched, "-p", "iterations=10,5,3", "-p", "time_steps=4",
               "--device", "cpu", "--no-progress", "--max-failed", "0.5"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "subject bad failed" in cap.err
    for name in ("s0", "s1"):
        files = set(os.listdir(tmp_path / "b" / name))
        assert {"deformed.nii.gz", "phiinv.nii.gz", "phi.nii.gz", "jacdet.nii.gz", "summary.json",
                "report.png"} <= files
    with open(tmp_path / "b" / "summary.json") as fh:
        s = json.load(fh)
    assert set(s["results"]) == {"s0", "s1"} and set(s["failed"]) == {"bad"}
    assert s["results"]["s0"]["mismatch_reduction"] > 0.5
    # how it was made (issue 40): the inputs' checksums, each worker's peak memory, the command
    prov = s["provenance"]
    assert prov["pyca"]["version"] == ca.__version__
    assert prov["inputs"]["template"]["sha256"] == hashlib.sha256(tmpl.read_bytes()).hexdigest()
    assert prov["inputs"]["subjects/s0"]["sha256"] == hashlib.sha256(open(paths[0], "rb").read()).hexdigest()
    assert len(prov["peak_memory"]["workers"]) == 2
    assert all(w["cpu_rss_bytes"] > 0 for w in prov["peak_memory"]["workers"].values())
    with open(tmp_path / "b" / "s0" / "summary.json") as fh:
        sub = json.load(fh)["provenance"]
    assert sub["inputs"]["fixed"]["sha256"] == prov["inputs"]["template"]["sha256"]
    assert sub["inputs"]["moving"]["path"] == os.path.abspath(paths[0])


def test_cli_errors_are_one_line(tmp_path, capsys):
    from pyca.cli import main

    assert main(["atlas", str(tmp_path / "none*.nii.gz"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pyca atlas: error: ") and "no file matches" in err[0]
    assert main(["atlas", "--resume", str(tmp_path / "nothing")]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    assert main(["atlas", "-p", "alpha=x", "--out", str(tmp_path / "o")]) == 2
    assert "-p alpha" in capsys.readouterr().err
    assert main(["register-batch", "--template", str(tmp_path / "t.nii"), "--subjects", "a", "b"]) == 2
    assert "no such template" in capsys.readouterr().err


def test_local_cluster_sizes_and_pins(monkeypatch):
    from pyca import distributed as pd

    monkeypatch.setattr(ca.core, "built_with_cuda", lambda: True, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert pd.visible_gpus() == ["0", "1", "2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert pd.visible_gpus() == []
    spec = pd.gpu_worker_specs(["3", "5"], omp="4")
    envs = [w["options"]["env"]["CUDA_VISIBLE_DEVICES"] for w in spec.values()]
    assert envs == ["3,5", "5,3"]  # each worker's own GPU first
    assert all(w["options"]["nthreads"] == 1 for w in spec.values())
    # an embedded 'GPU' cluster: one worker per listed GPU, each seeing its own GPU first
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    # The ids are made up: Dask's NVML monitor must not query them on a machine with GPUs (the nanny hands
    # its Dask config to the worker processes, so it is set here, not through the environment).
    nvml_off = dask.config.set({"distributed.diagnostics.nvml": False})
    with nvml_off, pd.local_cluster(device="gpu", dashboard=False) as cl, distributed.Client(cl) as c:
        c.wait_for_workers(2)
        seen = c.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))  # read in the worker
        assert sorted(seen.values()) == ["0,1", "1,0"]
        assert all(w["resources"] == {"GPU": 1} for w in c.scheduler_info(n_workers=-1)["workers"].values())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ca.CudaError, match="no GPU is visible"):
        pd.local_cluster(device="gpu")


def test_cpu_workers_share_the_cores(two_workers):
    cluster = two_workers
    omp = cluster[1].run(lambda: os.environ.get("OMP_NUM_THREADS"))  # read in the worker
    assert sorted(omp.values()) == [str(max(1, (os.cpu_count() or 1) // 2))] * 2


def test_cli_atlas_plain_progress_lines(cluster, tmp_path, capsys):
    from pyca.cli import main

    out = tmp_path / "cli"
    rc = main(["atlas", "--out", str(out), "--cohort", "4", "--cohort-size", "24,24,1", "--template-iterations", "1",
               "--scheduler", cluster[1].scheduler.address, "-p", "iterations=10,5,3", "-p", "time_steps=4",
               "--device", "cpu", "--no-report"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "pyca atlas: 4/4 reg (100%)" in cap.err  # not a terminal: plain lines, no bar
    assert "\r" not in cap.err
    assert "4 subjects, 1 iterations" in cap.out
    assert (out / "template.nii.gz").is_file() and (out / "subjects" / "subject_03" / "phiinv.nii").is_file()
