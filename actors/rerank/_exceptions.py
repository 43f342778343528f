"""Errors of the reranker.

Hierarchy::

    RerankError (RuntimeError)
    └── CrossEncoderError           a plugged-in cross-encoder failed or answered garbage

Embedder failures keep their own types (``actors.models.ModelError`` and
subclasses); the actor turns any of them into ``rerank.failed``.
"""

from __future__ import annotations

__all__ = ["CrossEncoderError", "RerankError"]


class RerankError(RuntimeError):
    """Root of every error raised by ``actors.rerank``."""

    retryable: bool = False


class CrossEncoderError(RerankError):
    """A cross-encoder raised or returned scores of the wrong shape or value."""
