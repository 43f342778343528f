"""Actor placement on Ray: an actor's handler in a Ray actor, its run at home.

A :class:`RayPlacement` starts ``replicas`` Ray actors, each hosting one
instance of an actor built in the worker by a picklable factory
(:class:`actors._ray_host.ActorHost`). A run gets a :class:`RemoteActor` from
:meth:`RayPlacement.actor`: an ordinary :class:`~actors.Actor` with the hosted
actor's name, handled types and limits, whose ``on_receive`` sends the request
event as msgpack bytes to the least-loaded replica and awaits the frames it
streams back (what the handler emits, then its reply) on the run's loop. The
run's stream, mailboxes, deadline and state machine stay in the run's process,
so everything the runtime does around a handler holds unchanged:

* the per-request timeout and the run's deadline wrap the await; when they
  fire, or the run is cancelled, the remote call is cancelled with
  ``ray.cancel`` (the host is an async Ray actor: its handler's task is
  cancelled mid-await, as a local one would be);
* a handler that raises on the worker is answered by the hosted actor's
  ``on_failure`` there, exactly as at home;
* a worker that dies mid-call fails that request with :class:`RemoteActorDied`
  (answered by ``on_failure`` given here, default ``actor.failed``); Ray
  restarts the worker up to ``max_restarts`` times and the next request goes on.

The hosted actor is built in the worker by a factory rather than pickled
from here: models do not pickle, and a restarted worker must rebuild it. One
host serves every run using the placement (per-run Ray actors would cost a
process start per run), so a placed actor keeps no per-run state. What a
remote handler emits (``ctx.emit``) reaches the run's stream while it runs: the
host is a Ray streaming generator that yields the emitted events, then the reply.

Ray is imported lazily: the default install has no Ray, and nothing here is
touched unless a placement is built (``pip install 'reactive-rag[ray]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Self

from streams import ActorFailed, DecodeError, Event, encode_msgpack

from ._actor import Actor, ActorContext, error_info
from ._exceptions import (
    ActorStartError,
    RayNotInstalled,
    RayUnreachable,
    RemoteActorDied,
    RemoteCallFailed,
)
from ._ray_host import ActorFactory, ActorHost, describe_actor
from ._ray_wire import Effect, Emit, Progress, RemoteReply, decode_frame

__all__ = ["RayOptions", "RayPlacement", "RemoteActor", "init_ray", "ray_module"]

FailureHook = Callable[[Event, BaseException], Event | None]


def ray_module() -> Any:
    """Import Ray with its usage statistics off; :class:`RayNotInstalled` if absent."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # read at import and at init
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise RayNotInstalled(
            "remote placement needs Ray; install it with `pip install 'reactive-rag[ray]'`"
        ) from exc


def _check_reachable(address: str, timeout_s: float) -> None:
    """Raise :class:`RayUnreachable` unless something listens at a ``host:port`` address."""
    target = address.removeprefix("ray://")
    host, colon, port = target.rpartition(":")
    if not colon or not port.isdigit() or not host:
        return  # "auto", "local" and the like: Ray resolves them itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnreachable(f"no Ray cluster answers at {address}: "
                             f"{exc.strerror or type(exc).__name__}") from exc


def init_ray(address: str | None = None, *, num_cpus: int | None = None,
             num_gpus: int | None = None, connect_timeout_s: float = 5.0,
             **kwargs: Any) -> None:
    """Connect to a Ray cluster (``address``, else ``$RAY_ADDRESS``), or start a local one.

    A local cluster listens on loopback, with no dashboard and no usage
    statistics; a no-op if Ray is already initialised. Extra keyword arguments
    go to ``ray.init``. A SIGTERM handler the application installed (asyncio's
    ``loop.add_signal_handler``, say) is kept: ``ray.init`` replaces it with
    ``sys.exit``, which would cut the application's graceful shutdown short.

    Raises:
        RayUnreachable: nothing listens at a ``host:port`` address within
            ``connect_timeout_s`` (checked first: ``ray.init`` retries for minutes).
    """
    ray = ray_module()
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    opts: dict[str, Any] = {"include_dashboard": False, "configure_logging": False}
    if address is not None:
        _check_reachable(address, connect_timeout_s)
    if address is None:
        opts["_node_ip_address"] = "127.0.0.1"
        opts["num_cpus"] = num_cpus
        opts["num_gpus"] = num_gpus
    opts.update(kwargs)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        # "local": a new cluster, never one another process left in /tmp/ray/ray_current_cluster
        ray.init(address=address or "local", **opts)
    finally:
        if callable(previous):  # the application's own handler, not SIG_DFL / SIG_IGN
            signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True, slots=True)
