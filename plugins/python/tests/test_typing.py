# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The public API's typing (issue 25): the PEP 561 marker, no private parameter in a public signature, and an
annotation on every parameter and return of the public functions and methods (strings: annotations are postponed)."""
import inspect
import os

import cuasync


def _public_callables():
    """(qualified name, function) for each public function in cuasync.__all__ and each public method (with
    __init__ and public properties' getters) defined by cuasync in the public classes."""
    for name in cuasync.__all__:
        obj = getattr(cuasync, name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(member, (classmethod, staticmethod)):
                    member = member.__func__
                elif isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member) and member.__module__.startswith("cuasync"):
                    yield f"{name}.{attr}", member
        elif inspect.isfunction(obj):
            yield name, obj


def test_py_typed_marker_is_in_the_package():
    assert os.path.isfile(os.path.join(os.path.dirname(cuasync.__file__), "py.typed"))


def test_public_signatures_have_no_private_parameters():
    for qualname, fn in _public_callables():
        private = [p for p in inspect.signature(fn).parameters if p.startswith("_")]
        assert not private, f"{qualname} has private parameters {private}"
    assert list(inspect.signature(cuasync.Stream).parameters) == ["runtime", "priority"]


def test_public_signatures_are_annotated():
    checked = 0
    for qualname, fn in _public_callables():
        annotations = fn.__annotations__
        for i, p in enumerate(inspect.signature(fn).parameters):
            if i == 0 and p in ("self", "cls"):
                continue
            assert p in annotations, f"{qualname}: parameter {p} has no annotation"
        assert "return" in annotations, f"{qualname} has no return annotation"
        checked += 1
    assert checked > 30
