"""A SCRIPTED OpenAI-compatible chat server on loopback that plays a follow-up rewriter.

No model runs here: the figures it yields are synthetic. ``bench/dialogue.py``
builds each pronoun dialogue from a HotpotQA row (turn 1 asks about the
bridge entity, turn 2 is the row's question with the entity replaced by a
pronoun) and hands this server its script: for each follow-up, the entity the
pronoun stands for and the row's own question (the standalone reading). It
answers ``POST /v1/chat/completions`` as the contract of issue 25 fixes it:

- ``response_format.json_schema.name == "followup_rewrite"``: it reads the
  ``Follow-up: <q>`` line and the ``Turn k question/answer`` lines it is shown.
  When the script knows the follow-up and a shown turn names the entity, it
  replies ``{"standalone": <the row's question>, "references": [{"reference":
  <pronoun>, "meaning": <entity>}]}``; otherwise (the entity is not in the
  turns shown, an unknown follow-up) it returns the follow-up unchanged with no
  references, as an honest model that cannot tell would.
- ``"history_summary"``: the shown turns' questions, joined.
- anything else: HTTP 400.

So what the bench measures with it is the path a real model's reading takes
(the request the rewriter builds, the turns it shows, the reply parsed, the
rewrite used by the conversation and its run), not any model's skill. A
``fault`` (``"malformed"``: a reply of another shape; ``"error"``: HTTP 500)
exercises the fallback to the offline rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

__all__ = ["ScriptedLine", "ScriptedRewriter"]

_TURN = re.compile(r"^Turn \d+ (question|answer): (.*)$")


@dataclass(frozen=True, slots=True)
class ScriptedLine:
    """What the scripted model knows about one follow-up."""

    pronoun: str
    meaning: str
    standalone: str


class ScriptedRewriter:
    """The server; ``base_url`` ends in ``/v1``. Counts what it was asked (``calls``)."""

    def __init__(self, script: Mapping[str, ScriptedLine],
                 fault: Literal["none", "malformed", "error"] = "none") -> None:
        self.script = {" ".join(k.split()): v for k, v in script.items()}
        self.fault = fault
        self.calls: dict[str, int] = {"followup_rewrite": 0, "history_summary": 0}
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        self._port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    async def start(self) -> None:
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = int(self._runner.addresses[0][1])

    async def close(self) -> None:
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        fmt = body.get("response_format") or {}
        name = (fmt.get("json_schema") or {}).get("name", "")
        if name not in self.calls:
            return web.json_response({"error": {"message": f"unscripted role {name!r}"}},
                                     status=400)
        self.calls[name] += 1
        if self.fault == "error":
            return web.json_response({"error": {"message": "scripted outage"}}, status=500)
        user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        lines = str(user).splitlines()
        shown = [(m.group(1), m.group(2)) for line in lines if (m := _TURN.match(line))]
        reply: dict[str, Any]
        if self.fault == "malformed":
            reply = {"rewritten": "?"}
        elif name == "history_summary":
            reply = {"summary": " ".join(t for k, t in shown if k == "question") or "(none)"}
        else:
            reply = self._rewrite(lines[0].removeprefix("Follow-up: ") if lines else "", shown)
        return web.json_response({
            "id": "scripted-1", "object": "chat.completion", "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(reply)}}],
            "usage": {"prompt_tokens": len(str(user)) // 4, "completion_tokens": 20,
                      "total_tokens": len(str(user)) // 4 + 20},
        })

    def _rewrite(self, question: str, shown: list[tuple[str, str]]) -> dict[str, Any]:
        line = self.script.get(" ".join(question.split()))
        told = " ".join(text for _, text in shown).lower()
        if line is None or line.meaning.lower() not in told:
            return {"standalone": question, "references": []}
        return {"standalone": line.standalone,
                "references": [{"reference": line.pronoun, "meaning": line.meaning}]}
