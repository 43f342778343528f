"""The `reactive-rag` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from ._ask import add_ask_commands
    from ._chat import add_chat_commands
    from ._index import add_index_commands
    from ._mcp import add_mcp_commands
    from ._resume import add_resume_commands
    from ._serve import add_serve_commands

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `reactive-rag` script."""
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
