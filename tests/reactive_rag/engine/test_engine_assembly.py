"""One config, one engine: the library, the CLI, the server, MCP and Ray replicas assemble alike.

Each face is driven the way a user drives it (a TOML file, command-line flags, a server
config) and the engines they build are compared by :meth:`Engine.settings`. Nothing here
opens a connection: clients connect on first use, and no run is started.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactive_rag import Engine, RunConfigError
from reactive_rag.cli._ask import build_engine, live_setup
from reactive_rag.cli._main import _parser
from reactive_rag.engine import EngineSettings
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement.offline import judge_answerability, judge_answerability_fixed
from reactive_rag.server import ServerConfig
from reactive_rag.server._app import _tenant_engine, build_research
from reactive_rag.server._dispatch import replica_tenants

SEARCH = """
max_results = 4
compression = "rag"
[providers.searxng]
base_url = "http://127.0.0.1:9/searxng"
[credibility.domains]
"docs.example" = 3.0
"""
CHAT_URL = "http://127.0.0.1:9/v1"
JUDGE_URL = "http://127.0.0.1:9/judge/v1"


@pytest.fixture
def search_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "search.toml"
    path.write_text(SEARCH)
    monkeypatch.setenv("REACTIVE_RAG_SEARCH_CONFIG", str(path))
    monkeypatch.delenv("REACTIVE_RAG_SEARXNG_URL", raising=False)
    monkeypatch.delenv("REACTIVE_RAG_CHAT_API_KEY", raising=False)
    return path


def _under(table: str) -> str:
    """``SEARCH`` as the body of ``[table]`` (its sub-tables under it)."""
    return "\n".join(line.replace("[", f"[{table}.", 1) if line.startswith("[") else line
                     for line in SEARCH.strip().splitlines())


def _engine_toml(tmp_path: Path) -> Path:
    path = tmp_path / "engine.toml"
    path.write_text(f"""[search]
{_under("search")}

[chat]
url = "{CHAT_URL}"
model = "m1"
quirks = "no-tool-template"

[entailment]
url = "{JUDGE_URL}"
model = "j1"
""")
    return path


def _server_toml(tmp_path: Path) -> Path:
    path = tmp_path / "server.toml"
    path.write_text(f"""[entailment]
url = "{JUDGE_URL}"
model = "j1"

[tenants.acme]
token_sha256 = ["{'0' * 64}"]

[tenants.acme.search]
{_under("tenants.acme.search")}

[tenants.acme.chat]
url = "{CHAT_URL}"
model = "m1"
quirks = "no-tool-template"
""")
    return path


def _cli_args(tmp_path: Path, command: str = "ask") -> argparse.Namespace:
    return _parser().parse_args([
        command, *(["What is it?"] if command == "ask" else []), "--web",
        "--model-url", CHAT_URL, "--model", "m1", "--model-quirks", "no-tool-template",
        "--entailment-url", JUDGE_URL, "--entailment-model", "j1",
        "--root", str(tmp_path / "index")])


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    built: list[Engine] = []
    yield built
    for engine in built:
        engine.index.close()


def _library(tmp_path: Path, engines: list[Engine]) -> EngineSettings:
    engine = Engine.from_config(_engine_toml(tmp_path), index=CorpusIndex(tmp_path / "index"),
                                env={})
    engines.append(engine)
    return engine.settings()


def test_the_library_and_the_cli_build_the_same_engine(
        tmp_path: Path, search_file: Path, engines: list[Engine]) -> None:
    library = _library(tmp_path, engines)
    args = _cli_args(tmp_path)
    cli = build_engine(args, live_setup(args, {}, "What is it?"))
    engines.append(cli)
    assert cli.settings() == library
    assert library.web_providers == ("searxng",) and library.web_compression == "rag"
    assert library.model_planner and library.model_writer and library.entailment
    assert library.credibility.for_domain("docs.example") == 3.0


def test_the_mcp_command_builds_what_ask_builds(
        tmp_path: Path, search_file: Path, engines: list[Engine]) -> None:
    ask = _cli_args(tmp_path)
    mcp = _cli_args(tmp_path, "mcp")
    from_ask = build_engine(ask, live_setup(ask, {}, "q"))
    from_mcp = build_engine(mcp, live_setup(mcp, {}))
    engines.extend([from_ask, from_mcp])
    assert from_mcp.settings() == from_ask.settings()


def test_a_server_tenant_and_a_replica_build_what_the_library_builds(
        tmp_path: Path, search_file: Path, engines: list[Engine]) -> None:
    library = _library(tmp_path, engines)
    config = ServerConfig.load(_server_toml(tmp_path), env={})
    base = Engine(CorpusIndex(tmp_path / "index"))
    engines.append(base)
    tenant = _tenant_engine(base, build_research(config, env={})["acme"])
    assert tenant.settings() == library
    replica = replica_tenants(config)["acme"](index=CorpusIndex(tmp_path / "index"), env={})
    engines.append(replica)
    assert replica.settings() == library


def test_a_judgement_family_switched_off_in_config_is_off_in_the_engine(
        tmp_path: Path, engines: list[Engine]) -> None:
    engine = Engine.from_config({"judgement": {"off": ["spam", "stale"]}},
                                index=CorpusIndex(tmp_path / "index"), env={})
    engines.append(engine)
    assert engine.settings().judgement == ("sufficiency", "conflicts", "points", "followups",
                                           "whole_document")
    with pytest.raises(RunConfigError, match="judgement"):
        Engine.from_config({"judgement": {"off": ["spelling"]}}, env={})


def test_the_fitted_sufficiency_score_can_be_swapped_for_fixed_shares_in_config(
        tmp_path: Path, engines: list[Engine]) -> None:
    fixed = Engine.from_config({"judgement": {"sufficiency_head": False}},
                               index=CorpusIndex(tmp_path / "index"), env={})
    fitted = Engine.from_config({}, index=CorpusIndex(tmp_path / "index2"), env={})
    engines.extend([fixed, fitted])
    assert fixed.judgement.sufficiency is judge_answerability_fixed
    assert fitted.judgement.sufficiency is judge_answerability
    with pytest.raises(RunConfigError, match="sufficiency_head"):
        Engine.from_config({"judgement": {"sufficiency_head": "maybe"}}, env={})
