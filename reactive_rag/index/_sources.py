"""Walking a real folder: which files become documents, and why the others do not.

Every file under the folder is accounted for: it is loaded, or it lands in
``skipped`` with a typed reason (unsupported type, binary, undecodable, too
large, dangling link, empty, unreadable). Hidden files and folders (a name
starting with ``.``: ``.git``, editor state) are passed over without a word.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._decode import BINARY_SUFFIXES
from ._documents import SUPPORTED_SUFFIXES, Document, load_file
from ._exceptions import DocumentLoadError
from ._skips import SkippedFile

__all__ = ["FolderScan", "load_folder", "scan_folder"]

_PROGRESS_EVERY = 20


@dataclass(slots=True)
class FolderScan:
    """What a walk found: candidate files (path, document id), the skipped, their bytes."""

    files: list[tuple[Path, str]] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    total_bytes: int = 0


def scan_folder(root: str | Path, *,
                suffixes: Sequence[str] = SUPPORTED_SUFFIXES) -> FolderScan:
    """The files under ``root`` a loader could read (sorted), and the ones it cannot.

    Document ids are paths relative to ``root`` (a file given as ``root`` is
    its own name), so re-indexing the same folder recognises unchanged files.
    Symbolic links to files are followed; links to folders are not walked.

    Raises:
        DocumentLoadError: ``root`` does not exist.
    """
    base = Path(root)
    if not base.exists():
        raise DocumentLoadError(f"no such file or folder: {base}")
    scan = FolderScan()
    wanted = {s.lower() for s in suffixes}
    if base.is_file():
        _classify(base, base.name, wanted, scan)
        return scan
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base)
        if any(part.startswith(".") for part in rel.parts):
            continue
        _classify(path, rel.as_posix(), wanted, scan)
    return scan


def _classify(path: Path, doc_id: str, wanted: set[str], scan: FolderScan) -> None:
    if path.is_symlink() and not path.exists():
        scan.skipped.append(SkippedFile(str(path), "dangling_link",
                                        "symbolic link to a missing target"))
        return
    if path.is_dir():
        return
    if not path.is_file():
        scan.skipped.append(SkippedFile(str(path), "unsupported_type", "not a regular file"))
        return
    suffix = path.suffix.lower()
    if suffix in BINARY_SUFFIXES:
        scan.skipped.append(SkippedFile(str(path), "binary", f"binary file type {suffix}"))
        return
    if suffix not in wanted:
        scan.skipped.append(SkippedFile(str(path), "unsupported_type",
                                        f"no loader for {suffix or 'files without a suffix'}"))
        return
    scan.files.append((path, doc_id))
    with contextlib.suppress(OSError):  # loading it will say why
        scan.total_bytes += path.stat().st_size


def load_folder(
    root: str | Path,
    *,
    suffixes: Sequence[str] = SUPPORTED_SUFFIXES,
    skipped: list[SkippedFile] | None = None,
    max_bytes: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> Iterator[Document]:
    """Yield a document per readable file under ``root`` (recursively, in sorted order).

    Args:
        root: A folder, or a single file.
        suffixes: Which file types to read.
        skipped: Receives every file left out, with its reason. When None,
            a file that cannot be loaded (binary, undecodable, too large,
            empty, unreadable) raises instead; unsupported types and dangling
            links are passed over.
        max_bytes: Per-file size cap (None: no cap).
        progress: ``progress(done, total, "load")`` as files are read.

    Raises:
        DocumentLoadError: ``root`` does not exist (or a file fails, see ``skipped``).
    """
    scan = scan_folder(root, suffixes=suffixes)
    if skipped is not None:
        skipped.extend(scan.skipped)
    total = len(scan.files)
    for i, (path, doc_id) in enumerate(scan.files):
        try:
            yield load_file(path, doc_id=doc_id, max_bytes=max_bytes)
        except DocumentLoadError as exc:
            if skipped is None:
                raise
            skipped.append(SkippedFile(str(path), exc.reason, exc.detail))
        if progress is not None and ((i + 1) % _PROGRESS_EVERY == 0 or i + 1 == total):
            progress(i + 1, total, "load")
