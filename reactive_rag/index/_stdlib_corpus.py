"""The default corpus: documentation of Python standard-library modules.

Built offline from the running interpreter's docstrings (``inspect``), so it
exists on every fresh machine without network, and deterministically (members
sorted by name; addresses fixed), so the second build reuses every vector.
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


def _module_text(mod_name: str, module: object) -> str:
    parts: list[str] = []
    head = _doc(module)
    if head:
        parts.append(head)
    for name, obj in _own_members(module, mod_name):
        doc = _doc(obj)
        if not doc:
            continue
        kind = "class" if inspect.isclass(obj) else "function"
        parts.append(f"{kind} {mod_name}.{_signature(name, obj)}\n{doc}")
        if inspect.isclass(obj):
            for mname, member in sorted(vars(obj).items()):
                if mname.startswith("_") or not (inspect.isroutine(member)
                                                 or isinstance(member, property)):
                    continue
                mdoc = _doc(member)
                if mdoc:
                    parts.append(f"method {mod_name}.{name}.{mname}\n{mdoc}")
    text = "\n\n".join(p.strip() for p in parts if p.strip())
    words = text.split(" ")
    if len(words) > _MAX_WORDS_PER_MODULE:
        # Keep the beginning (module overview, the main classes A..): a bounded build time.
        cut = " ".join(words[:_MAX_WORDS_PER_MODULE])
        text = cut[: cut.rfind("\n\n")] if "\n\n" in cut else cut
    return text


def stdlib_documents(modules: Sequence[str] = DEFAULT_STDLIB_MODULES) -> Iterator[Document]:
    """One document per importable module, text from its docstrings and its members'.

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
        text = _module_text(mod_name, module)
        if not text:
            continue
        yield Document(
            id=mod_name,
            text=text,
            title=f"{mod_name} (Python {version} standard library)",
            url=f"https://docs.python.org/{version}/library/{mod_name}.html",
            doc_type="pydoc",
            tags=("python", "stdlib"),
        )
