# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
import pytest

import cuasync

from .kernels import SOURCE


@pytest.fixture(scope="session")
def module():
    # Without contraction into FMAs: results equal PyTorch's and jnp's separately rounded a * x + y.
    return cuasync.compile(SOURCE, "gpu_tests.cu", options=("--fmad=false",))
