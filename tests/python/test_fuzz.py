"""Fuzzing every registered operation (pyca.registry) with hypothesis, for a bounded time.

Each example takes an operation and an overload, an odd grid (extreme spacings too), the
registry's example inputs, then spoils some of them: NaN/inf voxels, extreme or non-finite scalars,
out-of-range enumeration values and sizes, the same array passed twice. The call must either
return or raise one of pyca's named exceptions (ValueError, TypeError, IndexError, OverflowError,
MemoryError, NotImplementedError) leaving every array argument unchanged; any other exception
fails the example. The examples run in a child process, so that a crash (a signal) or a hang is
seen as such, with the case that caused it.

PYCA_FUZZ_SECONDS (default 60) bounds the time, PYCA_FUZZ_SEED (default 19) picks the examples.
"""
import os
import subprocess
import sys
import time

ALLOWED = ("ValueError", "TypeError", "IndexError", "OverflowError", "MemoryError", "NotImplementedError")

FLOATS = [0.0, -1.0, 1e-30, 1e30, -1e30, 3.4e38, float("inf"), float("-inf"), float("nan")]
INTS = [-2**31, -7, -1, 0, 1, 2, 5, 64]
VEC3I = [-5, -1, 0, 1, 3, 2**20 + 1, 10**6]
ENUM_BAD = [-1, 7, 99, 2**31 - 1]
SIZES = [1, 2, 3, 5, 8]
SPACINGS = [1.0, 0.5, 2.5, 1e-3, 1e3, 1e-20, 1e20]
ORIGINS = [0.0, -3.5, 1e6]


def _fuzz(budget_s: float, seed: int, case_log: str) -> int:
    import builtins

    import numpy as np
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    import pyca as ca
    from pyca import registry

    ops = [o for o in registry.ops() if o.call is not None and o.overloads and "not wrapped" not in (o.skip or "")]
    assert ops, "the registry lists no operations"
    log = os.open(case_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    deadline = time.monotonic() + budget_s
    count = [0]

    def arrays(args):
        return [a for a in args if isinstance(a, (ca.Image3D, ca.Field3D))]

    def spoil_scalar(data, p, value):
        t = p.type
        if t in ("float", "double"):
            return data.draw(st.sampled_from(FLOATS))
        if t in ("int", "unsigned int", "size_t"):
            v = data.draw(st.sampled_from(INTS))
            return abs(v) if t != "int" else v
        if t == "Vec3Df":
            return ca.Vec3Df(*[data.draw(st.sampled_from(FLOATS + [1.0])) for _ in range(3)])
        if t == "Vec3Di":
            return ca.Vec3Di(*[data.draw(st.sampled_from(VEC3I)) for _ in range(3)])
        if t in registry._ENUM_VALUES and t != "MemoryType":
            return data.draw(st.sampled_from(ENUM_BAD))
        return value

    @settings(max_examples=100, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def body(data):
        op = data.draw(st.sampled_from(ops), label="op")
        k = data.draw(st.integers(0, len(op.overloads) - 1), label="overload")
        size = [data.draw(st.sampled_from(SIZES)) for _ in range(3)]
        spacing = [data.draw(st.sampled_from(SPACINGS)) for _ in range(3)]
        origin = [data.draw(st.sampled_from(ORIGINS)) for _ in range(3)]
        grid = ca.GridInfo(size, spacing, origin)
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        try:
            args = registry.make_inputs(op, k, grid, rng)
        except (TypeError, ValueError):
            return  # no example inputs for this overload on this grid
        params = op.overloads[k].params
        spoiled = []
        for i, a in enumerate(args):
            if isinstance(a, (ca.Image3D, ca.Field3D)):
                if data.draw(st.booleans()):
                    flat = np.asarray(a).reshape(-1, order="F")
                    flat[rng.integers(0, flat.size, 3)] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf, 3e38]))
                    spoiled.append(f"{params[i].name}:nonfinite")
            elif i < len(params) and data.draw(st.booleans()):
                args[i] = spoil_scalar(data, params[i], a)
                spoiled.append(f"{params[i].name}={args[i]!r}")
        arr_idx = [i for i, a in enumerate(args) if isinstance(a, (ca.Image3D, ca.Field3D))]
        if len(arr_idx) >= 2 and data.draw(st.booleans()):
            i, j = data.draw(st.sampled_from([(i, j) for i in arr_idx for j in arr_idx if i < j]))
            if type(args[i]) is type(args[j]):
                args[j] = args[i]
                spoiled.append(f"{params[j].name} is {params[i].name}")
        if time.monotonic() > deadline:
            return  # the rest of the last batch (after the draws: hypothesis wants them the same every time)
        case = f"{op.name} overload {k} grid {grid} spoiled [{', '.join(spoiled)}]\n"
        os.write(log, case.encode())
        before = [np.array(a.numpy(), copy=True) for a in arrays(args)]
        count[0] += 1
        try:
            op.call(*args)
        except Exception as e:  # noqa: BLE001 - the type is what is checked
            name = type(e).__name__
            if not isinstance(e, tuple(getattr(builtins, n) for n in ALLOWED)):
                raise AssertionError(f"{case.strip()}: raised {name}: {e}") from None
            for old, a in zip(before, arrays(args)):
                assert np.array_equal(a.numpy(), old, equal_nan=True), (
                    f"{case.strip()}: refused with {name} ({e}) but changed an argument")

    batch = 0
    while time.monotonic() < deadline:  # batches of 100 examples, each from its own seed
        hseed(seed * 100003 + batch)(body)()
        batch += 1
    os.close(log)
    return count[0]


