"""What a newcomer meets first (issue 40): the README, the documentation's order and address, and
the command line behaving the same way in every command. Each test here failed on the behaviour the
issue reported."""
import re
import tomllib
from pathlib import Path

import pytest
from cli_helpers import run

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


# ------------------------------------------------------------------------------------------------
# README
def test_readme_is_short_and_starts_with_what_and_for_whom():
    lines = README.splitlines()
    assert len(lines) <= 150, len(lines)
    head = " ".join(lines[:6]).lower()
    assert "register" in head and "researchers" in head  # what it does, for whom: not "data structures"
    assert "data structures" not in head


def test_readme_commands_are_the_ones_ci_runs():
    """The README's two commands, verbatim in .ci/run (CI runs them as written)."""
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    install = "bash scripts/install-deps.sh && pip install . && pyca lddmm"
    assert any(b.strip() == install for b in blocks)
    assert any(b.strip() == "bash scripts/test.sh" for b in blocks)
    assert re.search(rf"^{re.escape(install)}$", ci, re.M)
    assert re.search(r"^bash scripts/test\.sh$", ci, re.M)


def test_readme_says_how_to_install_in_a_venv_and_what_the_build_prints():
    assert "python3 -m venv" in README and "externally-managed-environment" in README
    assert "pip install -v ." in README and "minutes" in README


def test_readme_claims_no_package_index():
    """No index serves pyca3d: the README must not tell anyone to `pip install pyca3d`."""
    for text in (README, (ROOT / "docs" / "install.md").read_text()):
        assert not re.search(r"pip install\s+['\"]?pyca3d\b(?!\[)", text)


def test_readme_shows_own_files_outputs_and_a_picture():
    assert "pyca lddmm --fixed" in README and "--moving" in README and "--out" in README
    for name in ("deformed.nii.gz", "jacdet.nii.gz", "summary.json", "report.png"):
        assert f"`{name}`" in README
    pics = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README)
    assert pics, "no picture"
    for p in pics:
        f = ROOT / p
        assert f.is_file() and f.suffix == ".png" and f.stat().st_size < 200_000, p
    # the picture is made by a script kept beside it
    assert "scripts/readme-image.sh" in README and (ROOT / "scripts" / "readme-image.sh").is_file()


def test_readme_links_exist_and_say_what_dependencies_are_for():
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).is_file(), link
    assert "What each dependency is for" in README


# ------------------------------------------------------------------------------------------------
# The documentation site: an order, an address
def _nav_pages(nav):
    for item in nav:
        for v in item.values():
            if isinstance(v, list):
                yield from _nav_pages(v)
            else:
                yield v


