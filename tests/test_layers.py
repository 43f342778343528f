"""The import graph: the layer rule holds and no module imports itself back.

Static (``ast``, nothing is imported): every ``import``/``from ... import`` in
every module of ``streams``, ``actors`` and ``reactive_rag`` is an edge to the
module it names (``from pkg import name`` is an edge to ``pkg.name`` when that
is a module, else to ``pkg``, i.e. its ``__init__``; relative imports are
resolved). Module-level and function-local imports are edges alike (a
function-local import is still a cycle, only deferred). Imports under
``if TYPE_CHECKING:`` are left out of :data:`GRAPH` (they never run) and counted in
:data:`TYPED_GRAPH`, where no cycle and no upward import is allowed either: a
type-only arrow up is still an arrow in the design. The implicit import of a
module's parent packages is not an edge (it would make every ``__init__`` that
re-exports its submodules a cycle).

(a) The layer rule: ``streams`` imports neither ``actors`` nor
``reactive_rag``; ``actors`` does not import ``reactive_rag``.

(b) No import cycle among modules, inside a package or across, except the
known ones in :data:`KNOWN_CYCLES`, so any new cycle fails the test.

(c) Inside ``reactive_rag``, packages import only their own layer or lower ones
(:data:`RANKS`), and the run machine reaches no judgement implementation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("streams", "actors", "reactive_rag")

LAYERS = {
    "streams": {"actors", "reactive_rag"},
    "actors": {"reactive_rag"},
}
"""Top-level package -> the packages it must not import."""

KNOWN_CYCLES: dict[frozenset[str], str] = {
    # Cycles owned by other work in progress, each as one strongly connected
    # component of the graph (all its modules) -> why it is tolerated, and the
    # issue that removes it; e.g.
    #   frozenset({"actors._actor", "actors._runtime"}): "issue NN: ...",
    # Empty today: issue 15 broke reactive_rag.server._app <-> _sessions and
    # reactive_rag.server <-> reactive_rag.tasks (the task routes moved into
    # the server). actors._actor -> actors._runtime and
    # reactive_rag.conversation -> reactive_rag.engine._engine are imports under
    # `if TYPE_CHECKING:` only, so not edges. Remove an entry once its cycle
    # is broken (test_every_known_cycle_is_still_there insists).
}
"""Import cycles tolerated for now: the set of modules of a cycle -> why, and the issue."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, *, typing_too: bool = False,
             ) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree``, skipping ``if TYPE_CHECKING:`` bodies.

    ``importlib.import_module("literal")`` counts as an ``import literal``.
    """
    for node in ast.iter_child_nodes(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield ast.Import(names=[ast.alias(name=node.args[0].value)])
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not typing_too:
            for child in node.orelse:
                yield from _imports_of(child)
            continue
        yield from _imports_of(node, typing_too=typing_too)


def _imports_of(node: ast.AST, *, typing_too: bool = False,
                ) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _imports(node, typing_too=typing_too)


def _raw_imports(name: str, path: Path, *, typing_too: bool = False) -> set[str]:
    """Every absolute module name ``name`` imports (project or not)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in _imports(tree, typing_too=typing_too):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        if node.level:
            base_parts = package.split(".")
            base_parts = base_parts[:len(base_parts) - (node.level - 1)]
            base = ".".join([*base_parts, *([node.module] if node.module else [])])
        else:
            base = node.module or ""
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            targets.add(sub if sub in MODULES else base)
    return targets


def _edges(name: str, path: Path, *, typing_too: bool = False) -> set[str]:
    """The project modules ``name`` imports."""
    out = set()
    # a non-module attribute: its longest module
    for target in _raw_imports(name, path, typing_too=typing_too):
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)
    return out


GRAPH = {name: _edges(name, path) for name, path in MODULES.items()}
TYPED_GRAPH = {name: _edges(name, path, typing_too=True) for name, path in MODULES.items()}
"""The same graph with the imports under ``if TYPE_CHECKING:`` counted too."""


