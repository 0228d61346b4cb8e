#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes the Python package's API reference (Markdown) from its docstrings: every name in `cuasync.__all__`, with
its signature, and the public functions of `cuasync.torch` and `cuasync.jax`, read from the source with `ast` (no
import: no libcuasync.so, GPU, PyTorch or JAX needed). Fails, naming them, when a public name, method or property
has no docstring. CTest `api_reference_python` runs it; `cmake --build build --target docs` writes
build/docs/python-api.md.

Usage: scripts/python-api-reference.py OUTPUT.md [PACKAGE_DIR]   (default: plugins/python/cuasync)
"""
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def public(name):
    return not name.startswith("_")


def signature(node, drop_self=False):
    args = node.args
    if drop_self and args.args and args.args[0].arg in ("self", "cls"):
        args = ast.arguments(posonlyargs=args.posonlyargs, args=args.args[1:], vararg=args.vararg,
                             kwonlyargs=args.kwonlyargs, kw_defaults=args.kw_defaults, kwarg=args.kwarg,
                             defaults=args.defaults)
    text = ast.unparse(args)
    ret = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"({text}){ret}"


class Reference:
    def __init__(self, package):
        self.package = package
        self.modules = {}
        self.missing = []

    def module(self, name):
        if name not in self.modules:
            path = self.package / (name.replace(".", "/") + ".py")
            if not path.exists():
                path = self.package / name / "__init__.py"
            self.modules[name] = (ast.parse(path.read_text(), str(path)), path)
        return self.modules[name]

    def definitions(self, module):
        tree, _ = self.module(module)
        return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}

    def doc(self, node, what):
        d = ast.get_docstring(node)
        if not d:
            self.missing.append(what)
            return "*(no docstring)*"
        return d

    def function(self, node, qual, out, level="###"):
        prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
        out.append(f"{level} `{prefix}{qual}{signature(node)}`\n\n{self.doc(node, qual)}\n")

    def klass(self, node, qual, out):
        init = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        sig = signature(init, drop_self=True) if init is not None and public_init(init) else ""
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        out.append(f"### class `{qual}{sig}`" + (f" ({bases})" if bases else "") + f"\n\n{self.doc(node, qual)}\n")
        for m in node.body:
            if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) or not public(m.name):
                continue
            decorators = {ast.unparse(d) for d in m.decorator_list}
            if "property" in decorators:
                out.append(f"- `{qual}.{m.name}` (property): {item(self.doc(m, qual + '.' + m.name))}\n")
            elif not any(d.endswith(".setter") or d.endswith(".deleter") for d in decorators):
                kind = "static " if "staticmethod" in decorators else "class " if "classmethod" in decorators else ""
                out.append(f"- {kind}`{qual}.{m.name}{signature(m, drop_self=not kind.startswith('static'))}`: "
                           f"{item(self.doc(m, qual + '.' + m.name))}\n")
        out.append("")


def item(doc):
    """A docstring as the body of a Markdown list item (its later lines indented under the item)."""
    return doc.replace("\n", "\n  ")


def public_init(init):
    # A constructor whose parameters are all private (handles the package passes itself) is not for callers.
    names = [a.arg for a in init.args.args[1:] + init.args.kwonlyargs]
    return names and not all(n.startswith("_") for n in names)


def imported_from(tree):
    """name -> module for the package's `from .mod import name` lines."""
    where = {}
    for n in tree.body:
        if isinstance(n, ast.ImportFrom) and n.level == 1:
            for a in n.names:
                where[a.asname or a.name] = n.module or ""
    return where


def all_names(tree):
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
            return list(ast.literal_eval(n.value))
    raise SystemExit("python-api-reference: the package's __init__.py has no __all__")


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    output = pathlib.Path(argv[0])
    package = pathlib.Path(argv[1]) if len(argv) > 1 else ROOT / "plugins/python/cuasync"
    ref = Reference(package)
    init, _ = ref.module("__init__")
    out = ["# cuasync for Python: API reference", "",
           "Generated from the docstrings of `plugins/python/cuasync` by `scripts/python-api-reference.py`.", "",
           ast.get_docstring(init) or "", "", "## `cuasync`", ""]
    where = imported_from(init)
    for name in sorted(all_names(init), key=lambda n: (not n[0].isupper(), n.lower())):
        module = where.get(name)
        if module is None:
            ref.missing.append(f"{name} (in __all__, imported from nowhere)")
            continue
        node = ref.definitions(module).get(name)
        if node is None:  # a constant or a re-export: named only
            out.append(f"### `{name}`\n\nfrom `cuasync.{module}`.\n")
        elif isinstance(node, ast.ClassDef):
            ref.klass(node, name, out)
        else:
            ref.function(node, name, out)
    for extra in ("torch", "jax"):
        tree, _ = ref.module(extra)
        out += [f"## `cuasync.{extra}`", "", ref.doc(tree, f"cuasync.{extra}"), ""]
        for name, node in ref.definitions(extra).items():
            if not public(name):
                continue
            if isinstance(node, ast.ClassDef):
                ref.klass(node, f"{extra}.{name}", out)
            else:
                ref.function(node, f"{extra}.{name}", out)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(out) + "\n")
    if ref.missing:
        print("python-api-reference: public names without a docstring:\n  " + "\n  ".join(ref.missing))
        return 1
    print(f"python-api-reference: wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
