"""A store that cannot be opened at start-up is one line for the operator, not a traceback.

``serve`` opens its run store while the app starts; a full disk, a path that cannot be
written or a store that does not answer then surfaces as :class:`StartError`, whose
message says which store and what is wrong, and ``reactive-rag serve`` prints it as
one ``error:`` line and exits non-zero, as it does for a taken port
(:class:`~reactive_rag.server.BindError`). Any other exception is a bug and is raised
as it is.
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Iterator

from reactive_rag.store import StoreError

from ._exceptions import ServerError

__all__ = ["StartError", "opening_store", "start_error"]


class StartError(ServerError):
    """The server could not start: its run store could not be opened (one line)."""


_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_UNWRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_NOT_A_FOLDER = frozenset({errno.EEXIST, errno.ENOTDIR})
_SQLITE_FULL = frozenset({"SQLITE_FULL"})
_SQLITE_UNWRITABLE = frozenset({"SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH"})
_SQLITE_CANTOPEN = frozenset({"SQLITE_CANTOPEN", "SQLITE_NOTADB"})


def start_error(exc: BaseException, store: str) -> StartError | None:
    """The one-line :class:`StartError` for a failure opening the run store ``store``
    (its label), or ``None`` when ``exc`` is not such a failure."""
    where = f"cannot open the run store {store}"
    if isinstance(exc, StoreError):  # the backends' own errors already say what and where
        return StartError(f"{where}: {exc}")
    if isinstance(exc, sqlite3.Error):
        name = exc.sqlite_errorname
        if name in _SQLITE_FULL:
            return StartError(f"{where}: the disk is full; free space and start again")
        if name in _SQLITE_UNWRITABLE:
            return StartError(f"{where}: it is read-only here; make it writable or pick "
                              "another with --store")
        if name in _SQLITE_CANTOPEN:
            return StartError(f"{where}: the file cannot be opened as a database; check "
                              "that its folder exists and is writable, or pick another "
                              "with --store")
        return StartError(f"{where}: {type(exc).__name__}: {exc}")
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        path = f" ({exc.filename})" if exc.filename else ""
        if exc.errno in _FULL:
            return StartError(f"{where}: the disk is full{path}; free space and start again")
        if exc.errno in _UNWRITABLE:
            return StartError(f"{where}: {reason}{path}; make it writable or pick another "
                              "with --store")
        if exc.errno in _NOT_A_FOLDER:
            return StartError(f"{where}: a file stands where its folder should be{path}; "
                              "pick another path with --store")
        return StartError(f"{where}: {reason}{path}")
    return None


@contextlib.contextmanager
def opening_store(store: str) -> Iterator[None]:
    """Run the store's opening, turning its failures into :class:`StartError`."""
    try:
        yield
    except Exception as exc:
        error = start_error(exc, store)
        if error is None:
            raise
        raise error from exc
