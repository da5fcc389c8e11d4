"""Writing the outputs of `pyca lddmm` (pyca/apps/_lddmm_outputs.py): where the time goes.

    python benchmarks/bench_outputs.py [--size 64,64,48] [--device auto|cpu|gpu] [--repeat 3] [--runs 3]

First, as a user meets it: whole `pyca lddmm` runs (the default run, --runs fresh processes each), with
the report and with --no-report; the writing (the -v line, split into the host copies and the files
with the report) beside the registration's time, and the output phase: from the end of the
registration (the -v line "writing outputs to") to the end of the process; and the first
write_outputs of a fresh process, where nothing was imported ahead (pyca lddmm imports nibabel and
starts the compression threads while it registers). Then, in this process: the built-in pair
registered briefly (the outputs' sizes are those of the default run), write_outputs as `pyca lddmm`
calls it (all files, in parallel threads), on one thread, without the report, uncompressed (.nii),
and each part alone: the device->host copies, each NIfTI file, the report beside its peer (the same
panels drawn with matplotlib, already imported; and matplotlib's import on its own); then the NIfTI
files alone beside their peer, nibabel's nib.save of the same arrays (one thread per file), with
the ratios, and the limit: zlib level 1 with pyca's run-length strategy on the same bytes, on every
core.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

import pyca as ca
from pyca import io as pio
from pyca.apps import data, lddmm
from pyca.apps._lddmm_report import draw_report, report_data


def best(fn, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def cli_run(args, out):
    """One `pyca lddmm -v` in a fresh process: (registration s, output phase s, write_s printed,
    (host copies s, files and report s, the process's end after the last line s))."""
    shutil.rmtree(out, ignore_errors=True)
    # `python -m pyca` (the console script's main) from the output's folder: the pyca this
    # benchmark imports, never a source checkout in the current folder.
    p = subprocess.Popen([sys.executable, "-m", "pyca", "lddmm", "-v", "--no-progress", "--out", out, *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=os.path.dirname(out))
    t_reg_end, t_wrote, text = None, None, []
    for line in p.stdout:
        if t_reg_end is None and "writing outputs to" in line:
            t_reg_end = time.perf_counter()
        if "wrote " in line:
            t_wrote = time.perf_counter()
        text.append(line)
    err = p.stderr.read()
    if p.wait() != 0 or t_reg_end is None:
        sys.exit(f"bench_outputs: pyca lddmm {' '.join(args)} failed: {err.strip()}")
    t_end = time.perf_counter()
    w = re.search(r"host copies ([0-9.]+) s, then the files side by side ([0-9.]+) s \(registration ([0-9.]+) s\)",
                  "".join(text))
    host, files, reg = (float(x) for x in w.groups())
    return reg, t_end - t_reg_end, host + files, (host, files, t_end - t_wrote)


def first_call(size, device):
    """The first write_outputs of this (fresh) process, nothing imported ahead: seconds."""
    fixed, moving = data.builtin_pair(size=size)
    res = lddmm.register(fixed, moving, iterations=(2, 2, 2), device=device)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        lddmm.write_outputs(res, fixed, moving, d, save_inputs=True)
        return time.perf_counter() - t0


def whole_runs(a):
    print(f"pyca lddmm, the default run of {a.size} voxels (--device {a.device}), {a.runs} fresh processes each; "
          "output phase: from the end of the registration to the end of the process")
    base = ["--size", a.size, "--device", a.device]
    with tempfile.TemporaryDirectory() as d:
        for label, extra in (("pyca lddmm", []), ("pyca lddmm --no-report", ["--no-report"])):
            rs = [cli_run(base + extra, os.path.join(d, "out")) for _ in range(a.runs)]
            reg, phase, wr = (sorted(x[i] for x in rs) for i in range(3))
            print(f"  {label:<46s} registration {reg[0]:.3f}-{reg[-1]:.3f} s; output phase "
                  f"{phase[0]:.3f}-{phase[-1]:.3f} s (writing {wr[0]:.3f}-{wr[-1]:.3f} s); "
                  f"writing / registration {max(x[2] / x[0] for x in rs):.2f} at worst; writing shorter than the "
                  f"registration in {sum(x[2] < x[0] for x in rs)} of {len(rs)} runs")
            for x in rs:
                print("      run: registration {:.3f} s, writing {:.3f} s = host copies {:.3f} + files side by side "
                      "{:.3f}; then the process's end {:.3f} s".format(x[0], x[2], *x[3]))
    ts = []
    for _ in range(a.runs):
        p = subprocess.run([sys.executable, __file__, "--first-call", "--size", a.size, "--device", a.device],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"bench_outputs: --first-call failed: {p.stderr.strip()}")
        ts.append(float(p.stdout.split()[-1]))
    print(f"  {'first write_outputs of a process, nothing imported ahead':<46s} {min(ts):.3f}-{max(ts):.3f} s")


def matplotlib_report(d, path):
    """The report's peer: the same panels from the same data with matplotlib, as a user would draw
    them at its fastest (the object interface and Agg, no pyplot, no tight_layout; savefig's PNG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure

    fig = Figure(figsize=(16, 8.5), dpi=80)
    FigureCanvasAgg(fig)
    ax = fig.subplots(2, 4).flat
    m, asp = d["diff_max"], d["aspect"]
    grey = dict(origin="lower", cmap="gray", vmin=d["lo"], vmax=d["hi"], aspect=asp)
    div = dict(origin="lower", cmap="RdBu_r", vmin=-m, vmax=m, aspect=asp)
    for a, img, style, title in ((ax[0], d["fixed"], grey, "fixed"), (ax[1], d["moving"], grey, "moving"),
                                 (ax[2], d["deformed"], grey, "deformed moving"),
                                 (ax[3], d["fixed"] - d["deformed"], div, "fixed - deformed"),
                                 (ax[4], d["fixed"] - d["moving"], div, "fixed - moving (before)"),
                                 (ax[5], d["moving"], grey, "fixed grid mapped by phiinv, on moving")):
        a.imshow(img.T, **style)
        a.set_title(title)
        a.set_axis_off()
    hx, hy = d["hinv"][..., 0], d["hinv"][..., 1]
    step = max(1, min(hx.shape) // 24)
    lines = [np.column_stack([hx[i], hy[i]]) for i in range(0, hx.shape[0], step)]
    lines += [np.column_stack([hx[:, j], hy[:, j]]) for j in range(0, hx.shape[1], step)]
    ax[5].add_collection(LineCollection(lines, colors="orange", linewidths=0.6))
    jac = np.clip(d["jac"], 1e-3, None)
    span = max(float(jac.max()), 1.0 / float(jac.min()))
    fig.colorbar(ax[6].imshow(jac.T, origin="lower", cmap="RdBu_r", norm=LogNorm(1 / span, span), aspect=asp), ax=ax[6])
    ax[6].set_title("det D phiinv")
    ax[6].set_axis_off()
    for key in ("energy", "match", "reg"):
        ax[7].semilogy([e[key] / d["nvox"].get(e["scale"], 1.0) for e in d["accepted"]], label=key)
    ax[7].legend()
    ax[7].set_title("energy per voxel")
    fig.suptitle(d["title"])
    fig.savefig(path)


def import_seconds(module):
    """Seconds to import `module` in a fresh interpreter that has NumPy loaded (best of 3)."""
    code = f"import numpy, time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return min(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
               for _ in range(3))


def ca_host(objs):
    """Host copies of the device ones (the files are timed, not the device->host copies)."""
    return [x.clone(ca.MEM_HOST) if x.is_on_device else x for x in objs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="64,64,48")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="fresh `pyca lddmm` processes per variant (0: none)")
    ap.add_argument("--first-call", action="store_true", help=argparse.SUPPRESS)  # one fresh-process measurement
    a = ap.parse_args()
    size = tuple(int(s) for s in a.size.split(","))
    if a.first_call:
        print(f"{first_call(size, a.device):.4f}")
        return
    if a.runs > 0:
        whole_runs(a)
    fixed, moving = data.builtin_pair(size=size)
    res = lddmm.register(fixed, moving, iterations=(2, 2, 2), device=a.device)
    print(f"pyca {ca.__version__}, outputs of a {'x'.join(map(str, size))} run on {res.device}, "
          f"{os.cpu_count()} CPU cores; best of {a.repeat}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        def out(name):
            p = os.path.join(d, name)
            os.makedirs(p, exist_ok=True)
            return p

        rows.append(("write_outputs (pyca lddmm: threads, .nii.gz, report)",
                     best(lambda: lddmm.write_outputs(res, fixed, moving, out("a"), save_inputs=True), a.repeat)))
        rows.append(("  ... on one thread", best(lambda: lddmm.write_outputs(res, fixed, moving, out("b"),
                                                                            save_inputs=True, workers=1), a.repeat)))
        rows.append(("  ... without the report", best(lambda: lddmm.write_outputs(
            res, fixed, moving, out("c"), save_inputs=True, report=False), a.repeat)))
        rows.append(("  ... uncompressed .nii (--no-compress)", best(lambda: lddmm.write_outputs(
            res, fixed, moving, out("e"), save_inputs=True, compress=False), a.repeat)))
        rows.append(("device->host copies of the 4 results", best(
            lambda: [x.clone(ca.MEM_HOST) for x in (res.deformed, res.phiinv, res.phi, res.jacobian)], a.repeat)))
        t_report = best(lambda: draw_report(report_data(res, fixed), os.path.join(d, "r.png")), a.repeat)
        rows.append(("report.png (data + drawing)", t_report))
        rdata = report_data(res, fixed)
        matplotlib_report(rdata, os.path.join(d, "m.png"))  # the peer's first figure (imports, font cache)
        t_mpl = best(lambda: matplotlib_report(rdata, os.path.join(d, "m.png")), a.repeat)
        rows.append(("  peer: matplotlib, the same panels (imported)", t_mpl))
        rows.append(("  peer: matplotlib's import (a fresh process)",
                     import_seconds("matplotlib.figure, matplotlib.backends.backend_agg")))
        for name, obj in (("phiinv.nii.gz (a field)", res.phiinv), ("deformed.nii.gz (an image)", res.deformed)):
            save = pio.save_field if isinstance(obj, ca.Field3D) else pio.save_image
            rows.append((name, best(lambda: save(obj, os.path.join(d, "x.nii.gz")), a.repeat)))
        # The peer: nibabel's nib.save (its gzip, level 1) of the same NIfTI files; both write one
        # file per thread (nib.save's fastest use: each file's zlib releases the GIL), from host copies.
        import nibabel as nib

        from pyca._files import write_parallel

        outs = ca_host([fixed, moving, res.deformed, res.phiinv, res.phi, res.jacobian]
                       + ([res.full_map] if res.full_map is not None else []))
        arrays = [x.numpy() for x in outs]

        def pyca_files(folder):
            write_parallel([lambda k=k, x=x: (pio.save_field if isinstance(x, ca.Field3D) else pio.save_image)(
                x, os.path.join(folder, f"{k}.nii.gz")) for k, x in enumerate(outs)])

        def nib_files(folder):
            write_parallel([lambda k=k, arr=arr: nib.save(nib.Nifti1Image(arr, np.eye(4)),
                                                          os.path.join(folder, f"{k}.nii.gz"))
                            for k, arr in enumerate(arrays)])

        t_pyca = best(lambda: pyca_files(out("p")), a.repeat)
        t_nib = best(lambda: nib_files(out("n")), a.repeat)
        rows.append((f"the {len(outs)} NIfTI files: pyca.io (GzipWriter, all cores)", t_pyca))
        rows.append(("  peer: nib.save, one thread per file", t_nib))
        raw = np.ascontiguousarray(res.phiinv.numpy()).tobytes()

        def rle(b):
            c = zlib.compressobj(1, zlib.DEFLATED, -15, 8, zlib.Z_RLE)
            return c.compress(b) + c.flush()

        t = best(lambda: rle(raw), a.repeat)
        nbytes = sum(x.nbytes for x in arrays)
        rows.append((f"limit: zlib level 1 RLE (pyca's) of all {nbytes / 2**20:.1f} MiB on {os.cpu_count()} cores",
                     t * nbytes / len(raw) / (os.cpu_count() or 1)))
    for name, t in rows:
        print(f"  {name:<58s} {t:8.3f} s")
    print(f"  NIfTI files: pyca / nib.save: {t_pyca / t_nib:.2f}; pyca / limit: {t_pyca / rows[-1][1]:.1f}")
    print(f"  report.png: pyca / matplotlib (imported): {t_report / t_mpl:.2f}")
    print("registration of the default run: see `pyca lddmm -v` (timings per scale)")


if __name__ == "__main__":
    main()
