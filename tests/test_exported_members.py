"""Keep every package's ``__all__`` honest (as httpx does)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

PACKAGES = ["streams", "streams.operators", "actors", "reactive_rag"]


def _subpackages() -> list[str]:
    names = list(PACKAGES)
    for top in ("actors", "reactive_rag"):
        module = importlib.import_module(top)
        for info in pkgutil.iter_modules(module.__path__):
            if info.ispkg and not info.name.startswith("_"):
                names.append(f"{top}.{info.name}")
    return sorted(set(names))


@pytest.mark.parametrize("name", _subpackages())
def test_every_exported_name_exists(name: str) -> None:
    # (ruff's RUF022 keeps each __all__ sorted isort-style)
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", [])
    assert len(exported) == len(set(exported)), f"{name}.__all__ has duplicates"
    for member in exported:
        assert hasattr(module, member), f"{name}.__all__ names missing {member!r}"


@pytest.mark.parametrize("name", _subpackages())
def test_public_names_are_exported(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(getattr(module, "__all__", []))
    public = {
        n for n, v in vars(module).items()
        if not n.startswith("_") and getattr(v, "__module__", "").startswith(name.split(".")[0])
        and not isinstance(v, type(module))
    }
    assert public <= exported, f"{name} exposes names missing from __all__: {public - exported}"