def _components(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.add(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.append(frozenset(members))
    return found


def _a_cycle(component: frozenset[str]) -> list[str]:
    """One cycle through ``component``, for the failure message."""
    start = min(component)
    path, seen = [start], {start}
    while True:
        nxt = sorted(t for t in GRAPH[path[-1]] if t in component)
        back = [t for t in nxt if t == start]
        if back and len(path) > 1:
            return [*path, start]
        fresh = [t for t in nxt if t not in seen]
        if not fresh:
            i = path.index(nxt[0]) if nxt and nxt[0] in path else 0
            return [*path[i:], path[i]]
        path.append(fresh[0])
        seen.add(fresh[0])


def test_the_walk_sees_the_whole_project() -> None:
    assert {"streams", "actors", "reactive_rag", "reactive_rag.server._app"} <= set(MODULES)
    assert "reactive_rag.server._requests" in GRAPH["reactive_rag.server._app"]


def test_the_layer_rule() -> None:
    broken = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if target.partition(".")[0] in LAYERS.get(name.partition(".")[0], set()))
    assert not broken, "lower layers must not import higher ones:\n" + "\n".join(broken)


def test_the_tasks_package_is_a_domain_package() -> None:
    """Background tasks know nothing of HTTP: the server serves them (``server._tasks``)."""
    web = sorted(f"{name} imports {target}" for name, path in MODULES.items()
                 if name.startswith("reactive_rag.tasks")
                 for target in _raw_imports(name, path)
                 if target.partition(".")[0] == "aiohttp"
                 or target.startswith("reactive_rag.server"))
    assert not web


def test_no_new_import_cycle() -> None:
    components = _components(GRAPH)
    new = [c for c in components if c not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(
        " -> ".join(_a_cycle(c)) + f"\n    (all of: {sorted(c)})" for c in new)


def test_every_known_cycle_is_still_there() -> None:
    """An allow-list entry whose cycle is gone (or changed) must be removed (or updated)."""
    components = set(_components(GRAPH))
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in components]
    assert not stale, f"remove or update these KNOWN_CYCLES entries: {stale}"


def _private_owner(module: str) -> str | None:
    """The package a private module (``pkg._mod``, ``pkg._sub.mod``) belongs to, if any."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def test_no_module_imports_another_packages_private_module() -> None:
    """A package's ``_private`` modules are its own: others go through its ``__init__``.

    So a package can split or rename its modules (as the offline planner was
    split into question reading, policy and evidence choice) without breaking
    a caller elsewhere.
    """
    leaks = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if (owner := _private_owner(target)) is not None
        and name != owner and not name.startswith(owner + "."))
    assert not leaks, "import these names from the package instead:\n" + "\n".join(leaks)


RESUME_HOOKS = frozenset({"restore", "replay", "restore_draft", "prepare", "on_restore"})
"""Crash-resume and policy hook names: declared on a contract, never looked up by name."""


def test_no_hook_is_found_by_getattr() -> None:
    """Actors and policies declare their hooks; nobody finds one with ``getattr``/``hasattr``.

    The actor contract declares ``on_restore``; the planner, writer and loop
    guard protocols declare ``replay``, ``restore``, ``restore_draft`` and
    ``prepare`` (a policy without them is adapted by a typed ``isinstance``).
    """
    found = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.id}(..., {node.args[1].value!r})"
        for package in ("actors", "reactive_rag")
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant) and node.args[1].value in RESUME_HOOKS)
    assert not found, "call the declared hook instead:\n" + "\n".join(found)


RANKS = {
    # reactive_rag's packages, lowest first: a module may import its own package and any
    # package of a lower rank (faces -> engine -> agent -> judgement/run -> index/store)
    "events": 0, "index": 0, "store": 0, "observability": 0, "web": 0, "judgement": 0,
    "run": 1, "judgement.offline": 1, "judgement.model": 1, "web_kb": 1, "tasks": 1,
    "agent": 2, "cassette": 2,
    "engine": 3,
    "conversation": 4, "evaluate": 4,
    "server": 5, "client": 5,
    "mcp": 6, "a2a": 6,
    "cli": 7,
    "": 8, "__main__": 8,  # the top-level package: the public API
}
"""The layers inside ``reactive_rag`` (the picture in DESIGN.md, as data)."""


def _layer(module: str) -> str:
    parts = module.split(".")[1:]
    if parts[:1] == ["judgement"] and parts[1:2] in (["offline"], ["model"]):
        return ".".join(parts[:2])
    return parts[0] if parts else ""


def test_every_package_has_a_layer() -> None:
    packages = {_layer(m) for m in MODULES if m.startswith("reactive_rag")}
    assert packages <= set(RANKS), f"give these packages a rank: {packages - set(RANKS)}"


def test_no_package_imports_a_higher_one_type_checking_imports_too() -> None:
    upward = sorted(
        f"{name} imports {target}"
        for name, targets in TYPED_GRAPH.items() if name.startswith("reactive_rag")
        for target in targets if target.startswith("reactive_rag")
        and RANKS[_layer(target)] > RANKS[_layer(name)])
    assert not upward, "an import goes up a layer:\n" + "\n".join(upward)


def test_no_import_cycle_type_checking_imports_too() -> None:
    cycles = _components(TYPED_GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(
        " -> ".join(str(m) for m in sorted(c)) for c in cycles)


def test_the_machine_imports_no_judgement_implementation() -> None:
    """``run`` sees judgement only through the seam's protocols (``reactive_rag.judgement``)."""
    seen: set[str] = set()
    todo = [m for m in TYPED_GRAPH if m.startswith("reactive_rag.run")]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(TYPED_GRAPH[module])
    implementations = sorted(m for m in seen if m.startswith(
        ("reactive_rag.judgement.offline", "reactive_rag.judgement.model")))
    assert not implementations, f"run/ reaches judgement implementations: {implementations}"
    assert "reactive_rag.judgement._seam" in seen  # and it does use the seam

