"""MiniLM's token vectors (actors/models/_minilm.py ``embed_tokens``).

The support head aligns texts word piece by word piece and also needs their
sentence vectors: one call must give both, the sentence vector exactly the one
``embed_passages`` gives, and one unit row per word piece.
"""

from __future__ import annotations

import numpy as np
import pytest

from actors.models import MiniLMEmbedder, TokenEmbedder, TokenVectors


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_sentence_vectors_are_those_of_embed_passages(minilm: MiniLMEmbedder) -> None:
    texts = ["Cats purr.", "The drug increases pain in most adult patients.", "Cats purr."]
    got = minilm.embed_tokens(texts)
    assert isinstance(minilm, TokenEmbedder)
    assert len(got) == 3 and all(isinstance(v, TokenVectors) for v in got)
    np.testing.assert_allclose(np.stack([v.sentence for v in got]),
                               minilm.embed_passages(texts), atol=1e-6)


def test_one_unit_row_per_word_piece_without_special_tokens(minilm: MiniLMEmbedder) -> None:
    cats, long_, empty = minilm.embed_tokens(["Cats purr.", "word " * 400, ""])
    assert cats.tokens.shape == (4, minilm.dim)  # "cats", "pu", "##rr", "."
    np.testing.assert_allclose(np.linalg.norm(cats.tokens, axis=1), 1.0, atol=1e-5)
    assert long_.tokens.shape == (254, minilm.dim)  # truncated at max_length 256, less 2
    assert empty.tokens.shape == (0, minilm.dim)


def test_a_word_in_another_context_gets_another_vector(minilm: MiniLMEmbedder) -> None:
    up, down = minilm.embed_tokens(["Exercise raises blood pressure.",
                                    "Exercise lowers blood pressure."])
    # "blood" reads its sentence: same word, not the same vector
    assert float(up.tokens[2] @ down.tokens[2]) < 0.999
