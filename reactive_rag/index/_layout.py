"""On-disk layout of a collection and the generation switch.

::

    ROOT/NAME/.lock           writers serialise on it (flock)
    ROOT/NAME/CURRENT         "gen-000007": the generation readers open
    ROOT/NAME/gen-000007/     manifest.json, docs.json, texts.bin, offsets.npy,
                              chunk_doc.npy, vectors.npy, bm25/, hnsw.bin (large only)

A writer builds ``gen-N+1`` completely, fsyncs it, then replaces ``CURRENT``
with ``os.replace`` (atomic on POSIX): a reader sees the old or the new
generation, never a mix. Readers in this process hold a lease on the
generation they opened; an old generation is deleted once it is neither
current nor leased. Readers in other processes keep working too, because
every file they use is memory-mapped or read into memory at open (unlinking a
mapped file does not invalidate the mapping).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from ._exceptions import CollectionNotFound, CorpusError, IndexCorrupt

__all__ = [
    "FORMAT_VERSION",
    "acquire_lease",
    "collect_garbage",
    "default_root",
    "fsync_dir",
    "generation_dirs",
    "read_current",
    "release_lease",
    "switch_current",
    "validate_name",
    "writer_lock",
]

#: Version of the generation format written by this code.
FORMAT_VERSION = 1

_GEN_RE = re.compile(r"^gen-(\d{6,})$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_LEASE_LOCK = threading.Lock()
_LEASES: dict[Path, int] = {}


def default_root() -> Path:
    """``$REACTIVE_RAG_HOME/index`` or ``~/.cache/reactive_rag/index``."""
    home = os.environ.get("REACTIVE_RAG_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "reactive_rag"
    return base / "index"


def validate_name(name: str) -> str:
    """A collection name that is safe as one path component.

    Raises:
        ValueError: empty, too long, or with characters outside ``[A-Za-z0-9._-]``.
    """
    if not _NAME_RE.match(name):
        raise ValueError(
            f"invalid collection name {name!r}: use letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit, at most 100 characters)"
        )
    return name


def generation_dirs(coll_dir: Path) -> list[tuple[int, Path]]:
    """Existing ``gen-N`` folders, oldest first."""
    out: list[tuple[int, Path]] = []
    if not coll_dir.is_dir():
        return out
    for p in coll_dir.iterdir():
        m = _GEN_RE.match(p.name)
        if m and p.is_dir():
            out.append((int(m.group(1)), p))
    return sorted(out)


def read_current(coll_dir: Path) -> Path | None:
    """The generation folder ``CURRENT`` points at, or None if the collection is empty.

    Raises:
        CollectionNotFound: the collection folder does not exist.
    """
    if not coll_dir.is_dir():
        raise CollectionNotFound(
            f"collection {coll_dir.name!r} not found under {coll_dir.parent} "
            f"(index it first: reactive-rag index PATH --collection {coll_dir.name})"
        )
    try:
        name = (coll_dir / "CURRENT").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    if not _GEN_RE.match(name):
        raise IndexCorrupt(
            f"{coll_dir / 'CURRENT'} is corrupt (holds {name[:40]!r}); re-index the collection"
        )
    return coll_dir / name


def fsync_dir(path: Path) -> None:
    """Flush a directory entry so a rename or new file survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def switch_current(coll_dir: Path, gen_dir: Path) -> None:
    """Atomically point ``CURRENT`` at ``gen_dir`` (write temp, fsync, ``os.replace``)."""
    tmp = coll_dir / f".CURRENT.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(gen_dir.name + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, coll_dir / "CURRENT")
    fsync_dir(coll_dir)


@contextlib.contextmanager
def writer_lock(coll_dir: Path) -> Iterator[None]:
    """Exclusive writer lock on a collection (across threads and processes)."""
    coll_dir.mkdir(parents=True, exist_ok=True)
    with open(coll_dir / ".lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def acquire_lease(coll_dir: Path) -> Path | None:
    """Read ``CURRENT`` and lease that generation in one step (no deletion in between)."""
    with _LEASE_LOCK:
        gen = read_current(coll_dir)
        if gen is not None:
            _LEASES[gen] = _LEASES.get(gen, 0) + 1
        return gen


def release_lease(gen_dir: Path) -> None:
    """Drop a lease; delete the generation if it is no longer current nor leased."""
    with _LEASE_LOCK:
        left = _LEASES.get(gen_dir, 0) - 1
        if left > 0:
            _LEASES[gen_dir] = left
            return
        _LEASES.pop(gen_dir, None)
    collect_garbage(gen_dir.parent)


def collect_garbage(coll_dir: Path) -> list[Path]:
    """Delete generations older than the current one and not leased; returns what was removed.

    Newer generations are never touched: a writer may be building one.
    """
    doomed: list[Path] = []
    with _LEASE_LOCK:
        try:
            current = read_current(coll_dir)
        except CorpusError:
            return []
        if current is None:
            return []
        current_no = int(_GEN_RE.match(current.name).group(1))  # type: ignore[union-attr]
        for number, gen in generation_dirs(coll_dir):
            # Only older generations: a newer one is being built by a writer.
            if number < current_no and _LEASES.get(gen, 0) == 0:
                trash = coll_dir / f".trash-{gen.name}-{os.getpid()}-{threading.get_ident()}"
                try:
                    os.replace(gen, trash)
                except OSError:
                    continue
                doomed.append(trash)
    for trash in doomed:
        shutil.rmtree(trash, ignore_errors=True)
    return doomed
