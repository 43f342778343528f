"""Keep every package's ``__all__`` exact (as httpx does): what it names is what it exposes."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import reactive_rag
import streams

PUBLIC_MODULES = ["streams", "streams.operators", "reactive_rag.events"]
_NOT_API = {"TYPE_CHECKING", "Any", "annotations"}  # typing helpers of lazy-import __init__s


def _packages() -> list[str]:
    names = list(PUBLIC_MODULES)
    for top in ("actors", "reactive_rag"):
        names.append(top)
        for info in pkgutil.walk_packages(importlib.import_module(top).__path__, f"{top}."):
            leaf = info.name.rpartition(".")[2]
            if info.ispkg and not leaf.startswith("_") and ".web" not in info.name:
                names.append(info.name)
    return sorted(set(names))


def _exposed(module: types.ModuleType) -> set[str]:
    """Every name a user can reach on ``module`` that is not a submodule or private."""
    return {n for n, v in vars(module).items()
            if not n.startswith("_") and n not in _NOT_API and not isinstance(v, types.ModuleType)}


@pytest.mark.parametrize("name", _packages())
def test_all_is_exactly_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(getattr(module, "__all__", []))
    assert len(exported) == len(set(exported)), f"{name}.__all__ has duplicates"
    for member in exported:
        assert hasattr(module, member), f"{name}.__all__ names missing {member!r}"
    lazy = {n for n in exported if n not in vars(module)}  # served by a module __getattr__
    lazy |= {n for n in exported if isinstance(getattr(module, n), types.ModuleType)}
    assert set(exported) - lazy == _exposed(module), (
        f"{name}: exposed but not in __all__: {sorted(_exposed(module) - set(exported))}; "
        f"in __all__ but not defined: {sorted(set(exported) - lazy - _exposed(module))}")


def test_the_top_level_api_is_small() -> None:
    assert len(reactive_rag.__all__) <= 25, reactive_rag.__all__
    for name in ("Engine", "RunHandle", "RunResult", "Budget", "ask", "serve", "EngineConfig",
                 "Outcome", "Citation", "load_engine_config"):
        assert name in reactive_rag.__all__


def test_every_event_type_is_importable_from_reactive_rag_events() -> None:
    # a user of the application needs no import from streams to watch a run
    from reactive_rag import events

    classes = {cls.__name__ for cls in streams.EVENT_TYPES.values()
               if cls.__module__.startswith("streams.")}
    assert classes, "no built-in event types registered"
    assert classes <= set(events.__all__), sorted(classes - set(events.__all__))
    assert events.EVENT_TYPES is streams.EVENT_TYPES
