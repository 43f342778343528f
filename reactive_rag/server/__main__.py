"""``python -m reactive_rag.server``: the same as ``reactive-rag serve``."""

import argparse
import sys

from .._cli_serve import add_serve_commands


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m reactive_rag.server")
    sub = parser.add_subparsers(dest="command")
    add_serve_commands(sub)
    args = parser.parse_args(["serve", *sys.argv[1:]])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
