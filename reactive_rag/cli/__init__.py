"""The ``reactive-rag`` command: index, ask, chat, serve, runs, replay, resume, mcp, demo.

Each command is a module of its own; the console view and the swimlane timeline
are here too. :func:`serve` is the library's way to run what ``reactive-rag serve`` runs.
"""

from ._main import main
from ._serve import serve

__all__ = ["main", "serve"]
