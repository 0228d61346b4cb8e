# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""cuasync alone on the GPU: compile, launch, copy, DLPack round trips between cuasync buffers, errors."""
import array
import asyncio
import struct

import pytest

import cuasync

pytestmark = pytest.mark.timeout(120)


def floats(b):
    return list(struct.unpack(f"<{len(b) // 4}f", b))


def test_compile_launch_copy_round_trip(module):
    s = cuasync.Stream()
    n = 10000
    xs = array.array("f", [float(i) for i in range(n)])
    ys = array.array("f", [1.0] * n)
    x = cuasync.empty(n, "float32", stream=s)
    y = cuasync.empty(n, "float32", stream=s)
    out = cuasync.empty(n, "float32", stream=s)
    cuasync.copy(x, xs)
    cuasync.copy(y, ys)
    module.scale_add.launch(s, cuasync.grid_for(n), 256, x, y, out, 2.0, n)
    got = array.array("f")
    got.frombytes(out.tobytes())
    assert list(got) == [2.0 * i + 1.0 for i in range(n)]


def test_kernel_parameters_are_known_and_checked(module):
    k = module.scale_add
    assert k.param_sizes == (8, 8, 8, 4, 8)
    s = cuasync.Stream()
    x = cuasync.empty(4, stream=s)
    with pytest.raises(cuasync.InvalidArgumentError, match="takes 5 parameter"):
        k.launch(s, 1, 1, x, x, x, 1.0)
    with pytest.raises(cuasync.InvalidArgumentError, match="parameter 4"):
        k.launch(s, 1, 1, x, x, x, 1.0, 2**64)  # does not fit a long long
    with pytest.raises(cuasync.InvalidArgumentError, match="parameter 3"):
        k.launch(s, 1, 1, x, x, x, x, 4)  # a pointer for a float
    with pytest.raises(cuasync.InvalidArgumentError):
        k.launch(s, (1 << 31, 1, 1), 2048, x, x, x, 1.0, 4)  # block too large: caught before the GPU


def test_compile_error_carries_the_log():
    with pytest.raises(cuasync.CompileError) as e:
        cuasync.compile('extern "C" __global__ void k() { this is not cuda; }', "broken.cu")
    assert "broken.cu" in str(e.value)


def test_dlpack_between_cuasync_buffers_is_exactly_once(module):
    s = cuasync.Stream()
    b = cuasync.empty(16, "float32", stream=s)
    cuasync.memset(b, 0)
    other = cuasync.Stream()
    imported = cuasync.from_dlpack(b, stream=other)
    assert imported.ptr == b.ptr and imported.shape == (16,) and imported.dtype == "float32"
    module.add_one.launch(other, 1, 16, imported, 16)
    imported.free()
    other.synchronize()
    cuasync.collect()
    assert floats(b.tobytes()) == [1.0] * 16


def test_cuda_array_interface_is_v3_with_the_stream():
    s = cuasync.Stream()
    b = cuasync.empty((2, 3), "float32", stream=s)
    cai = b.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (2, 3) and cai["typestr"] == "<f4" and cai["stream"] == s.native
    assert cai["data"][0] == b.ptr


def test_asyncio_thousand_concurrent_launches_on_eight_streams(module):
    async def main():
        streams = [cuasync.Stream() for _ in range(8)]
        out = cuasync.zeros(1000, "float32", stream=streams[0])
        await streams[0].wait()

        async def one(i):
            await module.fill_index.launch(streams[i % 8], 1, 1, out, i)
        await asyncio.gather(*[one(i) for i in range(1000)])
        host = bytearray(4000)
        await cuasync.copy(host, out, stream=streams[0])
        return floats(bytes(host))
    assert asyncio.run(main()) == [float(i) for i in range(1000)]


def test_asyncio_on_uvloop(module):
    uvloop = pytest.importorskip("uvloop")

    async def main():
        s = cuasync.Stream()
        out = cuasync.zeros(1000, "float32", stream=s)
        await asyncio.gather(*[module.fill_index.launch(s, 1, 1, out, i) for i in range(1000)])
        host = bytearray(4000)
        await cuasync.copy(host, out, stream=s)
        return floats(bytes(host))
    loop = uvloop.new_event_loop()
    try:
        assert loop.run_until_complete(main()) == [float(i) for i in range(1000)]
    finally:
        loop.close()


