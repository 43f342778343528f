"""Follow-ups read as standalone questions: references resolved from earlier turns.

Offline and rule-based on the question's grammar only (pronouns, "what about
X?"), never on any topic: "and where was he born?" after "Who directed Ed
Wood?" (answered "Tim Burton directed Ed Wood") becomes "and where was Tim
Burton born?". Who a pronoun stands for comes from the last turn: a personal
pronoun after a "who did ...?" question, or "it" after a "which/what ...?"
one, is the name the answer gave that the question did not; any other
reference is the thing the last question was about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from actors.text import STOPWORDS

from .. import Rewrite, Turn
from ._question import extract_entities, question_entities

__all__ = ["rewrite_followup"]

_PERSONAL = {"he": "", "she": "", "him": "", "his": "'s", "hers": "'s"}
_THING = {"it": "", "its": "'s", "they": "", "them": "", "their": "'s", "theirs": "'s"}
_HER = "her"  # object ("about her") or possessive ("her husband")
_PRONOUN = re.compile(r"\b(he|she|him|his|hers|her|it|its|they|them|their|theirs)\b",
                      re.IGNORECASE)
_ELLIPSIS = re.compile(r"^\s*(?:and\s+)?(?:what|how)\s+about\s+(?P<x>.+?)\s*[?.!]*\s*$",
                       re.IGNORECASE)
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_WHO_DID = re.compile(r"^\s*who\s+(?!(?:is|was|are|were|'s)\b)\w+", re.IGNORECASE)
# "Which one ...?", "which of them ...?": one of the things the last turn was about.
_WHICH_ONE = re.compile(
    r"^\s*(?:and\s+|so\s+)?which\s+(?:one|of\s+(?:them|the\s+two|these|those|the\s+(?:two|three)"
    r"\s+\w+))\b", re.IGNORECASE)
_WHICH = re.compile(r"^\s*(?:which|what)\b(?!\s+(?:is|was|are|were|about)\s+(?:a|an)?\b)",
                    re.IGNORECASE)


def rewrite_followup(question: str, history: Sequence[Turn]) -> Rewrite:
    """``question`` as a standalone query, given the conversation's turns so far."""
    question = " ".join(question.split())
    if not history:
        return Rewrite(question, question)
    last = history[-1]
    ellipsis = _ELLIPSIS.match(question)
    if ellipsis is not None and len(ellipsis.group("x").split()) <= 5:
        standalone = _vary(last.standalone, ellipsis.group("x").strip())
        if standalone is not None:
            return Rewrite(question, standalone, {question: standalone}, (last.run_id,))
    options = _options(last)
    which_one = _WHICH_ONE.match(question)
    if which_one is not None and len(options) >= 2:
        listed = ", ".join(options[:-1]) + " or " + options[-1]
        standalone = f"Which of {listed}{question[which_one.end():]}"
        return Rewrite(question, standalone, {which_one.group(0).strip(): listed},
                       (last.run_id,))
    subject = _subject(history)
    person = (_answer_name(history) if _WHO_DID.match(last.standalone) else None) or subject
    thing = (_answer_name(history) if _WHICH.match(last.standalone) else None) or subject
    resolved: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        word = match.group(0)
        low = word.lower()
        if low == _HER:
            after = question[match.end():].split()
            nxt = after[0].strip("?,.!").lower() if after else ""
            suffix = "'s" if nxt and nxt not in STOPWORDS else ""
            target = person
        elif low in _PERSONAL:
            suffix, target = _PERSONAL[low], person
        else:
            suffix, target = _THING[low], thing
        if target is None or _names(question, target):
            return word
        resolved[low] = target
        return target + suffix

    standalone = _PRONOUN.sub(replace, question)
    if not resolved:
        return Rewrite(question, question, {}, ())
    return Rewrite(question, standalone[:1].upper() + standalone[1:], resolved, (last.run_id,))


def _options(turn: Turn) -> list[str]:
    """The things a turn compared or listed: its question's names, else its answer's."""
    names = question_entities(turn.standalone)
    names = [n for n in names if not any(o != n and o in n for o in names)]  # "A and B": A, B
    if len(names) >= 2:
        return names[:4]
    found = [n for n in extract_entities(turn.answer) if not _YEAR.fullmatch(n)]
    return list(dict.fromkeys(found))[:4] if len(found) >= 2 else []


def _subject(history: Sequence[Turn]) -> str | None:
    """What the conversation is about: the last turn naming something, newest first."""
    for turn in reversed(history):
        names = question_entities(turn.standalone)
        if names:
            return names[0]
        if turn.evidence:  # a question naming nothing: the passage that answered it
            return turn.evidence[0].title or None
    return None


def _answer_name(history: Sequence[Turn]) -> str | None:
    """What the last answer named that no question asked about: after "who directed X?"
    the person, after "which company ...?" the company."""
    turn = history[-1]
    if not turn.answer:
        return None
    asked = " ".join(t.standalone for t in history).lower()
    for name in extract_entities(turn.answer):
        if name.lower() not in asked and not _YEAR.fullmatch(name) and \
                all(w[:1].isupper() for w in name.split()):
            return name
    return None


def _vary(previous: str, other: str) -> str | None:
    """"what about X?": the previous question with its year, or its subject, swapped for X."""
    body = previous.rstrip(" ?.!")
    if _YEAR.fullmatch(other):
        if _YEAR.search(body):
            return _YEAR.sub(other, body, count=1) + "?"
        return f"{body} in {other}?"
    names = question_entities(previous)
    if names and other[:1].isupper():
        return body.replace(names[0], other, 1) + "?"
    return None


def _names(question: str, target: str) -> bool:
    """The follow-up names the target itself (then its pronouns mean something else)."""
    return target.lower() in question.lower()
