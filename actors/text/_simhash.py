"""64-bit SimHash fingerprints, Hamming distance, a banded near-duplicate index, dedup.

SimHash (Charikar 2002; Manku et al. 2007) maps a text to 64 bits such that
texts sharing most of their features differ in few bits. Features here are
lower-cased word unigrams plus word 2-shingles, hashed with a stable 64-bit hash
(blake2b, memoised per word; shingles are mixed arithmetically), and the bit
sums are computed for all texts at once with numpy.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = [
    "DedupResult",
    "NearDuplicateIndex",
    "dedup_chunks",
    "hamming",
    "simhash64",
]

_T = TypeVar("_T")
_K = TypeVar("_K", bound=Hashable)

U64 = npt.NDArray[np.uint64]

_WORD = re.compile(r"[^\W_]+")
_WORD_HASH: dict[str, int] = {}
_WORD_HASH_MAX = 1_000_000  # bound the memo (a few tens of MB at most)
_BLOCK = 512  # texts per numpy pass: bounds the (features x 64) bit matrix
_MIX = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio multiplier (Fibonacci hashing)
_MASK64 = (1 << 64) - 1


def _word_hash(word: str) -> int:
    h = _WORD_HASH.get(word)
    if h is None:
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        if len(_WORD_HASH) < _WORD_HASH_MAX:
            _WORD_HASH[word] = h
    return h


def _feature_hashes(text: str) -> U64:
    words = _WORD.findall(text.lower())
    uni = np.fromiter((_word_hash(w) for w in words), dtype=np.uint64, count=len(words))
    if len(uni) < 2:
        return uni
    # 2-shingles: h(a) * MIX xor rotl(h(b), 31) — order-sensitive, wraps mod 2**64.
    a, b = uni[:-1], uni[1:]
    rot = (b << np.uint64(31)) | (b >> np.uint64(33))
    bi = (a * _MIX) ^ rot
    return np.concatenate([uni, bi])


def simhash64(texts: Iterable[str]) -> U64:
    """One 64-bit SimHash per text (``uint64`` array; a text without words hashes to 0)."""
    feats = [_feature_hashes(t) for t in texts]
    out = np.zeros(len(feats), dtype=np.uint64)
    for lo in range(0, len(feats), _BLOCK):
        out[lo : lo + _BLOCK] = _fold(feats[lo : lo + _BLOCK])
    return out


def _fold(feats: list[U64]) -> U64:
    # Bit i of every feature hash, summed per text: one unpackbits over the
    # block's features (little-endian bytes -> bit i at column i) and one reduceat.
    out = np.zeros(len(feats), dtype=np.uint64)
    lengths = np.fromiter((len(f) for f in feats), dtype=np.int64, count=len(feats))
    nonempty = lengths > 0
    if not nonempty.any():
        return out
    allf = np.concatenate(feats).astype("<u8", copy=False)
    bits = np.unpackbits(allf.view(np.uint8), bitorder="little").reshape(-1, 64)
    starts = (np.cumsum(lengths) - lengths)[nonempty]
    ones = np.add.reduceat(bits, starts, axis=0, dtype=np.int32)
    set_bits = (2 * ones > lengths[nonempty, None]).astype(np.uint8)
    packed = np.packbits(set_bits, axis=1, bitorder="little")
    out[nonempty] = packed.view("<u8").reshape(-1)
    return out


def hamming(a: int | npt.ArrayLike, b: int | npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Bitwise Hamming distance of 64-bit fingerprints (broadcasts over arrays)."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))
    out: npt.NDArray[np.uint8] = np.bitwise_count(x)
    return out


class NearDuplicateIndex(Generic[_K]):
    """Fingerprints by key, with lookup of those within ``max_distance`` bits.

    Banded (Manku et al.): the 64 bits are cut into ``max_distance + 1`` bands;
    by pigeonhole two fingerprints within ``max_distance`` agree exactly on at
    least one band, so a lookup only compares against keys sharing a band —
    near-constant time instead of a scan of every stored fingerprint.
    """

    def __init__(self, max_distance: int = 3) -> None:
        if not 0 <= max_distance <= 15:
            raise ValueError("max_distance must be in [0, 15]")
        self.max_distance = max_distance
        nb = max_distance + 1
        edges = [round(i * 64 / nb) for i in range(nb + 1)]
        self._bands = [(lo, (1 << (hi - lo)) - 1) for lo, hi in itertools.pairwise(edges)]
        self._tables: list[dict[int, list[_K]]] = [{} for _ in self._bands]
        self._prints: dict[_K, int] = {}

    def __len__(self) -> int:
        return len(self._prints)

    def __contains__(self, key: object) -> bool:
        return key in self._prints

    def add(self, key: _K, fingerprint: int) -> None:
        """Store ``fingerprint`` under ``key`` (a key already present is replaced)."""
        fp = int(fingerprint) & _MASK64
        if key in self._prints:
            self.remove(key)
        self._prints[key] = fp
        for table, (shift, mask) in zip(self._tables, self._bands, strict=True):
            table.setdefault((fp >> shift) & mask, []).append(key)

    def remove(self, key: _K) -> None:
        """Forget ``key`` (no error if absent)."""
        fp = self._prints.pop(key, None)
        if fp is None:
            return
        for table, (shift, mask) in zip(self._tables, self._bands, strict=True):
            bucket = table.get((fp >> shift) & mask)
            if bucket is not None and key in bucket:
                bucket.remove(key)

    def lookup(self, fingerprint: int) -> list[tuple[_K, int]]:
        """Keys within ``max_distance`` of ``fingerprint`` with their distances, nearest first."""
        fp = int(fingerprint) & _MASK64
        seen: set[_K] = set()
        found: list[tuple[_K, int]] = []
        for table, (shift, mask) in zip(self._tables, self._bands, strict=True):
            for key in table.get((fp >> shift) & mask, ()):
                if key in seen:
                    continue
                seen.add(key)
                d = (self._prints[key] ^ fp).bit_count()
                if d <= self.max_distance:
                    found.append((key, d))
        found.sort(key=lambda kd: kd[1])
        return found


@dataclass(frozen=True, slots=True)
class DedupResult(Generic[_T]):
    """What :func:`dedup_chunks` kept, and which inputs each kept item absorbed.

    ``groups[i]`` lists input indices merged into ``kept[i]`` (its own index first).
    """

    kept: list[_T] = field(default_factory=list)
    groups: list[list[int]] = field(default_factory=list)

    @property
    def removed(self) -> int:
        """How many inputs were dropped as near-duplicates."""
        return sum(len(g) - 1 for g in self.groups)


def _default_text(item: object) -> str:
    text = getattr(item, "text", item)
    if not isinstance(text, str):
        raise TypeError(f"cannot take text of {type(item).__name__}; pass text=")
    return text


def dedup_chunks(
    items: Sequence[_T],
    *,
    text: Callable[[_T], str] = _default_text,
    max_distance: int = 6,
    fingerprints: npt.ArrayLike | None = None,
) -> DedupResult[_T]:
    """Drop near-duplicate items (across documents and providers), keeping the first of each.

    Input order decides which copy survives, so pass items best first. Texts
    whose normalised words are identical are merged whatever their length;
    otherwise two items merge when their SimHashes are within ``max_distance``
    bits. Distinct texts are kept.

    Args:
        items: chunks, hits or strings (anything with ``.text``, or pass ``text=``).
        text: how to get an item's text.
        max_distance: Hamming threshold. 6 (not the index's 3) because a few
            changed words in a 1 KB text move its SimHash by 2-6 bits, while
            distinct SciFact abstracts were never closer than 7 bits in 1M
            pairs (``bench/rerank.py`` measures both).
        fingerprints: precomputed ``simhash64`` values, one per item.
    """
    texts = [text(it) for it in items]
    fps = simhash64(texts) if fingerprints is None else np.asarray(fingerprints, np.uint64)
    if len(fps) != len(items):
        raise ValueError("need one fingerprint per item")
    index: NearDuplicateIndex[int] = NearDuplicateIndex(max_distance)
    exact: dict[str, int] = {}
    result: DedupResult[_T] = DedupResult()
    for i, (item, t, fp) in enumerate(zip(items, texts, fps, strict=True)):
        norm = " ".join(_WORD.findall(t.lower()))
        group = exact.get(norm)
        if group is None and norm:
            near = index.lookup(int(fp))
            group = near[0][0] if near else None
        if group is not None:
            result.groups[group].append(i)
            continue
        gid = len(result.kept)
        result.kept.append(item)
        result.groups.append([i])
        exact[norm] = gid
        if norm:
            index.add(gid, int(fp))
    return result