def test_awaiting_keeps_the_loop_free(module):
    async def main():
        s = cuasync.Stream()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)
        t = asyncio.ensure_future(ticker())
        await module.spin.launch(s, 1, 1, 200_000_000)  # 200 ms of GPU time
        t.cancel()
        return ticks
    assert asyncio.run(main()) >= 50


def test_cancelled_await_and_closed_loop_keep_memory_alive(module):
    # A D2H copy into pageable memory behind a 100 ms kernel: the awaiting task is cancelled and the loop closed;
    # the host buffer must stay alive until the GPU (and cuasync's copy-out) is done with it.
    s = cuasync.Stream()
    src = cuasync.empty(1 << 20, "float32", stream=s)
    cuasync.memset(src, 0x3F)
    host = bytearray(4 << 20)

    async def main():
        module.spin.launch(s, 1, 1, 100_000_000)
        task = asyncio.ensure_future(_await(cuasync.copy(host, src, stream=s)))
        await asyncio.sleep(0.01)
        task.cancel()
    asyncio.run(main())
    s.synchronize()
    cuasync.collect()
    assert host[:4] == b"\x3f\x3f\x3f\x3f" and host[-4:] == b"\x3f\x3f\x3f\x3f"


async def _await(x):
    await x


def test_a_fault_reaches_the_awaiting_coroutine(tmp_path):
    # In a child: the context is lost for good after a fault.
    import subprocess
    import sys
    import os
    code = (
        "import asyncio, cuasync, sys\n"
        "sys.path.insert(0, %r)\n"
        "from kernels import SOURCE\n"
        "m = cuasync.compile(SOURCE)\n"
        "async def main():\n"
        "    s = cuasync.Stream()\n"
        "    b = cuasync.empty(4, stream=s)\n"
        "    try:\n"
        "        await m.fault.launch(s, 1, 1, b)\n"
        "    except cuasync.CudaError as e:\n"
        "        print('FAULT', e.cuda_result)\n"
        "asyncio.run(asyncio.wait_for(main(), 60))\n") % os.path.dirname(__file__)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "FAULT 700" in out.stdout, out.stdout + out.stderr


def test_fire_and_forget_copies_from_temporary_buffers():
    # The temporary lives only in the copy's references: dropped by the reaper's handler, its free drains the reaper
    # again from inside the drain (it deadlocked on the reaper's lock).
    s = cuasync.Stream()
    out = bytearray(b"\xff" * 64)
    for _ in range(8):
        cuasync.copy(out, cuasync.zeros(64, "uint8", stream=s))
    s.synchronize()
    cuasync.collect()
    assert out == bytearray(64)


def test_freed_buffers_and_bad_sizes_are_refused():
    b = cuasync.zeros(64, "uint8")
    b.free()
    for use in (lambda: cuasync.copy(b, bytes(64)), lambda: b.__cuda_array_interface__, b.tobytes,
                lambda: cuasync.memset(b, 1)):
        with pytest.raises(cuasync.StaleHandleError, match="was freed"):
            use()
    d = cuasync.zeros(64, "uint8")
    for bad in (lambda: cuasync.memset(d, 1, nbytes=-1), lambda: cuasync.memset(d, 1, nbytes=4096),
                lambda: cuasync.memset(d, 256), lambda: cuasync.memset(d, 1.5),
                lambda: cuasync.copy(d, bytes(64), nbytes=-1), lambda: cuasync.copy(True, d),
                lambda: d.view("uint8", (-1,)), lambda: d.view("float32", (3.0,))):
        with pytest.raises(cuasync.InvalidArgumentError):
            bad()


class _ArrayInterface:
    """A device array described only by the CUDA array interface (as CuPy or Numba export one)."""

    def __init__(self, ptr, shape, typestr, strides):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": strides, "stream": None}


def test_cuda_array_interface_strides_are_checked_in_every_dimension():
    d = cuasync.empty(64, "uint32")
    cuasync.copy(d, struct.pack("<64I", *range(64))).wait()
    every_other = _ArrayInterface(d.ptr, (8,), "<u4", (8,))  # x[::2]: it was copied as if contiguous
    with pytest.raises(cuasync.InvalidArgumentError, match="not contiguous"):
        cuasync.copy(bytearray(32), every_other)
    explicit = _ArrayInterface(d.ptr, (4, 16), "<u4", (64, 4))  # C-contiguous, its strides spelled out
    out = bytearray(256)
    cuasync.copy(out, explicit).wait()
    assert struct.unpack("<64I", out) == tuple(range(64))


