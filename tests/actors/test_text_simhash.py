"""SimHash: near-duplicates merge, distinct texts stay, the banded index finds what a scan finds."""

from __future__ import annotations

import random

import numpy as np
import pytest

from actors.text import NearDuplicateIndex, dedup_chunks, hamming, simhash64
from streams import EvidenceChunk

BASE = (
    "The mitochondrion is the powerhouse of the cell. It produces most of the chemical energy "
    "needed to power the biochemical reactions of the cell. Chemical energy produced by the "
    "mitochondria is stored in a small molecule called adenosine triphosphate. Mitochondria "
    "contain their own small chromosomes and are thought to have evolved from bacteria that "
    "were engulfed by an ancestral cell. The number of mitochondria in a cell varies widely "
    "by organism, tissue and cell type; red blood cells have none, whereas liver cells can "
    "have more than two thousand of them."
)
OTHER = (
    "The Treaty of Westphalia ended the Thirty Years War in 1648 and established a new "
    "political order in central Europe based on the concept of state sovereignty. Negotiations "
    "took place in the cities of Osnabrück and Münster and involved delegates from most "
    "European powers, who argued for years over precedence, territory and religion."
)


def _perturb(text: str, changes: int, seed: int) -> str:
    rng = random.Random(seed)
    words = text.split()
    for _ in range(changes):
        words[rng.randrange(len(words))] = rng.choice(["alpha", "beta", "gamma", "delta"])
    return " ".join(words)


def test_fingerprints_are_uint64_deterministic_and_vectorised() -> None:
    fps = simhash64([BASE, OTHER, BASE, ""])
    assert fps.dtype == np.uint64 and fps.shape == (4,)
    assert fps[0] == fps[2] and fps[3] == 0
    assert simhash64([]).shape == (0,)
    assert [int(x) for x in simhash64([OTHER, BASE])] == [int(fps[1]), int(fps[0])]


def test_case_and_punctuation_do_not_matter_but_words_do() -> None:
    a, b, c = simhash64([BASE, BASE.upper().replace(",", " ").replace(";", "."), OTHER])
    assert hamming(a, b) == 0
    assert hamming(a, c) > 10


def test_a_few_changed_words_stay_close_distinct_texts_far() -> None:
    base = simhash64([BASE])[0]
    one = hamming(base, simhash64([_perturb(BASE, 1, seed) for seed in range(20)]))
    two = hamming(base, simhash64([_perturb(BASE, 2, seed) for seed in range(20)]))
    assert np.all(one <= 6)  # BASE is ~100 words: one change moves a few bits
    assert np.mean(two <= 6) >= 0.8 and np.median(two) <= 4
    assert hamming(base, simhash64([OTHER])[0]) > 10


def test_hamming_broadcasts() -> None:
    assert hamming(0, 0xFF) == 8
    assert hamming(np.uint64(2**64 - 1), 0) == 64
    np.testing.assert_array_equal(hamming([1, 3], [0, 0]), [1, 2])


def test_index_finds_exactly_what_a_linear_scan_finds() -> None:
    rng = np.random.default_rng(0)
    stored = rng.integers(0, 2**63, size=3000, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    index: NearDuplicateIndex[int] = NearDuplicateIndex(max_distance=3)
    for i, fp in enumerate(stored):
        index.add(i, int(fp))
    assert len(index) == 3000 and 5 in index
    for probe_i in range(0, 3000, 97):
        fp = int(stored[probe_i])
        for bit in rng.choice(64, size=int(rng.integers(0, 5)), replace=False):
            fp ^= 1 << int(bit)
        expected = sorted(
            (i, int(d)) for i, d in enumerate(hamming(stored, fp)) if d <= 3
        )
        assert sorted(index.lookup(fp)) == expected


def test_index_replace_and_remove() -> None:
    index: NearDuplicateIndex[str] = NearDuplicateIndex()
    index.add("a", 0b1111)
    assert index.lookup(0b0111) == [("a", 1)]
    index.add("a", 1 << 40)  # replaces the old fingerprint
    assert index.lookup(0b1111) == []
    index.remove("a")
    index.remove("missing")
    assert index.lookup(1 << 40) == [] and len(index) == 0
    with pytest.raises(ValueError):
        NearDuplicateIndex(max_distance=16)


def test_dedup_merges_near_duplicates_across_providers_and_keeps_distinct() -> None:
    chunks = [
        EvidenceChunk(id="web-1", text=BASE, url="https://a.example/x", source="web"),
        EvidenceChunk(id="other", text=OTHER, url="https://b.example/y", source="web"),
        EvidenceChunk(id="corpus-7", text=_perturb(BASE, 2, 1), doc_id="d7", source="corpus"),
        EvidenceChunk(id="web-2", text=BASE.replace("cell.", "cell!"), source="search2"),
        EvidenceChunk(id="tiny-1", text="Yes.", source="web"),
        EvidenceChunk(id="tiny-2", text="yes", source="corpus"),
        EvidenceChunk(id="tiny-3", text="No.", source="web"),
    ]
    result = dedup_chunks(chunks)
    assert [c.id for c in result.kept] == ["web-1", "other", "tiny-1", "tiny-3"]
    assert result.groups == [[0, 2, 3], [1], [4, 5], [6]]
    assert result.removed == 3


def test_dedup_keeps_overlapping_but_different_passages() -> None:
    half = len(BASE) // 2
    texts = [BASE[:half] + " " + OTHER[:200], BASE[half:] + " " + OTHER[200:]]
    assert len(dedup_chunks(texts, text=str).kept) == 2


def test_dedup_with_precomputed_fingerprints_and_custom_text() -> None:
    items = [("a", BASE), ("b", BASE), ("c", OTHER)]
    fps = simhash64([t for _, t in items])
    result = dedup_chunks(items, text=lambda it: it[1], fingerprints=fps)
    assert [k for k, _ in result.kept] == ["a", "c"]
    with pytest.raises(ValueError):
        dedup_chunks(items, text=lambda it: it[1], fingerprints=fps[:2])
    with pytest.raises(TypeError):
        dedup_chunks([1, 2])
