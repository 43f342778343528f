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


def test_reactive_rag_re_exports_every_event_type_and_operator() -> None:
    # a user of the application needs no import from streams to watch a run
    import reactive_rag
    import streams
    from streams import operators

    event_classes = {cls.__name__ for cls in streams.EVENT_TYPES.values()
                     if cls.__module__.startswith("streams.")}
    assert event_classes, "no built-in event types registered"
    missing = (event_classes | set(operators.__all__) | {"Event", "Outcome"}) - set(
        reactive_rag.__all__)
    assert not missing, f"reactive_rag does not re-export {sorted(missing)}"
    for name in ("Engine", "RunHandle", "ask", "load_engine_config", "load_search_config"):
        assert name in reactive_rag.__all__
