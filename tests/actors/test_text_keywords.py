"""Keyword helpers: tokenising, stopwords, stemmed coverage."""

from __future__ import annotations

import threading

import pytest

from actors.text import STOPWORDS, content_terms, keyword_coverage, stem, tokenize


def test_tokenize_lowercases_and_keeps_inner_apostrophes() -> None:
    got = tokenize("Don\u2019t PANIC: it's 42_km, naïve!")
    assert got == ["don't", "panic", "it's", "42", "km", "naïve"]


def test_content_terms_drop_stopwords_and_stem() -> None:
    assert content_terms("What are the effects of running studies?") == ["effect", "run", "studi"]
    assert "the" in STOPWORDS and "effect" not in STOPWORDS


@pytest.mark.parametrize(
    ("query", "text", "expected"),
    [
        ("effects of aspirin on fever", "Aspirin reduces fevers; its effect is well known.", 1.0),
        ("effects of aspirin on fever", "Aspirin is a drug.", 1 / 3),
        ("effects of aspirin on fever", "Nothing relevant here.", 0.0),
        ("the of and", "the of and", 0.0),  # no content words: nothing to cover
        ("Running studies", "she runs a study", 1.0),
    ],
)
def test_keyword_coverage(query: str, text: str, expected: float) -> None:
    assert keyword_coverage(query, text) == pytest.approx(expected)


def test_stemming_is_safe_from_many_threads() -> None:
    words = [f"running{i % 7}" for i in range(2000)] + ["studies"] * 2000
    want = stem(words)
    results: list[list[str]] = []

    def work() -> None:
        results.append(stem(words))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want] * 4
