# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The tutorial's Python service (docs/tutorial.md): the C++ tutorial's requests from asyncio, on PyTorch tensors.

Each request copies its input into a PyTorch CUDA tensor, runs a cuasync kernel (compiled by NVRTC at run time) on
the tensor, and copies the result back, every step awaited: the event loop never waits for the GPU (completions
arrive through an fd the loop watches), so the requests overlap. Without a GPU it still awaits a host completion
through the same machinery, then says "no GPU: <reason>" and exits 3; without PyTorch it says so and exits 1.

    PYTHONPATH=plugins/python CUASYNC_LIBRARY=build/plugins/libcuasync.so python3 examples/python/service.py
"""
import array
import asyncio
import sys
import threading

import cuasync

# [kernel]
SOURCE = r"""
extern "C" __global__ void affine(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + 1.0f;
}"""
# [kernel]

N, REQUESTS = 1 << 16, 16


# [request]
async def request(torch, affine, stream, i):
    """One request: copy in, launch, copy out, each awaited; returns how many elements came back wrong."""
    data = array.array("f", [j % 1000 + i for j in range(N)])  # pageable host memory: cuasync stages it
    x = torch.empty(N, dtype=torch.float32, device="cuda")     # a PyTorch tensor, written and read by cuasync
    await cuasync.copy(x, data, stream=stream)                 # copy in (ordered after PyTorch's current stream)
    await affine.launch(stream, cuasync.grid_for(N), 256, x, 2.0, N)  # the tensor is the kernel's float*
    await cuasync.copy(data, x, stream=stream)                 # copy out: done when the bytes are in `data`
    expected = (torch.arange(N, device="cuda") % 1000 + i) * 2.0 + 1.0  # PyTorch reads the tensor too
    assert torch.equal(x, expected), "PyTorch sees other values than cuasync copied out"
    return sum(1 for j, v in enumerate(data) if v != 2.0 * (j % 1000 + i) + 1.0)
# [request]


# [serve]
async def serve(torch):
    loop = asyncio.get_running_loop()
    # NVRTC takes 10-100 ms on a miss: compile in a thread, not on the event loop.
    module = await loop.run_in_executor(None, cuasync.compile, SOURCE, "tutorial_affine.cu")
    streams = [cuasync.Stream() for _ in range(4)]  # non-blocking streams of device 0's primary context (PyTorch's)
    wrong = await asyncio.gather(*(request(torch, module.affine, streams[i % 4], i) for i in range(REQUESTS)))
    return sum(wrong)
# [serve]


async def host_completion():
    """Without a GPU: a host token completed by another thread, awaited through the loop's completion fd."""
    token = cuasync.host_token()
    threading.Timer(0.01, token.complete).start()
    await token


# [main]
def main():
    asyncio.run(host_completion())
    print("python service: a host completion came through asyncio")
    try:
        if cuasync.device_count() == 0:
            print("no GPU: the driver reports no CUDA device")
            return 3
    except cuasync.NoDriverError as e:
        print(f"no GPU: {e}")
        return 3
    try:
        import torch
    except ImportError as e:
        print(f"python service: needs PyTorch with CUDA ({e}): pip install torch")
        return 1
    wrong = asyncio.run(serve(torch))
    print(f"python service: {REQUESTS}/{REQUESTS} requests served, {wrong} wrong elements")
    return 0 if wrong == 0 else 1
# [main]


if __name__ == "__main__":
    sys.exit(main())
