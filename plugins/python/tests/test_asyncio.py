# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""asyncio plumbing without a GPU: host completions through the C ABI's eventfd, on the default loop and on uvloop.
The same queues carry GPU completions; tests/gpu/ repeats the loads with kernels."""
import asyncio
import gc
import os
import threading
import time
import warnings

import pytest

import cuasync
from cuasync import _completion, _loop, _queues, errors


def loops():
    params = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    try:
        import uvloop
        params.append(pytest.param(uvloop.new_event_loop, id="uvloop"))
    except ImportError:
        params.append(pytest.param(None, id="uvloop", marks=pytest.mark.skip(reason="uvloop is not installed")))
    return params


def run(new_loop, coro_fn, timeout=60):
    loop = new_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coro_fn(), timeout))
    finally:
        loop.close()
        del loop
        gc.collect()


def complete_from_threads(tokens, threads=4, code=0, delay=0.0):
    def work(part):
        for t in part:
            if delay:
                time.sleep(delay)
            t.complete(code)
    ts = [threading.Thread(target=work, args=(tokens[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    return ts


@pytest.mark.parametrize("new_loop", loops())
def test_thousand_concurrent_awaits_all_complete(new_loop):
    async def main():
        tokens = [cuasync.host_token() for _ in range(1000)]
        done = []

        async def waiter(i, t):
            await t
            done.append(i)
        tasks = [asyncio.ensure_future(waiter(i, t)) for i, t in enumerate(tokens)]
        await asyncio.sleep(0)
        for th in complete_from_threads(tokens):
            th.join()
        await asyncio.gather(*tasks)
        return sorted(done)
    assert run(new_loop, main) == list(range(1000))


@pytest.mark.parametrize("new_loop", loops())
def test_completions_stream_in_while_the_loop_runs(new_loop):
    # Completions arrive while the loop drains (no lost wake-up): 20,000 from 4 threads, awaited in order of arrival.
    async def main():
        tokens = [cuasync.host_token() for _ in range(20000)]
        ths = complete_from_threads(tokens)
        for t in tokens:
            await t
        for th in ths:
            th.join()
        return len(tokens)
    assert run(new_loop, main) == 20000


@pytest.mark.parametrize("new_loop", loops())
def test_the_loop_stays_free_while_waiting(new_loop):
    async def main():
        t = cuasync.host_token()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)
        tick = asyncio.ensure_future(ticker())
        th = complete_from_threads([t], threads=1, delay=0.1)
        await t
        tick.cancel()
        th[0].join()
        return ticks
    assert run(new_loop, main) >= 20  # ~100 ticks in 100 ms when nothing blocks the loop


@pytest.mark.parametrize("new_loop", loops())
def test_errors_reach_the_awaiting_coroutine(new_loop):
    async def main():
        t = cuasync.host_token()
        complete_from_threads([t], threads=1, code=errors.CUDA)[0].join()
        with pytest.raises(cuasync.CudaError):
            await t
        return True
    assert run(new_loop, main)


@pytest.mark.parametrize("new_loop", loops())
def test_cancellation_is_clean(new_loop):
    async def main():
        t = cuasync.host_token()
        task = asyncio.ensure_future(t.__await__().__next__() if False else _await(t))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        t.complete()  # the completion of a cancelled wait arrives later and is dropped
        await asyncio.sleep(0.01)
        # the loop still works afterwards
        t2 = cuasync.host_token()
        t2.complete()
        await t2
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run(new_loop, main)


async def _await(t):
    await t


@pytest.mark.parametrize("new_loop", loops())
def test_closing_the_loop_with_waits_pending(new_loop):
    tokens = []

    async def main():
        tokens.extend(cuasync.host_token() for _ in range(100))
        for t in tokens:
            asyncio.ensure_future(_await(t))
        await asyncio.sleep(0)
    loop = new_loop()
    loop.run_until_complete(main())
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    del loop
    gc.collect()
    for t in tokens:  # completing after the loop is gone: dropped, no error, no crash
        t.complete()
    # a new loop works
    assert run(new_loop, lambda: _await_new()) is None


async def _await_new():
    t = cuasync.host_token()
    t.complete()
    await t


def test_outside_a_loop_host_tokens_wait():
    t = cuasync.host_token()
    th = complete_from_threads([t], threads=1, delay=0.01)[0]
    t.wait(timeout=10)
    th.join()
    t2 = cuasync.host_token()
    t2.complete(errors.CANCELLED)
    with pytest.raises(cuasync.CancelledError):
        t2.wait(timeout=10)
    with pytest.raises(errors.InvalidArgumentError):
        t2.complete()


def test_a_host_token_made_in_a_loop_refuses_a_blocking_wait():
    async def main():
        t = cuasync.host_token()
        with pytest.raises(RuntimeError, match="await it"):
            t.wait(timeout=1)  # would block the loop that alone can settle it
        t.complete()
        await t

    asyncio.run(main())


def test_loops_in_several_threads_at_once():
    results = []

    def worker():
        async def main():
            tokens = [cuasync.host_token() for _ in range(200)]
            for th in complete_from_threads(tokens, threads=2):
                th.join()
            await asyncio.gather(*[_await(t) for t in tokens])
            return len(tokens)
        results.append(asyncio.run(main()))
    ths = [threading.Thread(target=worker) for _ in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(60)
    assert results == [200] * 4


def test_no_handler_is_left_behind():
    async def main():
        tokens = [cuasync.host_token() for _ in range(50)]
        for t in tokens:
            t.complete()
        await asyncio.gather(*[_await(t) for t in tokens])
        return _completion.for_loop(asyncio.get_running_loop()).pending()
    assert asyncio.run(main()) == 0


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


def test_a_refused_completion_leaves_the_host_token_to_complete():
    t = cuasync.host_token()
    with pytest.raises(errors.InvalidArgumentError, match="not a cuasync_error_code"):
        t.complete(99)
    with pytest.raises(errors.InvalidArgumentError, match="not an int"):
        t.complete(1.5)
    t.complete(0)  # still its own: completed once, now
    t.wait(timeout=10)
    with pytest.raises(errors.InvalidArgumentError, match="twice"):
        t.complete(0)


def test_a_dropped_host_token_is_completed_as_cancelled():
    r = _queues.reaper()
    cuasync.collect()
    before = r.pending()
    for _ in range(2000):
        cuasync.host_token()  # dropped at once, never completed
    gc.collect()
    cuasync.collect()
    assert r.pending() == before  # each completed as cancelled, its handler run and gone


def test_event_loops_that_used_cuasync_leave_no_queue_behind():
    async def main():
        t = cuasync.host_token()
        t.complete()
        await t

    asyncio.run(main())
    gc.collect()
    fds = _open_fds()
    for _ in range(50):
        asyncio.run(main())
    gc.collect()
    cuasync.collect()
    assert _open_fds() <= fds  # each loop's queue and eventfd went with its loop
    assert len(_loop._loops) <= 1


def test_a_closed_loop_hands_its_pending_operations_over():
    loop = asyncio.new_event_loop()

    async def start():
        t = cuasync.host_token()
        fut = asyncio.ensure_future(_await(t))  # pending when the loop closes
        await asyncio.sleep(0)
        return t, fut

    token, fut = loop.run_until_complete(start())
    lc = _loop.for_loop(loop)
    loop.close()  # `fut` (still referenced here) keeps the loop from being collected
    time.sleep(0.06)
    cuasync.collect()  # sweeps closed loops (at most every 50 ms)
    assert loop not in _loop._loops and lc.handle is None
    token.complete()  # its queue is gone: the record is dropped, nothing raises
    del fut


def test_thread_waiters_go_with_their_threads():
    def waiter():
        _queues.thread_waiter()  # a queue and an eventfd, for this thread's blocking waits

    threading.Thread(target=waiter).start()
    gc.collect()
    fds = _open_fds()
    for _ in range(50):
        th = threading.Thread(target=waiter)
        th.start()
        th.join()
    gc.collect()
    assert _open_fds() <= fds
