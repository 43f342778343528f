"""Tenant configuration (TOML + environment) and the provider registry."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from actors.providers import (
    ENTRY_POINT_GROUP,
    BraveProvider,
    ProviderNotConfigured,
    ProviderRegistry,
    ProviderSettings,
    SearchConfig,
    SearxngProvider,
    TenantSearchConfig,
    default_registry,
    load_search_config,
)
from actors.providers import _registry as registry_module
from streams import Hit

TOML = """
[tenants.acme]
max_results = 8
include_date = false
compression = "rag"
order = ["searxng"]
fallback = ["brave"]
hedge_delay_s = 0.5
blacklist = ["*://*.pinterest.com/*", "/example\\\\.(net|org)/"]

[tenants.acme.providers.searxng]
base_url = "http://127.0.0.1:8888"
options = { categories = "general" }

[tenants.acme.providers.brave]
api_key_env = "ACME_BRAVE_KEY"
retries = 1

[tenants.acme.agents.researcher]
max_results = 3

[tenants.acme.agents.greedy]
max_results = 50
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "search.toml"
    path.write_text(text)
    return path


def test_toml_config_per_tenant_and_per_agent(tmp_path: Path) -> None:
    config = load_search_config(write(tmp_path, TOML), env={})
    acme = config.tenant("acme")
    assert acme.primary() == ["searxng"] and acme.fallback == ["brave"]
    assert acme.compression == "rag" and acme.include_date is False
    assert acme.blacklist == ["*://*.pinterest.com/*", "/example\\.(net|org)/"]
    assert acme.provider("searxng").options == {"categories": "general"}
    assert acme.max_results_for(None) == 8
    assert acme.max_results_for("researcher") == 3
    assert acme.max_results_for("greedy") == 8  # an agent may lower, never raise


def test_a_bare_file_configures_the_default_tenant(tmp_path: Path) -> None:
    path = write(tmp_path, '[providers.searxng]\nbase_url = "http://127.0.0.1:9"\n')
    tenant = load_search_config(path, env={}).tenant()
    assert tenant.primary() == ["searxng"]


def test_config_path_from_env_and_searxng_url_shortcut(tmp_path: Path) -> None:
    path = write(tmp_path, "max_results = 4\n")
    config = load_search_config(env={"REACTIVE_RAG_SEARCH_CONFIG": str(path),
                                     "REACTIVE_RAG_SEARXNG_URL": "http://10.0.0.5:8080"})
    tenant = config.tenant()
    assert tenant.max_results == 4
    assert tenant.provider("searxng").base_url == "http://10.0.0.5:8080"


def test_no_config_means_no_provider_and_a_clear_refusal() -> None:
    config = load_search_config(env={})
    with pytest.raises(ProviderNotConfigured, match="tenant 'default'"):
        config.tenant()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("max_results = 0\n", "max_results"),
        ("order = ['nope']\n", "unconfigured providers"),
        ("compression = 'zip'\n", "compression"),
        ("[providers.x]\ntypo_field = 1\n", "typo_field"),
        ("max_results = [\n", "cannot load"),
    ],
)
def test_invalid_config_is_refused_at_load(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(ProviderNotConfigured, match=match):
        load_search_config(write(tmp_path, text), env={})


def test_unconfigured_provider_name_is_refused() -> None:
    tenant = TenantSearchConfig()
    with pytest.raises(ProviderNotConfigured, match="not configured for this tenant"):
        tenant.provider("brave")
    with pytest.raises(ProviderNotConfigured):
        SearchConfig().tenant("ghost")


def test_registry_builds_a_tenant_and_refuses_a_missing_key(tmp_path: Path) -> None:
    acme = load_search_config(write(tmp_path, TOML), env={}).tenant("acme")
    with pytest.raises(ProviderNotConfigured, match="ACME_BRAVE_KEY"):
        default_registry.build(acme, env={})
    built = default_registry.build(acme, env={"ACME_BRAVE_KEY": "k"})
    assert list(built) == ["searxng", "brave"]
    assert isinstance(built["searxng"], SearxngProvider)
    assert isinstance(built["brave"], BraveProvider) and built["brave"].api_key == "k"


def test_builtin_kinds_are_registered() -> None:
    assert {"searxng", "brave", "google_cse", "tavily", "duckduckgo"} <= set(
        ProviderRegistry(group=None).kinds() or default_registry.kinds())


class MyProvider:
    def __init__(self, settings: ProviderSettings, *, name: str | None = None,
                 session: Any = None, env: Any = None) -> None:
        self.name = name or "mine"
        self.settings = settings

    async def search(self, query: str, k: int, deadline: float | None) -> list[Hit]:
        return [Hit(url="https://mine.test/", source=self.name)]


def test_register_in_code_and_refuse_duplicates() -> None:
    reg = ProviderRegistry(group=None)
    reg.register("mine", MyProvider)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("mine", MyProvider)
    reg.register("mine", MyProvider, replace=True)
    made = reg.create("corp", ProviderSettings(kind="mine"))
    assert made.name == "corp"
    with pytest.raises(ProviderNotConfigured, match="unknown provider kind 'ghost'"):
        reg.create("ghost", ProviderSettings())


def test_third_party_provider_through_an_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    here = __name__
    eps = [
        EntryPoint(name="thirdparty", value=f"{here}:MyProvider", group=ENTRY_POINT_GROUP),
        EntryPoint(name="broken", value="no_such_module_xyz:Factory", group=ENTRY_POINT_GROUP),
    ]
    asked: list[str] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        asked.append(group)
        return eps

    monkeypatch.setattr(registry_module, "entry_points", fake_entry_points)
    reg = ProviderRegistry()
    provider = reg.create("tp", ProviderSettings(kind="thirdparty"))
    assert isinstance(provider, MyProvider) and asked == [ENTRY_POINT_GROUP]
    with pytest.raises(ProviderNotConfigured, match="failed to load: ModuleNotFoundError"):
        reg.create("b", ProviderSettings(kind="broken"))
    assert "thirdparty" in reg.kinds()


def test_a_factory_that_crashes_is_reported_as_not_configured() -> None:
    def bad(settings: ProviderSettings, **kw: Any) -> Any:
        raise RuntimeError("needs a GPU")

    reg = ProviderRegistry(group=None)
    reg.register("bad", bad)
    with pytest.raises(ProviderNotConfigured, match="needs a GPU"):
        reg.create("bad", ProviderSettings())


@pytest.mark.parametrize("module", ["actors.providers", "actors.search"])
def test_exported_names_are_sorted_and_importable(module: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    def isort_style(name: str) -> tuple[int, str]:  # constants, classes, then functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(mod.__all__) == sorted(mod.__all__, key=isort_style)
    assert all(hasattr(mod, name) for name in mod.__all__)
    public = {n for n in vars(mod) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(mod.__all__)
