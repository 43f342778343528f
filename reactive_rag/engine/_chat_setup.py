"""Chat models from config, and the planner and writer factories over one chat client.

One place decides how a chat server's quirks change the policies, and one
schema says what a ``[chat]`` table holds, so ``reactive-rag ask --model-url``,
a server tenant's ``[chat]`` table and ``Engine.from_config`` behave the same
with the same server.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from actors.models import ChatModel, OpenAIChatClient, SchemaToolChat
from reactive_rag.judgement import PlannerPolicy, WriterPolicy
from reactive_rag.judgement.model import ChatPlanner, ChatWriter
from reactive_rag.run import RunConfigError

__all__ = ["CHAT_QUIRKS", "CHAT_ROLES", "ChatConfig", "ChatQuirks", "ChatRole",
           "EntailmentConfig", "chat_client", "chat_policies", "entailment_client"]

_STRICT = ConfigDict(extra="forbid", frozen=True)

ChatQuirks = Literal["none", "llama-cpp-python", "no-tool-template"]
"""``llama-cpp-python``: no streamed tool calls, tool results sent as user messages.
``no-tool-template``: the model's chat template cannot render tools (a llama.cpp server
then drops them), so the planner's tool calls go through a JSON-schema-constrained
reply (:class:`actors.models.SchemaToolChat`)."""
CHAT_QUIRKS: tuple[ChatQuirks, ...] = ("none", "llama-cpp-python", "no-tool-template")

ChatRole = Literal["planner", "writer", "sufficiency", "followups", "handoff"]
"""What the chat model decides: the plan, the answer's claims, whether the evidence
answers the question (with the disagreements in it), follow-up rewriting, and whether a
question goes to a background whole-document summary (``handoff``: opt-in, one more call
per run where background tasks run, not in the default roles)."""
CHAT_ROLES: tuple[ChatRole, ...] = ("planner", "writer", "sufficiency", "followups")


class ChatConfig(BaseModel):
    """A tenant's OpenAI-compatible chat model (the ``[tenants.NAME.chat]`` table).

    Attributes:
        url: server root, e.g. ``http://127.0.0.1:8000/v1`` (http or https, with a host).
        model: model name sent with each request.
        api_key_env: environment variable holding the API key; the server refuses
            to start if it is named and not set. ``None``: no key is sent (local servers).
        timeout_s: cap per model call (the run's remaining time caps it further).
        connect_timeout_s: cap on connecting to the server.
        max_retries: retries of 429/5xx/connection errors before anything streamed.
        quirks: as ``reactive-rag ask --model-quirks``.
        roles: which policies use the model; the others stay offline.
    """

    model_config = _STRICT

    url: str = Field(min_length=1)
    model: str = Field(default="default", min_length=1)
    api_key_env: str | None = Field(default=None, min_length=1)
    timeout_s: float = Field(default=30.0, gt=0)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    quirks: ChatQuirks = "none"
    roles: tuple[ChatRole, ...] = Field(default=CHAT_ROLES, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _no_inline_key(cls, data: Any) -> Any:
        """Config files are shared and versioned; a key in one leaks, so say where it goes."""
        if isinstance(data, Mapping) and "api_key" in data:
            raise ValueError("the key never goes in the file: put it in an environment "
                             "variable and name that variable in api_key_env")
        return data

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        """Refuse at start-up what would only fail at the first run's first model call."""
        value = value.strip()
        try:
            parts = urlsplit(value)
        except ValueError as exc:
            raise ValueError(f"not a valid URL: {exc}") from None
        if parts.username is not None or parts.password is not None:  # not echoed back
            raise ValueError("credentials never go in the url: name an environment "
                             "variable holding the key in api_key_env")
        try:
            _ = parts.port  # raises on a port that is not a number in range
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a valid URL: {exc}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname or \
                any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not an http(s) URL with a host "
                             "(e.g. http://127.0.0.1:8000/v1)")
        return value

    @field_validator("roles")
    @classmethod
    def _unique_roles(cls, value: tuple[ChatRole, ...]) -> tuple[ChatRole, ...]:
        """A role named twice is still one role (and one line in the start-up log)."""
        return tuple(dict.fromkeys(value))


class EntailmentConfig(BaseModel):
    """An OpenAI-compatible chat model that must also judge each claim's quote entails it."""

    model_config = _STRICT

    url: str = Field(min_length=1)
    """Server root, e.g. ``http://127.0.0.1:8000/v1``."""
    model: str = "default"
    api_key_env: str = "REACTIVE_RAG_ENTAILMENT_API_KEY"
    """Environment variable holding the API key (the key never goes in the file)."""
    timeout_s: float = Field(default=20.0, gt=0)


def chat_client(config: ChatConfig, env: Mapping[str, str]) -> OpenAIChatClient:
    """The client a ``[chat]`` table describes (no connection is opened yet).

    Raises:
        RunConfigError: its ``api_key_env`` names a variable that is not set.
    """
    api_key: str | None = None
    if config.api_key_env is not None:
        api_key = env.get(config.api_key_env, "").strip()
        if not api_key:
            raise RunConfigError(f"api key environment variable {config.api_key_env} "
                                 "is not set")
    return OpenAIChatClient(config.url, model=config.model, api_key=api_key,
                            timeout_s=config.timeout_s,
                            connect_timeout_s=config.connect_timeout_s,
                            max_retries=config.max_retries)


def entailment_client(config: EntailmentConfig, env: Mapping[str, str]) -> OpenAIChatClient:
    """The judge's client an ``[entailment]`` table describes (its key is optional)."""
    return OpenAIChatClient(config.url, model=config.model,
                            api_key=env.get(config.api_key_env) or None)


def chat_policies(
    client: ChatModel,
    *,
    quirks: ChatQuirks = "none",
    roles: Collection[ChatRole] = CHAT_ROLES,
    timeout_s: float = 30.0,
) -> tuple[Callable[[], PlannerPolicy] | None, Callable[[], WriterPolicy] | None]:
    """Per-run factories of the chat planner and writer (``None`` for a role not in ``roles``).

    A factory, not an instance: a chat planner keeps one run's conversation.
    ``timeout_s`` caps each model call (the run's remaining time caps it further).
    """
    quirky = quirks == "llama-cpp-python"
    tools_model = SchemaToolChat(client) if quirks == "no-tool-template" else client
    planner: Callable[[], PlannerPolicy] | None = None
    writer: Callable[[], WriterPolicy] | None = None
    if "planner" in roles:
        def planner() -> PlannerPolicy:
            return ChatPlanner(tools_model, timeout_s=timeout_s, stream=not quirky,
                               results_as_user=quirky)
    if "writer" in roles:
        def writer() -> WriterPolicy:
            return ChatWriter(client, timeout_s=timeout_s)
    return planner, writer
