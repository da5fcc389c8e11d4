"""Pickling and copying Image3D / Field3D (pyca/_pickle.py): values, grid and memory type round-trip;
the host buffer travels without extra copies; views keep working; Dask's serialization."""
import copy
import pickle

import numpy as np
import pytest

import pyca as ca


def _image(shape=(5, 6, 7), seed=0):
    a = np.random.default_rng(seed).random(shape, dtype=np.float32)
    g = ca.GridInfo(shape[:3], (1.0, 2.0, 0.5), (-3.0, 1.5, 7.0))
    cls = ca.Field3D if len(shape) == 4 else ca.Image3D
    return cls.from_array(np.asfortranarray(a), g), a


def _same_grid(a, b):
    ga, gb = a.grid(), b.grid()
    return (tuple(ga.size()), tuple(ga.spacing()), tuple(ga.origin())) == \
        (tuple(gb.size()), tuple(gb.spacing()), tuple(gb.origin()))


@pytest.mark.parametrize("shape", [(5, 6, 7), (5, 6, 7, 3), (9, 4, 1)])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_pickle_round_trip_host(shape, protocol):
    obj, ref = _image(shape)
    back = pickle.loads(pickle.dumps(obj, protocol=protocol))
    assert type(back) is type(obj)
    assert back.memType() == ca.MEM_HOST
    assert _same_grid(back, obj)
    np.testing.assert_array_equal(np.asarray(back), ref)
    # independent memory: writing one does not change the other
    first = (0,) * ref.ndim
    np.asarray(back)[first] = -1.0
    assert np.asarray(obj)[first] == ref[first]


def test_pickle_out_of_band_is_the_objects_buffer():
    im, ref = _image((8, 8, 8))
    buffers = []
    data = pickle.dumps(im, protocol=5, buffer_callback=buffers.append)
    assert len(data) < 1000  # the voxels are not in the stream
    assert len(buffers) == 1
    raw = buffers[0].raw()
    assert raw.nbytes == ref.nbytes
    # the buffer handed out is the object's own memory (no copy): a write through the object shows
    np.asarray(im)[1, 2, 3] = 42.0
    assert np.frombuffer(raw, np.float32).reshape(ref.shape, order="F")[1, 2, 3] == 42.0
    # loading from a writable buffer makes it the new object's memory (no copy either)
    store = bytearray(raw)
    back = pickle.loads(data, buffers=[store])
    np.testing.assert_array_equal(np.asarray(back)[1, 2, 3], 42.0)
    np.frombuffer(store, np.float32)[0] = 7.0
    assert np.asarray(back)[0, 0, 0] == 7.0


def test_inband_protocol5_pickle_is_one_buffer_long():
    im, ref = _image((16, 16, 16))
    assert ref.nbytes < len(pickle.dumps(im, protocol=5)) < ref.nbytes + 600


def test_views_keep_working_after_pickling_and_unpickling():
    im, ref = _image()
    view = np.asarray(im)  # a view taken before pickling
    back = pickle.loads(pickle.dumps(im))
    del im
    np.testing.assert_array_equal(view, ref)  # the original's view still valid
    v2 = np.asarray(back)
    v2 += 1.0
    np.testing.assert_allclose(np.asarray(back), ref + 1.0)
    vx, vy, vz = pickle.loads(pickle.dumps(_image((4, 5, 6, 3))[0])).asnp()
    assert vx.shape == (4, 5, 6) and np.shares_memory(vx, vz) is False
    del back
    np.testing.assert_allclose(v2, ref + 1.0)  # a view outlives the unpickled object


def test_field_with_spare_capacity():
    f, ref = _image((6, 6, 6, 3))
    f.setGrid(ca.GridInfo((3, 6, 6)))  # fewer voxels than its capacity: strided components
    back = pickle.loads(pickle.dumps(f))
    np.testing.assert_array_equal(np.asarray(back), np.asarray(f))


def test_copy_and_deepcopy():
    for shape in ((5, 6, 7), (5, 6, 7, 3)):
        obj, ref = _image(shape)
        for c in (copy.copy(obj), copy.deepcopy(obj), copy.deepcopy([obj, obj])[0]):
            assert type(c) is type(obj) and _same_grid(c, obj)
            np.testing.assert_array_equal(np.asarray(c), ref)
            assert not np.shares_memory(np.asarray(c), np.asarray(obj))
        pair = copy.deepcopy([obj, obj])
        assert pair[0] is pair[1]  # the memo keeps shared references shared


def test_pinned_round_trip():
    im, ref = _image()
    try:
        pinned = im.clone(ca.MEM_HOST_PINNED)
    except ca.CudaError:
        pytest.skip("pinned memory needs the CUDA runtime")
    back = pickle.loads(pickle.dumps(pinned))
    assert back.memType() == ca.MEM_HOST_PINNED
    np.testing.assert_array_equal(np.asarray(back), ref)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a GPU (device objects)")
def test_pickle_device_round_trip():
    im, ref = _image((7, 5, 3, 3))
    dev = im.clone(ca.MEM_DEVICE)
    back = pickle.loads(pickle.dumps(dev))
    assert back.memType() == ca.MEM_DEVICE and _same_grid(back, dev)
    np.testing.assert_array_equal(back.numpy(), ref)
    c = copy.deepcopy(dev)
    assert c.memType() == ca.MEM_DEVICE
    np.testing.assert_array_equal(c.numpy(), ref)


def test_unpickling_device_object_without_gpu_refuses(monkeypatch):
    from pyca import _pickle

    im, _ = _image()
    host, mv = _pickle.host_frame(im)
    monkeypatch.setattr(ca.core, "cuda_available", lambda: False)
    with pytest.raises(ca.CudaError, match="device memory"):
        _pickle.rebuild("Image3D", im.grid(), int(ca.MEM_DEVICE), bytes(mv))


def test_corrupt_pickle_is_refused():
    from pyca import _pickle

    im, _ = _image()
    with pytest.raises(pickle.UnpicklingError, match="voxels"):
        _pickle.rebuild("Image3D", im.grid(), int(ca.MEM_HOST), b"\0" * 12)


def test_dask_serialization_one_frame_no_copy():
    pytest.importorskip("distributed")
    from distributed.protocol import deserialize, serialize

    ca._pickle.register_dask()
    for shape in ((6, 5, 4), (6, 5, 4, 3)):
        obj, ref = _image(shape)
        header, frames = serialize(obj, serializers=("dask",))
        assert header["serializer"] == "dask"
        assert len(frames) == 1 and memoryview(frames[0]).nbytes == ref.nbytes
        assert np.shares_memory(np.frombuffer(frames[0], np.float32), np.asarray(obj).reshape(-1, order="F"))
        back = deserialize(header, [bytearray(frames[0])])
        assert type(back) is type(obj) and _same_grid(back, obj)
        np.testing.assert_array_equal(np.asarray(back), ref)