def test_registry_fuzz_in_a_subprocess(tmp_path):
    budget = float(os.environ.get("PYCA_FUZZ_SECONDS", "60"))
    seed = int(os.environ.get("PYCA_FUZZ_SEED", "19"))
    log = tmp_path / "cases.txt"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(budget), str(seed), str(log)]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))

    def last_case():
        lines = log.read_text().splitlines() if log.exists() else []
        return lines[-1] if lines else "(none)"

    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=budget + 120)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the fuzzer hung (seed {seed}); last case: {last_case()}") from None
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode >= 0, f"the fuzzer crashed with signal {-proc.returncode} (seed {seed}); " \
                                 f"last case: {last_case()}\n{tail}"
    assert proc.returncode == 0, f"fuzzing failed (seed {seed}):\n{tail}"
    n = int(proc.stdout.split("FUZZ-DONE calls=")[1].split()[0])
    assert n >= 50, f"only {n} calls in {budget} s"


# ------------------------------------------------------------------------------------------------
# The file readers (issue 41): load_image and load_field on NIfTI files (.nii and .nii.gz), and NRRD and
# MetaImage files (.nrrd, .mha: raw, compressed, vector; SimpleITK reads them after pyca's header check)
# whose header fields and bodies are mutated. Each call must return or raise ImageFileError (a ValueError) or
# FileNotFoundError, within READER_CALL_S seconds, with at most READER_PEAK bytes allocated (the files are
# a few KB: a header that declares more than its file holds must be refused before its voxels are
# allocated), in a child whose address space is capped, so that an unchecked allocation fails there
# (and is seen: a refusal that reports a MemoryError, or SimpleITK's failure to allocate, fails the case).
READER_CALL_S = 5.0
READER_PEAK = 64 << 20
# (offset, struct format) of NIfTI-1 header fields worth breaking
_FIELDS = [(0, "<i"), (40, "<8h"), (70, "<h"), (72, "<h"), (76, "<8f"), (108, "<f"), (112, "<f"), (116, "<f"),
           (252, "<h"), (254, "<h"), (280, "<4f"), (296, "<4f"), (344, "<4s")]
