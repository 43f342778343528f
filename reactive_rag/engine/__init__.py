"""reactive_rag.engine."""

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
    credibility_from,
    load_engine_config,
)
from ._engine import (
    Citation,
    Engine,
    Mode,
    RunHandle,
    RunObserver,
    RunResult,
    ask,
)
from ._replicas import (
    EngineReplicas,
    ReplicaRun,
    ReplicasUnavailable,
    StoreFactory,
    TenantEngineFactory,
)
from ._toml import (
    read_toml,
)

__all__ = [
    "CHAT_QUIRKS",
    "ChatConfig",
    "Citation",
    "Engine",
    "EngineConfig",
    "EngineReplicas",
    "EntailmentConfig",
    "Mode",
    "ReplicaRun",
    "ReplicasUnavailable",
    "RunHandle",
    "RunObserver",
    "RunResult",
    "StoreFactory",
    "TenantEngineFactory",
    "ask",
    "chat_client",
    "chat_policies",
    "credibility_from",
    "entailment_client",
    "load_engine_config",
    "read_toml",
]
