# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The package's version: the CMake project's (the root CMakeLists.txt's `project(cuasync VERSION ...)`), kept equal
by hand and checked by tests/test_package.py; pyproject.toml reads it from here."""
__version__ = "1.2.0"
