"""The house rules, checked on the sources (CPU): the package layers import one way, no
function body is too long to hold in one's head, comments carry no history, and the tuning
values live in one table."""

import ast
import dataclasses
import inspect
import pathlib
import re

import gpulinalg
from gpulinalg import tuning

ROOT = pathlib.Path(gpulinalg.__file__).resolve().parent
REPO = ROOT.parent
SOURCES = sorted(ROOT.rglob("*.py"))
# Which layers a module of each layer may import (the package's own modules only).
LAYERS = {"core": {"core", "tuning"},
          "layout": {"core", "tuning", "layout"},
          "gemm": {"core", "tuning", "gemm", "layout"},
          "lu": {"core", "tuning", "gemm", "layout", "lu"},
          "tuning": {"core", "tuning"}}


def _module(path):
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path):
    """The gpulinalg modules `path` imports (at the top or inside functions)."""
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("gpulinalg"):
                found.add(name)
    return found


def _resolve(name, modules):
    """The module a dotted import name refers to (a name imported from a module: that module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def test_no_import_circle():
    modules = {_module(p): p for p in SOURCES}
    graph = {m: {_resolve(n, modules) for n in _imports(p)} - {m, "gpulinalg", ""}
             for m, p in modules.items()}
    # Package __init__ files only re-export: an edge into a package is an edge into its
    # __init__, which is what a circle through it would need.
    seen, stack = set(), []

    def visit(m):
        if m in stack:
            raise AssertionError("import circle: " + " -> ".join(stack[stack.index(m):] + [m]))
        if m in seen:
            return
        stack.append(m)
        for n in graph.get(m, ()):
            visit(n)
        stack.pop()
        seen.add(m)

    for m in sorted(graph):
        visit(m)


def test_layers_import_one_way():
    for path in SOURCES:
        mod = _module(path).split(".")
        if len(mod) < 2 or mod[1] not in LAYERS:
            continue
        for name in _imports(path):
            parts = name.split(".")
            if len(parts) > 1 and parts[1] in ("core", "gemm", "layout", "lu", "testing",
                                                "tuning", "linalg", "blas", "bench"):
                assert parts[1] in LAYERS[mod[1]], f"{_module(path)} imports {name}"


def test_no_function_body_over_100_lines():
    long = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if (body and isinstance(body[0], ast.Expr)
                        and isinstance(getattr(body[0], "value", None), ast.Constant)
                        and isinstance(body[0].value.value, str)):
                    body = body[1:]          # the docstring aside
                if body and body[-1].end_lineno - body[0].lineno + 1 > 100:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not long, long


def test_no_history_in_code_comments():
    pattern = re.compile(r"session|A/B", re.IGNORECASE)
    paths = SOURCES + sorted((REPO / "kernels").glob("*.cu*"))
    hits = [f"{p.relative_to(REPO)}:{i}" for p in paths
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, hits


def test_public_signatures_have_no_underscore_parameters():
    for name in gpulinalg.__all__:
        obj = getattr(gpulinalg, name)
        if callable(obj) and not inspect.isclass(obj):
            params = inspect.signature(obj).parameters
            assert not [p for p in params if p.startswith("_")], (name, list(params))


def test_tuning_tables_are_complete_and_hashable():
    for table in (tuning.SM90, tuning.DEFAULT):
        hash(table)   # a graph cache key holds it
        for field in dataclasses.fields(table):
            assert getattr(table, field.name) is not None, field.name


def test_tuning_override_is_scoped():
    base = tuning.current()
    other = dataclasses.replace(base, row_block_cap=base.row_block_cap + 1)
    with tuning.override(other):
        assert tuning.current() is other
    assert tuning.current() == base
