"""pyca.cuda_graph: pyca's device work recorded once and replayed, against NumPy; what cannot be recorded
(a result read on the host, the legacy stream) is refused in one line; without a GPU, a Stream is
refused in one line. The band-limited geodesic's graphs: tests/python/test_shoot_band.py."""
from __future__ import annotations

import numpy as np
import pytest

import pyca as ca
from pyca import cuda_graph

GPU = ca.cuda_available()


@pytest.mark.skipif(GPU, reason="the refusal without a GPU")
def test_a_stream_is_refused_without_a_cuda_context():
    with pytest.raises(RuntimeError, match="no CUDA context"):
        cuda_graph.Stream()


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_a_recorded_graph_replays_pycas_operations():
    a = np.random.default_rng(0).standard_normal((17, 9, 5)).astype(np.float32)
    im = ca.Image3D.from_array(np.asfortranarray(a)).clone(ca.MEM_DEVICE)
    other = im.clone(ca.MEM_DEVICE)
    stream = cuda_graph.Stream()
    with stream:

        def step():  # im <- 2 im + other
            ca.MulC_I(im, 2.0)
            ca.Add_I(im, other)

        step()  # eagerly once
        g = cuda_graph.Graph(step)  # recorded: nothing runs
        assert g.nodes >= 2
        ca.synchronize()
        np.testing.assert_allclose(im.clone(ca.MEM_HOST).numpy(), 3 * a, rtol=1e-6)
        for _ in range(3):
            g.launch()
        stream.synchronize()
    np.testing.assert_allclose(im.clone(ca.MEM_HOST).numpy(), 31 * a, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="outside the Stream it was recorded on"):  # unordered there: refused
        g.launch()


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_recording_a_host_read_or_the_legacy_stream_is_refused_in_one_line():
    with pytest.raises(RuntimeError, match="not 0"):
        cuda_graph.Graph(lambda: None)
    im = ca.Image3D.from_array(np.ones((8, 8, 8), np.float32)).clone(ca.MEM_DEVICE)
    with cuda_graph.Stream():
        with pytest.raises(RuntimeError, match="pyca.cuda_graph: recording failed"):
            cuda_graph.Graph(lambda: float(ca.Sum(im)))
