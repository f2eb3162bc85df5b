"""The type stubs (_offhost.pyi) describe the native module as it is: every class, method,
property and function in both, and every public name documented."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import offhost
import offhost._offhost as native
import offhost.pet as pet

STUB = Path(offhost.__file__).with_name("_offhost.pyi")


def stub_names() -> dict[str, set[str] | None]:
    tree = ast.parse(STUB.read_text())
    names: dict[str, set[str] | None] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
    return names


def test_stubs_match_the_native_module() -> None:
    names = stub_names()
    public = {n for n in dir(native) if not n.startswith("_")}
    assert public == set(names)
    for name, members in names.items():
        obj = getattr(native, name)
        if members is None:
            assert callable(obj)
            continue
        for m in members:
            if m in ("__init__",):
                continue
            assert hasattr(obj, m), f"{name}.{m} is in the stubs, not in the module"
        real = {m for m in vars(obj) if not m.startswith("_")}
        assert real <= members, f"{name}: {real - members} missing from the stubs"


def test_public_api_has_docstrings() -> None:
    for mod in (offhost, pet):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
                assert obj.__doc__, f"{mod.__name__}.{name} has no docstring"
    for cls in (native.Session, native.Channel, native.Loan, native.Message, native.Engine, native.Pipeline):
        for m, v in vars(cls).items():
            if not m.startswith("_"):
                assert v.__doc__, f"{cls.__name__}.{m} has no docstring"
    assert (Path(offhost.__file__).parent / "py.typed").exists()
