"""Stuffing of some other query's words: spam whatever question a search was for."""

from __future__ import annotations

from reactive_rag.judgement.offline._soft_failures import spam_flags
from streams import Hit

QUESTION = "Which river flows through the capital of the Kingdom of Lirea?"


def test_a_page_stuffed_with_another_querys_phrase_is_spam_for_any_question() -> None:
    phrase = "cheap garden hose deals online"
    text = (f"{phrase} {phrase}: top 10 {phrase} facts. best {phrase} review free guide "
            f"{phrase} latest. Everything about {phrase} in one place. cheap official deals "
            f"{phrase} secrets. Number 7 will surprise you: {phrase} {phrase}. Share these "
            f"{phrase} facts today.")
    hit = Hit(url="https://farm.example/hose", title="Top 10 Garden Hose Deals", content=text)
    verdict = spam_flags(QUESTION, [hit])
    assert [(f.url, f.kind) for f in verdict.flagged] == [(hit.url, "stuffing")]
    assert "cheap garden hose deals" in verdict.flagged[0].reason


def test_an_article_naming_its_subject_again_and_again_is_not_spam() -> None:
    text = ("The Corps of Military Staff Clerks was an administrative corps of the Canadian "
            "Army. The Headquarters Corps of Military Staff Clerks was established in 1905, "
            "when the militia reorganised its offices, and the Corps of Military Staff Clerks "
            "served until 1936, when it was merged with other units into a new service that "
            "kept records, paid soldiers and ran the depots of every district of the country.")
    hit = Hit(url="https://wiki.example/corps", title="Corps of Military Staff Clerks",
              content=text)
    assert spam_flags(QUESTION, [hit]).flagged == ()
