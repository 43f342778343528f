"""The default corpus: documentation of Python standard-library modules.

Built offline from the running interpreter's docstrings (``inspect``), so it
exists on every fresh machine without network, and deterministically (members
sorted by name; addresses fixed), so the second build reuses every vector.
Docstrings are reST-flavoured text; the indexer cleans their markup like any
other document's.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import warnings
from collections.abc import Iterator, Sequence

from ._documents import Document

__all__ = ["DEFAULT_STDLIB_MODULES", "STDLIB_COLLECTION", "stdlib_documents"]

#: Name of the default demo collection.
STDLIB_COLLECTION = "stdlib"

#: Modules documented by default: the ones people ask about most.
DEFAULT_STDLIB_MODULES: tuple[str, ...] = (
    "abc", "argparse", "asyncio", "base64", "bisect", "collections", "concurrent.futures",
    "configparser", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal",
    "enum", "fractions", "functools", "glob", "gzip", "hashlib", "heapq", "http.client",
    "io", "itertools", "json", "logging", "operator", "os", "pathlib", "pickle", "pprint",
    "queue", "random", "re", "shutil", "socket", "sqlite3", "statistics", "string",
    "struct", "subprocess", "tempfile", "textwrap", "threading", "time", "traceback",
    "types", "typing", "unittest", "urllib.parse", "urllib.request", "uuid", "weakref",
    "zipfile",
)

_MAX_WORDS_PER_MODULE = 6000


def _own_members(module: object, mod_name: str) -> list[tuple[str, object]]:
    public = getattr(module, "__all__", None)
    names = sorted(public) if isinstance(public, (list, tuple)) else sorted(
        n for n in dir(module) if not n.startswith("_")
    )
    out: list[tuple[str, object]] = []
    for n in names:
        obj = getattr(module, n, None)
        if obj is None or inspect.ismodule(obj):
            continue
        owner = getattr(obj, "__module__", None) or ""
        if not (owner == mod_name or owner.startswith(mod_name + ".")
                or owner.lstrip("_") == mod_name):
            continue
        if inspect.isclass(obj) or inspect.isroutine(obj):
            out.append((n, obj))
    # Functions first (the everyday API: asyncio.run, json.dumps...), then classes.
    return sorted(out, key=lambda item: (inspect.isclass(item[1]), item[0]))


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class _Opaque:
    def __repr__(self) -> str:
        return "..."


_OPAQUE = _Opaque()


def _signature(name: str, obj: object) -> str:
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"{name}(...)"
    # Defaults like <object object at 0x7f...> or a list of live handlers differ per
    # process (and per program state): show them as "..." so the text is reproducible.
    params = [
        p.replace(default=_OPAQUE)
        if p.default is not p.empty and "<" in repr(p.default) else p
        for p in sig.parameters.values()
    ]
    return _ADDRESS.sub("", f"{name}{sig.replace(parameters=params)}")


def _doc(obj: object) -> str:
    doc = getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def _public(name: str) -> bool:
    # ``asyncio.__all__`` lists ``_enter_task`` and friends: internals, not documentation.
    return not name.startswith("_")


def _module_documents(mod_name: str, module: object, version: str) -> Iterator[Document]:
    """The module overview, then one document per public function and per public class.

    Titles are qualified names (``functools.lru_cache``, ``datetime.date``), so
    every chunk carries its subject. A document is made of sections, each a
    signature (or a property's name) as a paragraph of its own followed by its
    docstring: a function has one, a class has its own and one per public
    method (``datetime.date.fromisoformat(...)``), so what a sentence is about
    can be read off the section it sits in.
    """
    base = f"https://docs.python.org/{version}/library/{mod_name}.html"
    budget = _MAX_WORDS_PER_MODULE

    def take(section: str) -> bool:
        nonlocal budget
        words = len(section.split())
        if words > budget:  # a bounded build time: the overview and the main API A..
            budget = 0
            return False
        budget -= words
        return True

    def make(doc_id: str, title: str, sections: list[str], kind: str) -> Document:
        url = base if kind == "module" else f"{base}#{doc_id}"
        return Document(id=doc_id, text="\n\n".join(sections), title=title, url=url,
                        doc_type="pydoc", tags=("python", "stdlib"),
                        metadata={"kind": kind, "module": mod_name})

    members = [(n, o) for n, o in _own_members(module, mod_name) if _public(n)]
    # Every module has its overview; without a module docstring, the names it documents.
    head = _doc(module) or ", ".join(f"{mod_name}.{n}" for n, o in members if _doc(o))
    if head and take(head):
        yield make(mod_name, f"{mod_name} (Python {version} standard library)", [head], "module")
    # Every function and every class's own docstring first, then methods while the
    # budget lasts: the module's whole API is listed before any class is detailed.
    sections: dict[str, list[str]] = {}
    for name, obj in members:
        doc = _doc(obj)
        section = f"{mod_name}.{_signature(name, obj)}\n\n{doc}"
        sections[name] = [section] if doc and take(section) else []
    for name, obj in members:
        if not inspect.isclass(obj):
            continue
        for mname, member in sorted(vars(obj).items()):
            if budget <= 0:
                break
            if not _public(mname) or not (inspect.isroutine(member)
                                          or isinstance(member, property)):
                continue
            mdoc = _doc(member)
            if not mdoc:
                continue
            head_line = f"{mod_name}.{name}.{mname}" if isinstance(member, property) else (
                f"{mod_name}.{name}.{_signature(mname, member)}")
            if take(section := f"{head_line}\n\n{mdoc}"):
                sections[name].append(section)
    for name, obj in members:
        if sections[name]:
            qual = f"{mod_name}.{name}"
            yield make(qual, qual, sections[name],
                       "class" if inspect.isclass(obj) else "function")


def stdlib_documents(modules: Sequence[str] = DEFAULT_STDLIB_MODULES) -> Iterator[Document]:
    """Documents of each importable module: its overview (id = the module name) and one
    per public function and class (id and title = the qualified name; a class's
    methods are sections of its document).

    Modules that cannot be imported on this interpreter are skipped.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for mod_name in modules:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(mod_name)
        except Exception:  # an optional module missing on this build
            continue
        yield from _module_documents(mod_name, module, version)
