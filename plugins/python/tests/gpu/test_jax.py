# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""JAX (issue 11): a cuasync JIT kernel inside jax.jit through XLA's own FFI, built here against the running jaxlib's
headers, equal to the jnp computation; and every mismatch fails loudly (ValueError before XLA, the handler's error,
XLA's error naming the target), never silently."""
import os
import shutil

import pytest

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave the GPU to the other tests of the session
jax = pytest.importorskip("jax")
try:
    jax.devices("cuda")
except RuntimeError as e:
    pytest.skip(f"jax has no CUDA device ({e})", allow_module_level=True)
if not shutil.which(os.environ.get("CXX", "c++")):
    pytest.skip("no C++ compiler to build the XLA FFI handler", allow_module_level=True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import cuasync  # noqa: E402
import cuasync.jax as cj  # noqa: E402

from .kernels import SOURCE  # noqa: E402

pytestmark = pytest.mark.timeout(120)
XLA_ERROR = jax.errors.JaxRuntimeError
# No FMA contraction in the kernel, so that it does what jnp's `a * x + y` says (the data below is exact either way).
SPEC = cj.KernelSpec(SOURCE, "scale_add", ("--fmad=false",))


@pytest.fixture(scope="module")
def handler(tmp_path_factory):
    return cj.build_handler(cache_dir=str(tmp_path_factory.mktemp("xla_ffi")))


def exact_inputs(n, seed=0):
    # Multiples of 1/8 below 512: with a = 2.5 every product and sum is exact in float32, so the kernel and XLA must
    # agree to the bit whether or not either fuses the multiply-add.
    rng = np.random.default_rng(seed)
    x, y = (rng.integers(-4096, 4096, n).astype(np.float32) / 8 for _ in range(2))
    return jnp.asarray(x), jnp.asarray(y)


def scale_add(kernel, x, y, a):
    return cj.kernel_call(kernel, x, y, out_shapes=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=cuasync.grid_for(x.size), block=256, scalars=(a, x.size))


@pytest.mark.parametrize("n", [1, 1000, 2**20])
def test_scale_add_under_jit_equals_jnp(handler, n):
    x, y = exact_inputs(n)
    got = jax.jit(lambda x, y: scale_add(SPEC, x, y, 2.5))(x, y)
    want = jax.jit(lambda x, y: 2.5 * x + y)(x, y)
    assert got.shape == (n,) and got.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_random_data_matches_to_rounding(handler):
    kx, ky = jax.random.split(jax.random.key(1))
    x, y = jax.random.normal(kx, (4096,)), jax.random.normal(ky, (4096,))
    got = jax.jit(lambda x, y: scale_add(SPEC, x, y, 1.7))(x, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(1.7 * x + y), rtol=1e-6, atol=1e-6)


def test_several_calls_in_one_jitted_function(handler):
    x, y = exact_inputs(5000, seed=3)

    def chain(x, y):
        u = scale_add(SPEC, x, y, 2.0)
        v = scale_add(SPEC, u, x, -0.5)
        return u, v, scale_add(SPEC, v, u, 4.0)

    f = jax.jit(chain)
    assert f.lower(x, y).as_text().count(cj.TARGET) == 3  # three FFI calls, not a fallback
    u, v, w = f(x, y)
    u2 = 2.0 * x + y
    v2 = -0.5 * u2 + x
    for got, want in ((u, u2), (v, v2), (w, 4.0 * v2 + u2)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_kernel_object_for_device_0(handler, module):
    x, y = exact_inputs(777, seed=4)
    got = jax.jit(lambda x, y: scale_add(module.scale_add, x, y, 2.5))(x, y)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(2.5 * x + y))


def test_built_for_the_running_jaxlibs_ffi_version(handler):
    compiled, runtime = cj._versions(handler)
    assert compiled == cj.header_ffi_api_version(jax.ffi.include_dir())
    assert runtime[0] == compiled[0] and runtime[1] >= compiled[1]  # what XLA's table said at the registration probe
    assert cj.build_handler() is handler  # once per process: XLA refuses a second handler under the name


def test_wrong_operands_or_scalars_raise_before_xla(handler):
    x, y = exact_inputs(16)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    with pytest.raises(ValueError, match=r"takes 5 parameter\(s\) but was given 1 input"):
        cj.kernel_call(SPEC, x, out_shapes=out, grid=1, block=256, scalars=(2.5, 16))
    with pytest.raises(ValueError, match=r"1 scalar\(s\)"):
        cj.kernel_call(SPEC, x, y, out_shapes=out, grid=1, block=256, scalars=(2.5,))
    with pytest.raises(ValueError, match="does not fit in 8 bytes"):
        cj.kernel_call(SPEC, x, y, out_shapes=out, grid=1, block=256, scalars=(2.5, 1 << 70))
    with pytest.raises(ValueError, match="parameter 3 is 4 bytes, not a pointer"):
        cj.kernel_call(SPEC, x, y, x, out_shapes=out, grid=1, block=256, scalars=(16,))
    with pytest.raises(ValueError, match="grid"):
        cj.kernel_call(SPEC, x, y, out_shapes=out, grid=-1, block=256, scalars=(2.5, 16))


def raw_call(x, y, **overrides):
    """The target called with jax.ffi.ffi_call directly, bypassing kernel_call's checks."""
    k = cj._for_device(SPEC, 0)
    attrs = dict(kernels=np.array([k.handle], np.int64), grid=np.array([1, 1, 1], np.int64),
                 block=np.array([256, 1, 1], np.int64), shared_memory=np.int64(0),
                 scalars=np.frombuffer(np.float32(2.5).tobytes() + np.int64(16).tobytes(), np.uint8).copy(),
                 scalar_sizes=np.array([4, 8], np.int64))
    for name, value in overrides.items():  # None leaves an attribute out
        if value is None:
            del attrs[name]
        else:
            attrs[name] = value
    call = jax.ffi.ffi_call(cj.TARGET, jax.ShapeDtypeStruct(x.shape, x.dtype))
    with jax.default_device(jax.devices("cuda")[0]):
        return jax.jit(lambda x, y: call(x, y, **attrs))(x, y).block_until_ready()


def test_raw_ffi_call_with_wrong_attributes_fails_in_the_handler(handler):
    x, y = exact_inputs(16)
    np.testing.assert_array_equal(np.asarray(raw_call(x, y)), np.asarray(2.5 * x + y))  # the contract as documented
    # The n parameter (long long) given 4 bytes: cuasync's checked launch refuses it, and says which kernel.
    with pytest.raises(XLA_ERROR, match=r"cuasync XLA FFI handler: kernel handle -?\d+ on device 0: .*'scale_add'"):
        raw_call(x, y, scalars=np.zeros(8, np.uint8), scalar_sizes=np.array([4, 4], np.int64))
    with pytest.raises(XLA_ERROR, match="cuasync XLA FFI handler: .*adds up to"):
        raw_call(x, y, scalar_sizes=np.array([4], np.int64))
    with pytest.raises(XLA_ERROR, match="cuasync XLA FFI handler"):  # no kernel for the device it runs on
        raw_call(x, y, kernels=np.zeros(1, np.int64))
    with pytest.raises(XLA_ERROR, match="(?i)attribute"):  # a misnamed attribute: XLA's own decoding refuses it
        raw_call(x, y, kernels=None, kernel=np.array([1], np.int64))


def test_targets_not_registered_for_cuda_fail_naming_the_target(handler):
    x, _ = exact_inputs(4)
    try:  # jax keeps a registration for a platform with no plugin pending, without a word
        jax.ffi.register_ffi_target("cuasync_rocm_only", jax.ffi.pycapsule(handler.cuasync_kernel_call),
                                    platform="ROCM")
    except Exception as e:  # a jax that refuses it outright is loud too
        assert "ROCM" in str(e) or "cuasync_rocm_only" in str(e)
    for name in ("cuasync_rocm_only", "cuasync_never_registered"):
        call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype))
        with pytest.raises(XLA_ERROR, match=name):
            jax.jit(lambda x: call(x))(x).block_until_ready()
    # cuasync's own registration refuses instead of queueing.
    with pytest.raises(cj.RegistrationError, match="'cuasync_rocm_only' not registered for platform 'ROCM'"):
        cj.register(handler, "cuasync_rocm_only", platform="ROCM")