def test_pinned_buffers_read_back_on_the_host():
    p = cuasync.empty(64, "uint8", pinned=True)
    d = cuasync.zeros(64, "uint8")
    cuasync.memset(d, 9).wait()
    cuasync.copy(p, d).wait()
    assert p.tobytes() == b"\x09" * 64
    assert cuasync.zeros((0, 3)).tobytes() == b""


def test_exit_waits_for_copies_nobody_awaited():
    # cuasync's copy threads write into the bytearrays after the script's last line: the interpreter must not free
    # them first (it crashed in memcpy_team::copy_part, 3 runs of 3).
    import os
    import subprocess
    import sys
    code = ("import cuasync\n"
            "b = cuasync.empty(256 << 20, 'uint8', stream=cuasync.Stream())\n"
            "for _ in range(3):\n"
            "    cuasync.copy(bytearray(256 << 20), b)\n"
            "print('EXITING')\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "EXITING" in out.stdout, out.stdout + out.stderr


def test_a_buffer_first_used_on_another_stream_waits_for_its_home_stream(module):
    # Allocated and set on s1 behind a kernel that spins ~25 ms; read on s2: the read must come after the memset.
    s1, s2 = cuasync.Stream(), cuasync.Stream()
    b = cuasync.empty(1 << 20, "uint8", stream=s1)
    module.spin.launch(s1, 1, 1, 50_000_000)
    cuasync.memset(b, 7, stream=s1)
    out = bytearray(1 << 20)
    cuasync.copy(out, b, stream=s2).wait()
    assert out == b"\x07" * (1 << 20)


def test_a_first_use_on_another_stream_waits_for_a_staged_copy_still_enqueueing_on_the_home_stream():
    # A copy over 256 MiB into the buffer on its home stream holds that stream until its last chunk is enqueued; the
    # buffer's first use on s2 must be ordered after it: the event it needs waits (sleeping) for the staging instead
    # of raising BusyError, and the read sees the copied bytes.
    s1, s2 = cuasync.Stream(), cuasync.Stream()
    size = 300 << 20
    b = cuasync.empty(size, "uint8", stream=s1)
    p = cuasync.copy(b, bytearray(b"\x05") * size, stream=s1)
    head = b.view("uint8", (1 << 20,))
    out = bytearray(1 << 20)
    cuasync.copy(out, head, stream=s2).wait()
    p.wait()
    assert out == b"\x05" * (1 << 20)
    with pytest.raises(cuasync.BusyError):  # asked not to wait: refused at once while staging holds the stream
        s3 = cuasync.Stream()
        q = cuasync.copy(b, bytearray(size), stream=s3)
        try:
            s3.record(wait_for_staging=False)
        finally:
            q.wait()


def test_a_free_waits_for_a_staged_copy_on_another_stream():
    # A copy over 256 MiB holds its stream until its last chunk is enqueued: no event can follow it before, so the
    # buffer's free (on its own stream, ordered after every stream that used it) waits for that, then goes.
    s1, s2 = cuasync.Stream(), cuasync.Stream()
    b = cuasync.empty(300 << 20, "uint8", stream=s1)
    p = cuasync.copy(b, bytearray(300 << 20), stream=s2)
    b.free()
    p.wait()
    cuasync.collect()
    assert not b.handle
    with pytest.raises(cuasync.StaleHandleError):
        b.tobytes()


def test_admission_limits_belong_to_the_context(module):
    a, b = cuasync.Runtime(0), cuasync.Runtime(0)  # two runtimes, one primary context
    before = a.admission_limits()
    assert before == (64, 500)
    try:
        a.set_admission_limits(8, 100)
        assert b.admission_limits() == (8, 100)
        with pytest.raises(cuasync.InvalidArgumentError, match="per_stream 200"):
            a.set_admission_limits(200, 100)
        assert a.admission_limits() == (8, 100)
        s = cuasync.Stream(a)
        x = cuasync.empty(1024, "float32", stream=s)
        module.scale_add.launch(s, cuasync.grid_for(1024), 256, x, x, x, 1.0, 1024)  # still admitted
        s.synchronize()
    finally:
        a.set_admission_limits(*before)

