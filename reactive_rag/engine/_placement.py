"""Which of a run's actors may run on Ray, and how the engine's actors are rebuilt there.

``Engine(placement={"reranker": "ray"})`` puts the reranker's scoring on Ray
workers while each run's stream and state machine stay in the engine's process
(:class:`actors.RayPlacement`). A worker cannot be handed the engine's reranker
as is (an ONNX session does not pickle), so it rebuilds it from plain values:
the credibility table, and the embedder, sent as is if it pickles (the hashing
embedder) or, for MiniLM and multilingual E5, rebuilt from its model files and
behind the same on-disk embedding cache path. A placed reranker uses the engine's
:attr:`~reactive_rag.engine.Engine.embedder` for every run (a run's own collection
embedder applies to local actors only). That cache is shared by every worker that opens
the same file: one per node on local disks (the path must exist on each node),
one for the cluster only on a filesystem whose SQLite locking works (not NFS).
Any other embedder that does not pickle is refused with a clear error; give
such an engine a :class:`~actors.RayPlacement` with a factory of your own.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actors import Actor, RayOptions, RayPlacement
from actors.models import CachedEmbedder, Embedder, MiniLMEmbedder, MultilingualE5Embedder
from actors.rerank import Credibility, Reranker, RerankerActor, rerank_failure
from reactive_rag.index import search_text

__all__ = [
    "PLACEABLE",
    "E5Recipe",
    "EnginePlacements",
    "MiniLMRecipe",
    "PlacementSpec",
    "build_placements",
    "parse_placement",
    "portable_embedder",
    "remote_reranker",
    "reranker_placement",
]

PLACEABLE = ("reranker",)
"""Actors of a run that can be placed on Ray (the expensive, stateless ones)."""

PlacementSpec = Mapping[str, "str | Mapping[str, Any] | RayPlacement"]
"""Actor name -> ``"local"``, ``"ray"``, ``{"on": "ray", <RayOptions>}`` or a placement."""


@dataclass(frozen=True, slots=True)
class MiniLMRecipe:
    """How to rebuild a MiniLM embedder (and its cache) in another process."""

    model_path: str
    tokenizer_path: str
    cache_path: str | None = None

    def build(self) -> Embedder:
        """The embedder, with as many onnxruntime threads as CPUs Ray reserved here.

        Two workers of one CPU each with the default two threads apiece fight over
        two cores (measured: ~620 ms of CPU per run instead of ~350).
        """
        model = MiniLMEmbedder(self.model_path, self.tokenizer_path,
                               intra_op_threads=_reserved_cpus())
        return model if self.cache_path is None else CachedEmbedder(model, self.cache_path)


@dataclass(frozen=True, slots=True)
class E5Recipe:
    """How to rebuild the multilingual E5 embedder (and its cache) in another process."""

    cache_path: str | None = None
    batch_size: int = 16

    def build(self) -> Embedder:
        """The embedder, with as many engine threads as CPUs Ray reserved here."""
        model = MultilingualE5Embedder(num_threads=_reserved_cpus(),
                                       batch_size=self.batch_size)
        return model if self.cache_path is None else CachedEmbedder(model, self.cache_path)


def _reserved_cpus(default: int = 2) -> int:
    """CPUs Ray reserved for the calling worker; ``default`` outside a Ray worker."""
    import ray

    if not ray.is_initialized():
        return default
    context = ray.get_runtime_context()
    if context.worker.mode != ray.WORKER_MODE:  # the driver: no reservation of its own
        return default
    reserved: dict[str, float] = context.get_assigned_resources()  # type: ignore[no-untyped-call]
    cpus = reserved.get("CPU")
    return default if not cpus else max(1, round(cpus))


def portable_embedder(embedder: Embedder) -> Embedder | MiniLMRecipe | E5Recipe:
    """What a Ray worker gets for ``embedder``: itself if it pickles, else its recipe.

    Raises:
        ValueError: it neither pickles nor is MiniLM (with or without the cache).
    """
    inner, cache = embedder, None
    if isinstance(embedder, CachedEmbedder):
        inner, cache = embedder.inner, str(embedder.path)
    if isinstance(inner, MiniLMEmbedder):
        return MiniLMRecipe(str(inner.model_path), str(inner.tokenizer_path), cache)
    if isinstance(inner, MultilingualE5Embedder):
        return E5Recipe(cache, inner.batch_size)
    try:
        pickle.dumps(embedder)
    except Exception as exc:
        raise ValueError(
            f"the engine's embedder {type(embedder).__name__} cannot be sent to a Ray worker "
            f"({type(exc).__name__}: {exc}); pass the engine a RayPlacement whose factory "
            "builds the reranker") from exc
    return embedder


def remote_reranker(embedder: Embedder | MiniLMRecipe | E5Recipe,
                    credibility: Credibility) -> RerankerActor:
    """The engine's default reranker, built inside a Ray worker."""
    model = embedder.build() if isinstance(embedder, MiniLMRecipe | E5Recipe) else embedder
    reranker = Reranker(model, passage_text=lambda c: search_text(c.title, c.text),
                        credibility=credibility)
    return RerankerActor(reranker)


