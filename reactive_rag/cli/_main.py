"""The `reactive-rag` command line.

Piped output closes quietly: once the reader of stdout has gone (``reactive-rag runs |
head``), every command stops at its next write with no traceback and exit status
:data:`EXIT_BROKEN_PIPE`, handled here once for every command that prints.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

__all__ = ["EXIT_BROKEN_PIPE", "main"]

EXIT_BROKEN_PIPE = 141
"""The exit status once stdout's reader has gone: 128 + SIGPIPE, what a shell reports for
a command stopped by SIGPIPE (``yes | head``), so ``set -o pipefail`` scripts see it."""


def _parser() -> argparse.ArgumentParser:
    from ._ask import add_ask_commands
    from ._chat import add_chat_commands
    from ._eval import add_eval_commands
    from ._index import add_index_commands
    from ._mcp import add_mcp_commands
    from ._resume import add_resume_commands
    from ._serve import add_serve_commands
    from ._summarize import add_summarize_commands

    parser = argparse.ArgumentParser(
        prog="reactive-rag",
        description="Retrieval-augmented search agents whose whole run is one event stream.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_ask_commands(sub)
    add_chat_commands(sub)
    add_index_commands(sub)
    add_serve_commands(sub)
    add_resume_commands(sub)
    add_mcp_commands(sub)
    add_eval_commands(sub)
    add_summarize_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `reactive-rag` script."""
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    null_before = _is_devnull(sys.stdout)
    try:
        status = func(args)
        sys.stdout.flush()  # a reader gone after the last write shows here, not at exit
    except BrokenPipeError:
        _silence_output()
        return EXIT_BROKEN_PIPE
    except SystemExit as exc:
        # a rich Console meeting a broken pipe points stdout at devnull and exits 1 itself
        if exc.code != 1 or null_before or not _is_devnull(sys.stdout):
            raise
        _silence_output()
        return EXIT_BROKEN_PIPE
    return status


def _is_devnull(stream: TextIO) -> bool:
    """Whether ``stream``'s file descriptor is the null device."""
    try:
        st, null = os.fstat(stream.fileno()), os.stat(os.devnull)
    except (OSError, ValueError):  # not a real file (captured in tests)
        return False
    return (st.st_dev, st.st_ino) == (null.st_dev, null.st_ino)


def _silence_output() -> None:
    """Point stdout and stderr at devnull, so the interpreter's flush at exit raises no
    second ``BrokenPipeError`` (the recipe of the ``signal`` module's note on SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # not a real file (captured in tests)
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
