"""Does a running server answer exactly as its OpenAPI document says? schemathesis decides.

    failures, report = schemathesis_failures("http://127.0.0.1:8080", token)

Runs the ``schemathesis run`` CLI (the ``dev`` extra installs it) against
``BASE_URL/v1/openapi.json`` with every check, a fixed seed and a bounded number
of examples per operation, and returns how many distinct failures (and errors,
such as a dropped connection) it found with its text report. Used by
``tests/reactive_rag/server/test_openapi_conformance.py``; any bench or script can call
it on a server it started.

Two things schemathesis does not know about, set here and nowhere else:

- a WebSocket handshake succeeds with ``101 Switching Protocols``, outside its
  default "not a server error" and "valid data accepted" statuses (2xx-4xx);
  the config below adds 101 for that one operation (by operationId);
- its HTTP client (requests) would put a connection that answered 101 back in
  its pool, and the next request, written into what is now a WebSocket, fails.
  This file is also the run's hooks module (``SCHEMATHESIS_HOOKS``): each
  request carries a response hook that closes the connection of a 101, so the
  next request opens a fresh one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["schemathesis_failures"]

_CONFIG = """\
# Written by bench/_conformance.py for one schemathesis run.
[[operations]]
include-operation-id = "runWebSocket"
# the handshake's success is 101 Switching Protocols
checks.not_a_server_error.expected-statuses = ["101", "2xx", "3xx", "4xx"]
checks.positive_data_acceptance.expected-statuses = [
    "101", "2xx", "3xx", "401", "403", "404", "409", "429", "5xx",
]
"""


def schemathesis_failures(base_url: str, token: str | None, *, seed: int = 1,
                          max_examples: int = 25) -> tuple[int, str]:
    """Failing checks (unique failures plus errors) of one schemathesis run, and its report.

    Args:
        base_url: the server's root, e.g. ``http://127.0.0.1:8080`` (no trailing path).
        token: a tenant's bearer token, sent with every request (``None``: open mode).
        seed: schemathesis' random seed (the same seed generates the same requests).
        max_examples: test cases per operation and phase.

    Raises:
        FileNotFoundError: schemathesis is not installed.
    """
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        folder = Path(tmp)
        config = folder / "schemathesis.toml"
        config.write_text(_CONFIG)
        report = folder / "report.json"
        command = [
            _cli(), "--config-file", str(config), "run", f"{base_url.rstrip('/')}/v1/openapi.json",
            "--checks", "all", "--seed", str(seed), "--max-examples", str(max_examples),
            "--workers", "1", "--generation-database", "none", "--request-timeout", "30",
            "--no-color", "--report", "json", "--report-json-path", str(report),
        ]
        if token is not None:
            command += ["--header", f"Authorization: Bearer {token}"]
        env = {**os.environ, "SCHEMATHESIS_HOOKS": str(Path(__file__).resolve())}
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        text = done.stdout + (f"\n{done.stderr}" if done.stderr.strip() else "")
        if not report.is_file():  # it could not even start (no schema, bad option...)
            return max(1, done.returncode), text
        summary = json.loads(report.read_text())
    failures = int(summary["test_cases"]["unique_failures"]) + len(summary.get("errors") or [])
    if failures == 0 and done.returncode != 0:
        failures = 1  # something the report does not count (a warning made fatal, a crash)
    return failures, text


def _cli() -> str:
    """The ``schemathesis`` script beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).with_name("schemathesis")
    if beside.is_file():
        return str(beside)
    found = shutil.which("schemathesis")
    if found is None:
        raise FileNotFoundError("schemathesis is not installed: pip install -e '.[dev]'")
    return found


# --- the hooks module of the schemathesis process ------------------------------------------


def _close_upgraded(response: Any, *args: Any, **kwargs: Any) -> Any:
    """requests response hook: a connection that switched protocols is never reused."""
    if response.status_code == 101:
        connection = getattr(response.raw, "connection", None)
        if connection is not None:
            connection.close()
    return response


def _register_hooks() -> None:
    import schemathesis

    @schemathesis.hook
    def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
        # extra keyword arguments reach `requests.Session.request`, hooks included
        hooks = kwargs.setdefault("hooks", {})
        hooks.setdefault("response", []).append(_close_upgraded)


if __name__ == "_schemathesis_hooks":  # loaded by schemathesis from SCHEMATHESIS_HOOKS
    _register_hooks()