class RayOptions:
    """Where and how a remote actor's Ray actors run.

    Attributes:
        replicas: Ray actors hosting the actor; requests go to the least loaded.
        num_cpus / num_gpus / resources: what Ray reserves for each replica
            (scheduling only: Ray does not pin cores; the handler uses what it uses).
        max_restarts: times Ray restarts a dead replica (-1: forever, 0: never).
        max_task_retries: times Ray replays a call whose replica died mid-call
            (0: the call fails, its request is answered with a failure event;
            retries suit idempotent handlers only).
        max_concurrency: calls one replica runs at once, across every run.
        start_timeout_s: how long building and starting the replicas may take.
        live_events: stream what a handler emits to the run while it runs (a
            Ray streaming generator per call); off, the emitted events arrive
            with its reply and a hop costs ~0.5 ms less of the caller's CPU.
    """

    replicas: int = 1
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    resources: Mapping[str, float] = field(default_factory=dict)
    max_restarts: int = 3
    max_task_retries: int = 0
    max_concurrency: int = 64
    start_timeout_s: float = 120.0
    live_events: bool = False

    def __post_init__(self) -> None:
        if self.replicas < 1 or self.max_concurrency < 1:
            raise ValueError("replicas and max_concurrency must be >= 1")
        if self.num_cpus < 0 or self.num_gpus < 0 or self.start_timeout_s <= 0:
            raise ValueError("num_cpus, num_gpus must be >= 0 and start_timeout_s > 0")
        if self.max_restarts < -1 or self.max_task_retries < -1:
            raise ValueError("max_restarts and max_task_retries must be >= -1")
        if not isinstance(self.live_events, bool):
            raise ValueError(f"live_events must be true or false, not {self.live_events!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RayOptions:
        """Options from a config mapping; unknown keys are an error, not ignored."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown Ray placement options {sorted(unknown)}; "
                             f"known: {sorted(known)}")
        return cls(**dict(data))


@dataclass(slots=True)
class _Call:
    """Whether a remote call got its reply (else leaving it cancels it remotely)."""

    answered: bool = False


@dataclass(slots=True)
class _Replica:
    handle: Any
    in_flight: int = 0
    calls: int = 0


class _Answered(Exception):
    """The remote handler raised and its host's ``on_failure`` answered (or chose silence)."""

    def __init__(self, reply: RemoteReply) -> None:
        assert reply.error is not None
        super().__init__(reply.error.message)
        self.reply = reply
        self.retryable = reply.error.retryable


class RayPlacement:
    """One actor's replicas on Ray, shared by every run that uses the placement.

    Args:
        factory: builds the hosted actor in each worker; pickled (cloudpickle),
            so a class, a ``functools.partial`` or a module-level function.
        options: replicas, resources and restart policy.
        like: the actor class (or an instance) whose declared name, handled
            types and limits the run's proxies take before the replicas have
            started; without it, :meth:`actor` needs a started placement.
        on_failure: answers a request that got no remote answer (timeout,
            cancel, dead worker); default: the ``actor.failed`` event. Give the
            domain failure of the actor (e.g. ``rerank.failed``) here, since the
            hosted instance is out of reach when its worker is dead.

    Use ``async with RayPlacement(...) as placement`` (or :meth:`start` /
    :meth:`shutdown`); with ``like``, the first request starts it. Ray is
    initialised on first start (:func:`init_ray`) unless the application did.
    A shut-down placement answers every later request with a failure.
    """

    def __init__(self, factory: ActorFactory, options: RayOptions | None = None, *,
                 like: type[Actor] | Actor | None = None,
                 on_failure: FailureHook | None = None) -> None:
        self._factory = factory
        self.options = options or RayOptions()
        self._like = None if like is None else _describe_like(like)
        self._on_failure = on_failure
        self._replicas: list[_Replica] = []
        self._described: dict[str, Any] | None = None
        self._known: dict[str, Any] | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        self._rr = itertools.count()

    # --- lifecycle ----------------------------------------------------------------------

    def start_blocking(self) -> Self:
        """Create the replicas and wait until each built and started its actor (blocks).

        Safe to call from any thread, more than once (later calls return at once).

        Raises:
            RayNotInstalled: Ray is missing.
            ActorStartError: a replica's factory or ``on_start`` raised, or the
                replicas did not start in ``start_timeout_s``.
        """
        with self._start_lock:
            if self._described is not None:
                return self
            if self._closed:
                raise RuntimeError("the placement was shut down")
            ray = ray_module()
            init_ray()  # (nothing if the application initialised Ray itself)
            o = self.options
            host_cls = ray.remote(ActorHost).options(
                num_cpus=o.num_cpus, num_gpus=o.num_gpus, resources=dict(o.resources) or None,
                max_restarts=o.max_restarts, max_task_retries=o.max_task_retries,
                max_concurrency=o.max_concurrency,
            )
            replicas = [_Replica(host_cls.remote(self._factory)) for _ in range(o.replicas)]
            try:
                described = ray.get([r.handle.start.remote() for r in replicas],
                                    timeout=o.start_timeout_s)
            except ray.exceptions.GetTimeoutError as exc:
                _kill(ray, replicas)
                raise ActorStartError(
                    f"remote actor replicas did not start within {o.start_timeout_s:g}s "
                    "(not enough cluster resources for them?)") from exc
            except ray.exceptions.RayError as exc:
                _kill(ray, replicas)
                raise ActorStartError(f"remote actor failed to start: {exc}") from exc
            self._replicas = replicas
            self._described = self._known = described[0]
            return self

    async def start(self) -> Self:
        """:meth:`start_blocking` in a thread, so the event loop goes on meanwhile."""
        if self._described is None:
            await asyncio.to_thread(self.start_blocking)
        return self

    async def shutdown(self) -> None:
        """Stop the hosted actors (``on_stop``) and end their Ray actors."""
        with self._start_lock:
            replicas, self._replicas = self._replicas, []
            self._described = None
            self._closed = True
        if not replicas:
            return
        ray = ray_module()
        for ref in [r.handle.stop.remote() for r in replicas]:
            try:
                async with asyncio.timeout(5.0):
                    await ref
            except (TimeoutError, ray.exceptions.RayError):
                pass  # a dead or stuck replica is killed below all the same
        _kill(ray, replicas)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # --- use ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The hosted actor's name."""
        return str(self._description()["name"])

    @property
    def started(self) -> bool:
        """Whether the replicas are up (and not shut down)."""
        return self._described is not None

    @property
    def ray_handles(self) -> Sequence[Any]:
        """The replicas' Ray actor handles (for monitors, tests, ``ray.kill``)."""
        return [r.handle for r in self._replicas]

    def actor(self) -> RemoteActor:
        """A proxy actor for one run, with the hosted actor's name, handled types and limits.

        Before :meth:`start`, the limits come from ``like`` and the first
        request starts the replicas (its timeout covers the start).
        """
        return RemoteActor(self, self._description())

    def in_flight(self) -> list[int]:
        """Calls this process has in each replica (the load the dispatcher balances)."""
        return [r.in_flight for r in self._replicas]

    async def cpu_seconds(self) -> list[float]:
        """CPU seconds each replica's process used so far (for monitors and benchmarks)."""
        return list(await asyncio.gather(*(r.handle.cpu_seconds.remote()
                                           for r in self._replicas)))

    async def ping(self, replica: int = 0) -> None:
        """One no-op round trip to a replica (a hop's cost, a liveness check)."""
        await self._replicas[replica].handle.ping.remote()

    def _description(self) -> dict[str, Any]:
        if self._described is not None:
            return self._described
        if self._like is not None:
            return self._like
        if self._known is not None:
            return self._known  # shut down: what it was
        raise RuntimeError("the placement is not started (await placement.start()), "
                           "and no `like=` actor gives its name and limits")

    def _pick(self) -> _Replica:
        """The replica with the fewest calls in flight; ties go round robin."""
        replicas = self._replicas
        if not replicas:
            raise RemoteCallFailed("the placement was shut down")
        start = next(self._rr) % len(replicas)
        best = replicas[start]
        for i in range(1, len(replicas)):
            r = replicas[(start + i) % len(replicas)]
            if r.in_flight < best.in_flight:
                best = r
        return best

    async def call(self, msg: Event, run_id: str, remaining: float | None, *,
                   on_effects: Callable[[Sequence[Effect]], None] | None = None,
                   ) -> RemoteReply:
        """Send one request to a replica and await its reply; cancelling cancels the call.

        The replica streams what the handler emits while it runs: each batch
        goes to ``on_effects`` as it arrives (before the reply, in order); without
        ``on_effects`` they are all in the reply's ``effects``.

        Raises:
            RemoteActorDied: the replica died (or was restarting) mid-call.
            RemoteCallFailed: the call was cancelled remotely or a frame did not decode.
        """
        ray_module()  # without Ray: the install hint, before anything else
        if self._described is None:
            if self._closed:
                raise RemoteCallFailed(f"the placement of {self.name!r} was shut down")
            await self.start()
        replica = self._pick()
        if not self.options.live_events:
            ref = replica.handle.call.remote(encode_msgpack(msg), run_id, remaining)
            with self._remote_call(replica, ref) as call:
                data = await ref
                call.answered = True
            frame = self._decode(data)
            if not isinstance(frame, RemoteReply):
                raise RemoteCallFailed(f"remote actor {self.name!r} sent progress, not a reply")
            return frame
        frames = replica.handle.handle.remote(encode_msgpack(msg), run_id, remaining)
        kept: list[Effect] = []
        with self._remote_call(replica, frames) as call:
            async for ref in frames:
                frame = self._decode(await ref)
                if isinstance(frame, RemoteReply):
                    call.answered = True
                    if on_effects is None:
                        return replace(frame, effects=(*kept, *frame.effects))
                    return frame
                if on_effects is None:
                    kept.extend(frame.effects)
                else:
                    on_effects(frame.effects)
            raise RemoteCallFailed(f"remote actor {self.name!r} ended the call without a reply")

    @contextlib.contextmanager
    def _remote_call(self, replica: _Replica, ref: Any) -> Iterator[_Call]:
        """One call in flight on ``replica``: Ray's failures as ours, and a call left
        unanswered (a timeout, the deadline, the run's cancel, a bad frame) cancelled
        remotely, so the handler stops (a failing cancel never replaces the exit)."""
        ray = ray_module()
        replica.in_flight += 1
        replica.calls += 1
        call = _Call()
        try:
            yield call
        except ray.exceptions.RayActorError as exc:
            raise RemoteActorDied(f"remote actor {self.name!r} died mid-call: "
                                  f"{_first_line(exc)}") from exc
        except ray.exceptions.RayError as exc:
            raise RemoteCallFailed(f"remote call to {self.name!r} failed: "
                                   f"{_first_line(exc)}") from exc
        finally:
            replica.in_flight -= 1
            if not call.answered:
                with contextlib.suppress(Exception):
                    ray.cancel(ref)

    def _decode(self, data: bytes) -> Progress | RemoteReply:
        try:
            return decode_frame(data)
        except (DecodeError, ValueError, TypeError, KeyError, IndexError) as exc:
            raise RemoteCallFailed(f"remote actor {self.name!r} sent a frame that does not "
                                   f"decode: {exc}") from exc

    def failure_for(self, msg: Event, exc: BaseException) -> Event | None:
        """The answer to a request that got no remote answer."""
        if self._on_failure is not None:
            return self._on_failure(msg, exc)
        return ActorFailed(request_type=msg.type, error=error_info(exc))


def _kill(ray: Any, replicas: Sequence[_Replica]) -> None:
    for r in replicas:
        ray.kill(r.handle, no_restart=True)


def _describe_like(like: type[Actor] | Actor) -> dict[str, Any]:
    """An actor class's (or instance's) declared name, types and limits."""
    return describe_actor(like) if isinstance(like, Actor) else describe_actor(
        _Declared(like))


class _Declared(Actor):
    """Reads an actor class's declarations without building it (its __init__ may load models)."""

    def __init__(self, cls: type[Actor]) -> None:
        for attr in ("name", "handles", "concurrency", "mailbox_size", "timeout_s", "finalizes"):
            setattr(self, attr, getattr(cls, attr))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class RemoteActor(Actor):
    """One run's stand-in for a remote actor: the runtime treats it as any actor.

    Emitted events and end claims of the remote handler reach the run while it
    runs (streamed by its host), in the order made, before its reply.
    """

    def __init__(self, placement: RayPlacement, described: Mapping[str, Any]) -> None:
        self.placement = placement
        self.name = str(described["name"])
        self.handles = tuple(described["handles"])
        self.concurrency = int(described["concurrency"])
        self.mailbox_size = int(described["mailbox_size"])
        timeout = described["timeout_s"]
        self.timeout_s = None if timeout is None else float(timeout)
        self.finalizes = bool(described["finalizes"])

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        """Forward the request; apply the handler's effects as they arrive; return its events."""

        def apply(effects: Sequence[Effect]) -> None:
            for effect in effects:
                if isinstance(effect, Emit):
                    ctx.emit(effect.event)
                else:
                    ctx.finish(effect.outcome, reason=effect.reason, answer=effect.answer,
                               claims=effect.claims)

        reply = await self.placement.call(msg, ctx.run_id, ctx.remaining(), on_effects=apply)
        apply(reply.effects)
        if reply.error is not None:
            raise _Answered(reply)
        return None if reply.out is None else list(reply.out)

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        """The worker's answer if its handler raised; else the placement's failure hook."""
        if isinstance(exc, _Answered):
            return exc.reply.failure
        return self.placement.failure_for(msg, exc)

    def describe(self) -> Mapping[str, Any]:
        return {**super().describe(), "placement": "ray",
                "replicas": self.placement.options.replicas}