def test_docs_nav_is_explicit_and_ordered():
    import yaml

    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    sections = [next(iter(s)) for s in cfg["nav"]]
    want = ["Getting started", "Tutorials", "User guide", "Extending pyca", "Reference", "Design", "Performance"]
    assert [s for s in sections if s in want] == want
    pages = set(_nav_pages(cfg["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk <= pages, sorted(on_disk - pages)  # (scripts/docs.sh's strict build says so too)
    assert {"install.md", "tutorial-brains.md"} <= pages


def test_command_pages_put_outputs_before_internals():
    for page, internals in (("lddmm.md", "## The algorithm"), ("atlas.md", "## The algorithm")):
        text = (ROOT / "docs" / page).read_text()
        assert text.index("## Outputs") < text.index(internals), page
    lddmm = (ROOT / "docs" / "lddmm.md").read_text()
    assert lddmm.count("Exit status:") == 1


def test_documentation_url_in_metadata_and_help():
    from pyca._docs import DOCS_URL

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert meta["Documentation"] == DOCS_URL
    for cmd in ("lddmm", "atlas", "register-batch", "register", "apply", None):  # None: `pyca --help`
        p = run(cmd, "--help") if cmd else run("--help")
        assert p.returncode == 0
        assert DOCS_URL in p.stdout, cmd
        assert "docs/" not in p.stdout.replace(DOCS_URL, ""), cmd  # no path into the source tree


# ------------------------------------------------------------------------------------------------
# One CLI behaviour everywhere
@pytest.mark.parametrize("where", ["before"])  # (after the command it always worked)
def test_quiet_before_or_after_atlas(tmp_path, where):
    args = ["atlas", "--out", str(tmp_path / "a"), "--cohort", "2", "--cohort-size", "8,8,1",
            "--template-iterations", "1", "--workers", "1", "--device", "cpu", "-p", "iterations=2,2,2",
            "--no-report"]
    p = run(*(["-q", *args] if where == "before" else [*args, "-q"]))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "" and p.stderr == "", (p.stdout, p.stderr)
    assert (tmp_path / "a" / "template.nii.gz").is_file()


def test_every_command_takes_q_and_v_on_either_side():
    from pyca.cli import _parser

    ap = _parser()
    for cmd in ("lddmm", "demo", "info", "atlas"):
        assert ap.parse_args(["-q", cmd]).quiet and ap.parse_args([cmd, "-q"]).quiet
        assert ap.parse_args(["-v", cmd]).verbose == 1 and ap.parse_args([cmd, "-v"]).verbose == 1
    batch = ["--template", "t", "--subjects", "s"]
    assert ap.parse_args(["-q", "register-batch", *batch]).quiet
    assert ap.parse_args(["register-batch", *batch, "-q"]).quiet


def test_dashboard_says_how_to_get_it():
    from pyca import distributed

    assert "pip install bokeh" in distributed.NO_DASHBOARD
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("bokeh") for r in extras["dashboard"])


# ------------------------------------------------------------------------------------------------
# summary.json says how the result was made
def test_lddmm_summary_records_version_command_inputs_device_and_memory(tmp_path):
    import hashlib
    import json

    import nibabel as nib
    import numpy as np

    import pyca
    from pyca.apps import data

    fixed, moving = data.builtin_arrays(size=(16, 16, 8))
    files = {}
    for name, arr in (("f", fixed), ("m", moving)):
        files[name] = tmp_path / f"{name}.nii.gz"
        nib.save(nib.Nifti1Image(np.asarray(arr, np.float32), np.diag([2.0, 2.0, 2.0, 1.0])), files[name])
    p = run("lddmm", "--fixed", str(files["f"]), "--moving", str(files["m"]), "--scales", "2,1", "--iterations",
             "2,2", "--out", str(tmp_path / "o"), "--device", "cpu", "-q")
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    prov = s["provenance"]
    assert prov["pyca"]["version"] == pyca.__version__
    assert "lddmm --fixed" in prov["command"] and str(files["m"]) in prov["command"]
    for role, name in (("fixed", "f"), ("moving", "m")):
        rec = prov["inputs"][role]
        assert rec["path"] == str(files[name])
        assert rec["sha256"] == hashlib.sha256(files[name].read_bytes()).hexdigest()
        assert rec["bytes"] == files[name].stat().st_size
    assert prov["device"].startswith("cpu") and prov["device"] == s["device"]
    assert prov["peak_memory"]["cpu_rss_bytes"] > 10 << 20
    assert prov["peak_memory"]["gpu_bytes"] == 0  # a CPU run holds no device memory
    assert s["params"]["sigma"] > 0  # the effective parameters, as before


def test_checksum_is_streamed_and_matches_hashlib(tmp_path):
    import hashlib

    from pyca import _provenance

    f = tmp_path / "big.bin"
    data = bytes(range(256)) * 9000  # > 2 blocks of 1 MiB
    f.write_bytes(data)
    assert _provenance.sha256(f) == hashlib.sha256(data).hexdigest()
    assert _provenance.describe_input(tmp_path / "missing.nii") == {"path": str(tmp_path / "missing.nii")}


# ------------------------------------------------------------------------------------------------
# Numbers shown to users
def test_demo_jacobian_of_a_mild_deformation_is_around_one():
    """The demo's deformation moves the ball's edge by a voxel or two: its Jacobian determinant must
    bracket 1 (it showed [0.49, 0.80]: JacDetH per world unit on a 1 x 1 x 1.5 grid, 1/1.5 for the
    identity)."""
    p = run("demo", "--size", "24", "--device", "cpu")
    assert p.returncode == 0, p.stderr
    lo, hi = map(float, re.search(r"det range\s+[0-9.]+ ms\s+= \[([-0-9.]+), ([-0-9.]+)\]", p.stdout).groups())
    assert 0.5 < lo < 1.0 < hi < 2.0, (lo, hi)


def _driver_loadable():
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_info_without_a_driver_says_so():
    import pyca

    if pyca.cuda_available() or not pyca.core.built_with_cuda() or _driver_loadable():
        pytest.skip("needs a CUDA build on a machine with no NVIDIA driver")
    p = run("info")
    assert p.returncode == 0
    assert "no NVIDIA driver" in p.stdout, p.stdout
    assert "driver version is insufficient" not in p.stdout  # what the runtime says when there is none


def test_progress_shows_the_step_in_voxels_and_energies_per_voxel(tmp_path):
    p = run("lddmm", "--size", "16,16,8", "--scales", "2,1", "--iterations", "4,4", "--time-steps", "2",
             "--device", "cpu", "--no-report", "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    steps = [float(x) for x in re.findall(r"step=~([0-9.e+-]+) vox", p.stderr)]
    assert steps and all(1e-3 < s < 5 for s in steps), p.stderr  # not step=3.1e-17
    assert "E/vox=" in p.stderr
def test_device_memory_peak_counts_an_allocation():
    """pyca.device_memory_peak(): the stream-ordered pool's high-water mark, at least an image's bytes
    after one is allocated; reset_device_memory_peak() starts it again from what is held."""
    import pyca as ca

    if not hasattr(ca, "device_memory_peak"):
        pytest.skip("this build predates device_memory_peak")
    if not ca.cuda_available():
        assert ca.device_memory_peak() == 0  # no GPU: nothing held, and asking starts nothing
        pytest.skip(f"the rest needs a GPU: {ca.core.cuda_unavailable_reason()}")
    im = ca.Image3D(ca.GridInfo(ca.Vec3Di(128, 128, 64)), ca.MEM_DEVICE)
    ca.synchronize()
    before = ca.device_memory_peak()
    assert before >= 128 * 128 * 64 * 4
    del im
    ca.synchronize()
    ca.reset_device_memory_peak()
    small = ca.Image3D(ca.GridInfo(ca.Vec3Di(16, 16, 16)), ca.MEM_DEVICE)
    ca.synchronize()
    assert 16 ** 3 * 4 <= ca.device_memory_peak() <= before - 128 * 128 * 64 * 4 + 16 ** 3 * 4 + (1 << 21)
    del small
