"""Out-of-process SSE subscribers for ``bench/serve.py``.

    python bench/_sse_client.py PORT N RUN_ID [RUN_ID ...]

Opens N subscriptions (subscriber i reads ``RUN_ID[i % len]``) with aiohttp,
prints ``ready`` once every response head has arrived, then reads until every
stream ends. Each received chunk is stamped with ``time.time()`` as soon as it
is read, before any parsing (parsing happens after the streams end, so it does
not delay later reads). The last stdout line is JSON: ``{"events": [[recv, ts],
...], "counts": [...]}``, where ``ts`` is the event's own publish time (same
machine clock).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from aiohttp import ClientSession, ClientTimeout, TCPConnector


async def one(session: ClientSession, url: str, ready: asyncio.Event,
              chunks: list[tuple[float, bytes]]) -> None:
    async with session.get(url) as resp:
        ready.set()
        async for chunk in resp.content.iter_any():
            chunks.append((time.time(), chunk))


def parse(chunks: list[tuple[float, bytes]]) -> list[tuple[float, float]]:
    """(receive time, ts) per event; an event's receive time is that of its last byte."""
    out: list[tuple[float, float]] = []
    buf = b""
    for t, chunk in chunks:
        buf += chunk
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            for line in block.split(b"\n"):
                if line.startswith(b"data: "):
                    event = json.loads(line[6:])
                    if isinstance(event, dict) and "ts" in event:
                        out.append((t, float(event["ts"])))
    return out


async def main(port: int, n: int, run_ids: list[str]) -> None:
    per: list[list[tuple[float, bytes]]] = [[] for _ in range(n)]
    readies = [asyncio.Event() for _ in range(n)]
    async with ClientSession(connector=TCPConnector(limit=0),
                             timeout=ClientTimeout(total=None)) as session:
        tasks = [asyncio.create_task(one(
            session, f"http://127.0.0.1:{port}/v1/runs/{run_ids[i % len(run_ids)]}/events",
            readies[i], per[i])) for i in range(n)]
        for r in readies:
            await r.wait()
        print("ready", flush=True)
        await asyncio.gather(*tasks)
    events = [parse(c) for c in per]
    print(json.dumps({"events": [e for ev in events for e in ev],
                      "counts": [len(ev) for ev in events]}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]))
