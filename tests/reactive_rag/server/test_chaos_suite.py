"""The chaos suite in CI: ``bench/chaos.py --quick`` with real processes on loopback.

kill -9 of a server mid-run with SSE clients resuming, Redis killed mid-run and
restarted, SQLite on a full tmpfs, two replicas on one Redis with one killed, the
CLI beside a live server, crash then resume, schemathesis: every client gets a
terminal, no run is left running, no seq a client saw is reused or lost.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server is not installed (scripts/start-test-services.sh "
                           "installs it; CI does)")
def test_the_quick_chaos_suite_keeps_the_durability_contract() -> None:
    proc = subprocess.run([sys.executable, "bench/chaos.py", "--quick", "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    report = proc.stdout[-6000:]
    assert figures["runs"] > 0, report
    for key in ("stuck_running", "seq_reused", "committed_events_lost",
                "clients_without_terminal", "schemathesis_failures"):
        assert figures[key] == 0, f"{key}={figures[key]}\n{report}"
    assert figures["resumed_runs_finished"] == 1.0, report
    assert sum(figures["breaches"].values()) == 0, report
    scenarios = figures["scenarios"]
    assert scenarios["kill9"]["resumed"] > 0, report  # resumes really happened
    assert scenarios["redis_outage"]["reasons_naming_store_address"] == 0, report
