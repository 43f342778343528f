"""Write or check ``docs/asyncapi.json``, the AsyncAPI document of a run's event stream.

``python -m reactive_rag.server.asyncapi`` writes it from the event models;
``--check`` only says whether the file is current (exit 1 if not), for CI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ._asyncapi import asyncapi_document, asyncapi_json

__all__ = ["DEFAULT_PATH", "asyncapi_document", "asyncapi_json", "main"]

DEFAULT_PATH = Path("docs/asyncapi.json")
REGENERATE = "python -m reactive_rag.server.asyncapi"
"""The command that rewrites the file (what a stale file's message tells)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or ``--check``) the document; 0 when the file is current afterwards."""
    parser = argparse.ArgumentParser(
        prog=REGENERATE, description="Write docs/asyncapi.json from the event models.")
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH,
                        help=f"where the document goes (default: {DEFAULT_PATH})")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if the file is missing or stale")
    args = parser.parse_args(argv)
    text = asyncapi_json()
    path: Path = args.path
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if args.check:
        if current == text:
            print(f"{path} is current")
            return 0
        print(f"{path} is {'missing' if current is None else 'stale'}: run `{REGENERATE}`",
              file=sys.stderr)
        return 1
    if current != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {path}" if current != text else f"{path} is current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
