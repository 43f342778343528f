"""The engine: starts runs, hands out their handles and results, resumes stored ones.

:class:`Engine` is built one way from config for every face (:func:`assemble`, behind
:meth:`Engine.from_config`): the library, the CLI, the server's tenants, MCP and Ray
replicas. :class:`EngineConfig` is the one typed config; :func:`load_engine_config`
reads it from TOML, a mapping or the environment.
"""

from ._chat_setup import (
    CHAT_QUIRKS,
    ChatConfig,
    EntailmentConfig,
    chat_client,
    chat_policies,
    entailment_client,
)
from ._config import (
    EngineConfig,
    JudgementConfig,
    Research,
    Taps,
    assemble,
    credibility_from,
    load_engine_config,
    research_from,
)
from ._engine import Citation, Engine, EngineSettings, Mode, RunHandle, RunObserver, RunResult, ask
from ._replicas import (
    EngineReplicas,
    ReplicaRun,
    ReplicasUnavailable,
    StoreFactory,
    TenantEngineFactory,
)
from ._toml import read_toml
from ._usage import (
    CostEstimate,
    ModelPrice,
    PriceTable,
    UsageConfig,
    add_usage,
    fold_usage,
    usage_json,
    usage_line,
    usage_of,
)

__all__ = [
    "CHAT_QUIRKS",
    "ChatConfig",
    "Citation",
    "CostEstimate",
    "Engine",
    "EngineConfig",
    "EngineReplicas",
    "EngineSettings",
    "EntailmentConfig",
    "JudgementConfig",
    "Mode",
    "ModelPrice",
    "PriceTable",
    "ReplicaRun",
    "ReplicasUnavailable",
    "Research",
    "RunHandle",
    "RunObserver",
    "RunResult",
    "StoreFactory",
    "Taps",
    "TenantEngineFactory",
    "UsageConfig",
    "add_usage",
    "ask",
    "assemble",
    "chat_client",
    "chat_policies",
    "credibility_from",
    "entailment_client",
    "fold_usage",
    "load_engine_config",
    "read_toml",
    "research_from",
    "usage_json",
    "usage_line",
    "usage_of",
]
