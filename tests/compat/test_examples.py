"""The PyCA-style scripts of examples/pyca_scripts run unchanged, on the CPU and (where there is one)
on the GPU, and reach their own success criteria (each script exits with status 0 on success)."""
import ast
import os
import runpy
import sys

import pytest

import pyca as ca

SCRIPTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pyca_scripts")
SCRIPTS = {
    "lddmm_image_matching.py": ["20"],  # iterations
    "gaussian_scale_space.py": [],
}
needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("mem", ["host", pytest.param("device", marks=needs_gpu)])
@pytest.mark.parametrize("script", list(SCRIPTS))
def test_pyca_script_runs_unchanged(script, mem, monkeypatch, capsys):
    path = os.path.join(SCRIPTS_DIR, script)
    source = open(path).read()
    imported = {a.name for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Import, ast.ImportFrom))
                for a in node.names} | {node.module for node in ast.walk(ast.parse(source))
                                        if isinstance(node, ast.ImportFrom) and node.module}
    assert "pyca" in imported and not any(name.startswith("PyCA") for name in imported)
    monkeypatch.setattr(sys, "argv", [path, mem] + SCRIPTS[script])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(path, run_name="__main__")
    out = capsys.readouterr().out
    assert exit_info.value.code == 0, out
    assert ("MEM_DEVICE" if mem == "device" else "MEM_HOST") in out
