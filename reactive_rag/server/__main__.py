"""``python -m reactive_rag.server``: serve the HTTP API (the options of ``reactive-rag serve``)."""

import argparse
import logging
import sys

from reactive_rag.server import BindError, ConfigError, ServerConfig, serve


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m reactive_rag.server")
    parser.add_argument("--host", default=None, help="interface to bind (needs tenants)")
    parser.add_argument("--port", type=int, default=None, help="TCP port (default 8080)")
    parser.add_argument("--config", default=None, help="TOML config file (tenants, store...)")
    parser.add_argument("--store", default=None, help="SQLite path, redis:// or postgresql:// URL")
    parser.add_argument("--owner", default=None,
                        help="this server's name among the store's writers")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        serve(ServerConfig.load(args.config, store=args.store, host=args.host, port=args.port,
                                owner=args.owner))
    except (ConfigError, BindError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