_VALUES = [0, -1, 1, 2, 3, 4, 5, 7, 8, 16, 32, 64, 255, 1200, 2000, 2**15 - 1, -2**15, 2**31 - 1]
_FLOATS = [0.0, -1.0, 1e-30, 1e30, float("nan"), float("inf"), 352.0, 3.4e38]


def _fuzz_readers(budget_s, seed, case_log, folder):
    import gzip
    import logging
    import re
    import resource
    import struct
    import tracemalloc

    import numpy as np

    import nibabel as nib
    from pyca import io as pio

    logging.getLogger("nibabel").setLevel(logging.ERROR)  # its notes on fixed header fields
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    lim = used + (4 << 30)  # far below what the headers claim (up to 32767^3 voxels); room for threads
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    rng = np.random.default_rng(seed)
    base = []  # (extension, bytes, text header)
    for shape in [(6, 5, 4), (6, 5, 4, 1, 3), (7, 3)]:
        img = nib.Nifti1Image(rng.normal(size=shape).astype(np.float32), np.diag([1.5, 2.0, 1.0, 1.0]))
        path = os.path.join(folder, "base.nii")
        nib.save(img, path)
        with open(path, "rb") as fh:
            base.append((".nii", bytearray(fh.read()), False))
    if pio.simpleitk_available():  # the files SimpleITK reads, after pyca has checked their headers
        import SimpleITK as sitk

        for ext, compress, vector in [(".nrrd", False, False), (".nrrd", True, False), (".nrrd", False, True),
                                      (".mha", False, False), (".mha", True, False), (".mha", False, True)]:
            arr = rng.normal(size=(4, 5, 6, 3) if vector else (4, 5, 6)).astype(np.float32)
            path = os.path.join(folder, "base" + ext)
            sitk.WriteImage(sitk.GetImageFromArray(arr, isVector=vector), path, compress)
            with open(path, "rb") as fh:
                base.append((ext, bytearray(fh.read()), True))
    log = os.open(case_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    deadline = time.monotonic() + budget_s
    count = 0
    tracemalloc.start()
    while time.monotonic() < deadline:
        want_text = len(base) > 3 and bool(rng.integers(2))  # NIfTI half the time (one draw per case)
        group = [b for b in base if b[2] == want_text]
        ext, raw, text = group[int(rng.integers(len(group)))]
        raw = bytearray(raw)
        changes = []
        for _ in range(int(rng.integers(1, 4))):
            if not raw:  # truncated to nothing by an earlier change of this case
                break
            kind = int(rng.integers(5))
            if text and kind in (0, 4):  # a number of the text header (sizes, type size, offsets) replaced
                end = raw.find(b"ElementDataFile") if ext == ".mha" else raw.find(b"\n\n")
                nums = [m for m in re.finditer(rb"-?\d+", bytes(raw[:max(end, 0)]))][1:]  # not NRRD000N
                if nums:
                    m = nums[int(rng.integers(len(nums)))]
                    v = str(int(rng.choice(_VALUES + [10**6, 10**9, 2**40]))).encode()
                    raw[m.start():m.end()] = v
                    changes.append(f"number@{m.start()}={v.decode()}")
            elif kind == 4 and len(raw) >= 56:  # a plausible header with other (maybe huge) dimensions
                dims = [int(rng.choice([1, 2, 3, 7, 255, 1200, 2000, 2**15 - 1])) for _ in range(4)]
                raw[40:50] = struct.pack("<5h", int(rng.integers(2, 6)), *dims)
                changes.append(f"dims={dims}")
            elif kind == 0:  # a header field set to an extreme value
                off, fmt = _FIELDS[int(rng.integers(len(_FIELDS)))]
                n = struct.calcsize(fmt)
                if off + n > len(raw):
                    continue
                k = len(struct.unpack(fmt, raw[off:off + n]))
                if fmt.endswith("f"):
                    vals = [float(rng.choice(_FLOATS)) for _ in range(k)]
                elif fmt.endswith("s"):
                    vals = [bytes(rng.integers(0, 256, 4, dtype=np.uint8))]
                else:
                    top = 2**31 - 1 if fmt.endswith("i") else 2**15 - 1
                    vals = [max(-top - 1, min(top, int(rng.choice(_VALUES)))) for _ in range(k)]
                raw[off:off + n] = struct.pack(fmt, *vals)
                changes.append(f"field@{off}={vals}")
            elif kind == 1:  # random bytes anywhere
                for pos in rng.integers(0, len(raw), 4):
                    raw[pos] = int(rng.integers(256))
                changes.append("bytes")
            elif kind == 2:  # truncated
                cut = int(rng.integers(0, len(raw)))
                del raw[cut:]
                changes.append(f"cut@{cut}")
            else:  # extended by garbage
                raw += bytes(rng.integers(0, 256, int(rng.integers(1, 5000)), dtype=np.uint8))
                changes.append("grown")
        gz = not text and bool(rng.integers(2))
        path = os.path.join(folder, f"case{ext}{'.gz' if gz else ''}")
        with open(path, "wb") as fh:
            fh.write(gzip.compress(bytes(raw)) if gz else bytes(raw))
        for fn in (pio.load_image, pio.load_field):
            case = f"{fn.__name__} {ext} gz={gz} {' '.join(changes)}\n"
            os.write(log, case.encode())
            tracemalloc.reset_peak()
            t0 = time.monotonic()
            try:
                fn(path)
            except (ValueError, FileNotFoundError) as e:
                # a refusal from a check, not an allocation that failed (the address space is capped)
                assert "MemoryError" not in str(e) and "allocate" not in str(e), f"{case.strip()}: {e}"
            except Exception as e:  # noqa: BLE001 - the type is what is checked
                raise AssertionError(f"{case.strip()}: raised {type(e).__name__}: {str(e)[:300]}") from None
            dt = time.monotonic() - t0
            peak = tracemalloc.get_traced_memory()[1]
            assert dt < READER_CALL_S, f"{case.strip()}: took {dt:.1f} s"
            assert peak < READER_PEAK, f"{case.strip()}: allocated {peak} bytes"
            count += 1
    os.close(log)
    return count


def test_reader_fuzz_in_a_subprocess(tmp_path):
    budget = float(os.environ.get("PYCA_FUZZ_READER_SECONDS", "8"))
    seed = int(os.environ.get("PYCA_FUZZ_SEED", "19"))
    log = tmp_path / "reader-cases.txt"
    cmd = [sys.executable, os.path.abspath(__file__), "--readers", str(budget), str(seed), str(log)]
    try:
        # One OpenMP thread and few malloc arenas: on a many-core host each thread's arena reserves
        # address space, and the child caps its address space to catch oversized allocations.
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MALLOC_ARENA_MAX="2")
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=budget + 60, env=env)
    except subprocess.TimeoutExpired:
        lines = log.read_text().splitlines() if log.exists() else ["(none)"]
        raise AssertionError(f"a reader hung (seed {seed}); last case: {lines[-1]}") from None
    # The child's failure first (its last traceback line can be a long nibabel report), then the tail.
    failure = [ln for ln in proc.stderr.splitlines() if ln.startswith(("AssertionError:", "Traceback"))][-1:]
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, f"reader fuzzing failed (seed {seed}, exit {proc.returncode}): {failure}\n" + tail
    n = int(proc.stdout.split("FUZZ-DONE calls=")[1].split()[0])
    assert n >= 200, f"only {n} reader calls in {budget} s"


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--readers":
    calls = _fuzz_readers(float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], os.path.dirname(os.path.abspath(sys.argv[4])))
    print(f"FUZZ-DONE calls={calls}")


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--child":
    calls = _fuzz(float(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    print(f"FUZZ-DONE calls={calls}")
