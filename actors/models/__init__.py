"""Model adapters behind protocols: embedders (offline MiniLM default, multilingual E5,
hashing fallback, OpenAI-compatible servers) and an on-disk embedding cache.

Nothing here downloads weights at run time; a missing model raises
:class:`ModelNotAvailable` saying what to install.
"""

from ._cache import CachedEmbedder
from ._chat import (
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatResult,
    DeltaCallback,
    OpenAIChatClient,
    RawToolCall,
    Usage,
    chat_url,
    function_tool,
)
from ._chat_exceptions import (
    ChatAuthError,
    ChatBadResponse,
    ChatConnectionError,
    ChatError,
    ChatRateLimited,
    ChatRequestError,
    ChatServerError,
    ChatTimeout,
)
from ._chat_schema_tools import SchemaToolChat, tool_call_schema
from ._e5 import MULTILINGUAL_E5_NAME, MultilingualE5Embedder
from ._embedder import Embedder, FloatMatrix, l2_normalize
from ._exceptions import (
    EmbeddingAuthError,
    EmbeddingConnectionError,
    EmbeddingError,
    EmbeddingRateLimited,
    EmbeddingRequestError,
    EmbeddingResponseError,
    EmbeddingServerError,
    EmbeddingTimeout,
    ModelError,
    ModelNotAvailable,
)
from ._hashing import HashingEmbedder
from ._minilm import DEFAULT_TOKENIZER_PATH, MiniLMEmbedder
from ._openai import OpenAIEmbedder
from ._tokens import TokenEmbedder, TokenVectors

__all__ = [
    "DEFAULT_TOKENIZER_PATH",
    "MULTILINGUAL_E5_NAME",
    "CachedEmbedder",
    "ChatAuthError",
    "ChatBadResponse",
    "ChatConnectionError",
    "ChatError",
    "ChatMessage",
    "ChatModel",
    "ChatRateLimited",
    "ChatRequest",
    "ChatRequestError",
    "ChatResult",
    "ChatServerError",
    "ChatTimeout",
    "DeltaCallback",
    "Embedder",
    "EmbeddingAuthError",
    "EmbeddingConnectionError",
    "EmbeddingError",
    "EmbeddingRateLimited",
    "EmbeddingRequestError",
    "EmbeddingResponseError",
    "EmbeddingServerError",
    "EmbeddingTimeout",
    "FloatMatrix",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "ModelError",
    "ModelNotAvailable",
    "MultilingualE5Embedder",
    "OpenAIChatClient",
    "OpenAIEmbedder",
    "RawToolCall",
    "SchemaToolChat",
    "TokenEmbedder",
    "TokenVectors",
    "Usage",
    "chat_url",
    "function_tool",
    "l2_normalize",
    "tool_call_schema",
]
