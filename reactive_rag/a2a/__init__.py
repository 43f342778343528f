"""The agent as an A2A (Agent2Agent) server, with the official ``a2a-sdk``'s types.

``reactive-rag serve`` mounts it when the ``a2a`` extra is installed: the agent
card at ``/.well-known/agent-card.json`` and the JSON-RPC endpoint ``/a2a`` (A2A
1.0 method names, and the 0.3 ones). A task is a stored run of the caller's tenant
(task id = run id), started, scoped, rate-limited, resumed and cancelled by the
same run manager as ``/v1/runs``, and read back from the run store.
"""

from ._card import SKILL_MODES, agent_card
from ._routes import A2A_PATH, AGENT_CARD_PATH, mount_a2a
from ._tasks import OUTCOME_STATES

__all__ = [
    "A2A_PATH",
    "AGENT_CARD_PATH",
    "OUTCOME_STATES",
    "SKILL_MODES",
    "agent_card",
    "mount_a2a",
]