def parse_placement(spec: PlacementSpec | None, *,
                    custom_reranker: bool = False) -> dict[str, RayOptions | RayPlacement]:
    """The actors ``spec`` puts on Ray, with their options (nothing is built or started).

    Raises:
        ValueError: an actor that cannot be placed, an unknown target or option,
            or the reranker placed by name while the engine has a ``reranker=``
            of its own (the worker rebuilds the default one; pass a placement).
    """
    placed: dict[str, RayOptions | RayPlacement] = {}
    for name, target in (spec or {}).items():
        if name not in PLACEABLE:
            raise ValueError(f"placement: {name!r} cannot run on Ray; placeable: "
                             f"{', '.join(PLACEABLE)}")
        if isinstance(target, RayPlacement):
            placed[name] = target
            continue
        options: Mapping[str, Any]
        if isinstance(target, str):
            on, options = target, {}
        elif isinstance(target, Mapping):
            on = str(target.get("on", "ray"))
            options = {k: v for k, v in target.items() if k != "on"}
        else:
            raise ValueError(f"placement.{name}: expected 'local', 'ray' or a table, "
                             f"got {type(target).__name__}")
        if on == "local":
            continue
        if on != "ray":
            raise ValueError(f"placement.{name}: unknown target {on!r} (use 'local' or 'ray')")
        if custom_reranker:
            raise ValueError(f"placement.{name}: a worker rebuilds the engine's default "
                             "reranker, not a `reranker=` of your own; pass "
                             "placement={'reranker': RayPlacement(<your factory>)} instead")
        try:
            placed[name] = RayOptions.from_mapping(options)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"placement.{name}: {exc}") from exc
    return placed


def reranker_placement(options: RayOptions, embedder: Embedder,
                       credibility: Credibility) -> RayPlacement:
    """The engine's default reranker on Ray (started by its first request or ``warm_up``).

    Raises:
        ValueError: ``embedder`` cannot be sent to a worker.
    """
    factory = functools.partial(remote_reranker, portable_embedder(embedder), credibility)
    return RayPlacement(factory, options, like=RerankerActor, on_failure=rerank_failure)


def build_placements(spec: PlacementSpec | None, *, embedder: Callable[[], Embedder],
                     credibility: Credibility) -> dict[str, RayPlacement]:
    """Placements for the actors ``spec`` puts on Ray (none is started yet).

    Raises:
        ValueError: as :func:`parse_placement` and :func:`reranker_placement`.
    """
    return {name: target if isinstance(target, RayPlacement)
            else reranker_placement(target, embedder(), credibility)
            for name, target in parse_placement(spec).items()}


class EnginePlacements:
    """An engine's placements: checked when the engine is built, built at the first run.

    Building waits for the first run because it needs the engine's embedder
    (loading a model); placements given as :class:`~actors.RayPlacement` are
    used as they are and left to their owner to shut down.
    """

    def __init__(self, spec: PlacementSpec | None, *, embedder: Callable[[], Embedder],
                 credibility: Credibility, custom_reranker: bool = False) -> None:
        self._spec = parse_placement(spec, custom_reranker=custom_reranker)
        self._embedder = embedder
        self._credibility = credibility
        self._built: dict[str, RayPlacement] = {}

    def __bool__(self) -> bool:
        return bool(self._spec)

    def get(self, name: str) -> RayPlacement | None:
        """The placement of ``name`` (built on first use), or ``None`` if it runs locally."""
        target = self._spec.get(name)
        if target is None or isinstance(target, RayPlacement):
            return target
        placement = self._built.get(name)
        if placement is None:
            placement = self._built[name] = reranker_placement(
                target, self._embedder(), self._credibility)
        return placement

    def actor(self, name: str) -> Actor | None:
        """A run's stand-in for ``name`` if it is placed on Ray, else ``None``."""
        placement = self.get(name)
        return None if placement is None else placement.actor()

    def start_blocking(self) -> None:
        """Build and start every placement now (blocking; ``Engine.warm_up`` runs it)."""
        for name in self._spec:
            placement = self.get(name)
            assert placement is not None
            placement.start_blocking()

    async def aclose(self) -> None:
        """Shut down the placements built here."""
        built, self._built = self._built, {}
        for placement in built.values():
            await placement.shutdown()
