import pytest

import cuasync

from .kernels import SOURCE


@pytest.fixture(scope="session")
def module():
    return cuasync.compile(SOURCE, "gpu_tests.cu")
