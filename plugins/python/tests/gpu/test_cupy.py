# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""CuPy: the same kernels on CuPy arrays through DLPack and the CUDA array interface, on CuPy streams."""
import sys
import time

import pytest

cp = pytest.importorskip("cupy")

import cuasync  # noqa: E402

pytestmark = pytest.mark.timeout(180)


def test_kernel_on_cupy_arrays_on_a_cupy_stream(module):
    cs = cp.cuda.Stream(non_blocking=True)
    with cs:
        x = cp.arange(100000, dtype=cp.float32)
        y = cp.ones(100000, dtype=cp.float32)
        out = cp.empty_like(x)
    s = cuasync.Stream.adopt(cs)  # __cuda_stream__ or .ptr
    assert s.native == cs.ptr
    module.scale_add.launch(s, cuasync.grid_for(x.size), 256, x, y, out, 2.0, x.size)  # pointers through the CAI
    cs.synchronize()
    cp.testing.assert_array_equal(out, 2.0 * x + y)


def test_dlpack_import_waits_for_the_cupy_stream(module):
    producer = cp.cuda.Stream(non_blocking=True)
    s = cuasync.Stream()
    with producer:
        x = cp.zeros(4096, dtype=cp.float32)
        producer.synchronize()
        t0 = time.perf_counter()
        module.spin.launch(cuasync.Stream.adopt(producer), 1, 1, 200_000_000)
        x.fill(3.0)
        b = cuasync.from_dlpack(x, stream=s)  # CuPy makes s wait for producer on the device
    before = sys.getrefcount(x)
    module.add_one.launch(s, cuasync.grid_for(4096), 256, b, 4096)
    assert time.perf_counter() - t0 < 0.1 and not producer.done, "the host waited"
    b.free()
    s.synchronize()
    cuasync.collect()
    cp.testing.assert_array_equal(x, cp.full(4096, 4.0, dtype=cp.float32))
    assert sys.getrefcount(x) <= before


def test_cuda_array_interface_import_orders_the_producer_stream(module):
    producer = cp.cuda.Stream(non_blocking=True)
    s = cuasync.Stream()
    with producer:
        x = cp.zeros(1024, dtype=cp.float32)
        module.spin.launch(cuasync.Stream.adopt(producer), 1, 1, 100_000_000)
        x.fill(5.0)
        host = bytearray(4096)
        cuasync.copy(host, x, stream=s).wait()  # CAI v3 names producer: s waits for it on the device
    import struct
    assert set(struct.unpack("<1024f", bytes(host))) == {5.0}


def test_cupy_reads_cuasync_buffers_both_ways():
    s = cuasync.Stream()
    b = cuasync.zeros(512, "float32", stream=s)
    via_cai = cp.asarray(b)  # __cuda_array_interface__ (v3, with cuasync's stream)
    via_dlpack = cp.from_dlpack(b)
    assert via_cai.data.ptr == b.ptr == via_dlpack.data.ptr
    cp.testing.assert_array_equal(via_dlpack, cp.zeros(512, dtype=cp.float32))
    via_cai += 1
    cp.cuda.get_current_stream().synchronize()
    cp.testing.assert_array_equal(via_dlpack, cp.ones(512, dtype=cp.float32))


def test_raw_kernel_and_cuasync_agree(module):
    from .kernels import SOURCE
    raw = cp.RawModule(code=SOURCE, options=("--fmad=false",)).get_function("scale_add")  # as the test module
    x = cp.random.rand(10000, dtype=cp.float32)
    y = cp.random.rand(10000, dtype=cp.float32)
    a, b = cp.empty_like(x), cp.empty_like(x)
    raw((cuasync.grid_for(10000),), (256,), (x, y, a, cp.float32(1.5), cp.int64(10000)))
    s = cuasync.Stream.adopt(cp.cuda.get_current_stream())  # CuPy's default: the legacy default stream
    module.scale_add.launch(s, cuasync.grid_for(10000), 256, x, y, b, 1.5, 10000)
    cp.cuda.Device().synchronize()
    cp.testing.assert_array_equal(a, b)
