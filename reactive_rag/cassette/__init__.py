"""Record a run's outside responses and replay them offline (cassettes).

``reactive-rag ask --record FILE`` stores every search-provider response,
fetched page and chat completion of a run; ``--replay FILE`` runs the same
question again from the file alone (no network, keys or provider config) and
publishes the same events, timestamps aside (see :func:`event_lanes`).
"""

from ._cassette import Cassette
from ._chat import RecordingChatModel, ReplayChatModel, chat_key
from ._exceptions import CassetteError, CassetteFormatError, CassetteMiss
from ._format import (
    CASSETTE_VERSION,
    VOLATILE_PATTERNS,
    CassetteHeader,
    CassetteSetup,
    ChatSetup,
    Interaction,
    InteractionKind,
    ProviderSetup,
    RecordedError,
    WebSetup,
    comparable,
    event_lanes,
)
from ._pages import RecordingFetcher, ReplayFetcher, page_key
from ._search import (
    RecordingProvider,
    ReplayProvider,
    TapedSearcher,
    describe_searcher,
    recording_searcher,
    replay_searcher,
    search_key,
)

__all__ = [
    "CASSETTE_VERSION",
    "VOLATILE_PATTERNS",
    "Cassette",
    "CassetteError",
    "CassetteFormatError",
    "CassetteHeader",
    "CassetteMiss",
    "CassetteSetup",
    "ChatSetup",
    "Interaction",
    "InteractionKind",
    "ProviderSetup",
    "RecordedError",
    "RecordingChatModel",
    "RecordingFetcher",
    "RecordingProvider",
    "ReplayChatModel",
    "ReplayFetcher",
    "ReplayProvider",
    "TapedSearcher",
    "WebSetup",
    "chat_key",
    "comparable",
    "describe_searcher",
    "event_lanes",
    "page_key",
    "recording_searcher",
    "replay_searcher",
    "search_key",
]
