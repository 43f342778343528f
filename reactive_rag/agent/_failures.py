"""A failed model call as typed data a user can read: who, which model, what the server said.

Every host of a model (planner, writer, judges) turns the exception it got into one
:class:`streams.ErrorInfo` here, so a stall reads "planner model 'm' timed out after
30 s" and a 429 carries its status and Retry-After, never a bare exception name.
"""

from __future__ import annotations

from actors import error_info
from actors.models import ChatError
from reactive_rag.judgement import JudgeError
from streams import ErrorInfo

__all__ = ["model_failure"]


def model_failure(exc: BaseException, *, role: str, model: str = "",
                  timeout_s: float | None = None) -> ErrorInfo:
    """``exc`` (or the model error behind it) as an :class:`ErrorInfo` naming ``role``.

    ``timeout_s`` is the cap the call ran under, said when the call timed out.
    """
    info = error_info(exc)
    cause: BaseException | None = exc
    status: int | None = None
    retry_after: float | None = None
    while cause is not None:
        if isinstance(cause, JudgeError):
            status = status if status is not None else cause.status
            retry_after = retry_after if retry_after is not None else cause.retry_after
            timeout_s = cause.timeout_s if cause.timeout_s is not None else timeout_s
            model = model or cause.model
        elif isinstance(cause, ChatError):
            status = status if status is not None else cause.status
            retry_after = retry_after if retry_after is not None else cause.retry_after
            timeout_s = cause.timeout_s if cause.timeout_s is not None else timeout_s
        cause = cause.__cause__
    timed_out = isinstance(exc, TimeoutError) or "Timeout" in info.kind
    return info.model_copy(update={
        "status": status, "retry_after_s": retry_after, "model": model, "role": role,
        "timeout_s": timeout_s if timed_out else None,
    })
