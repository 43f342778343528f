"""``bench/dialogue.py`` builds its two-turn dialogues as its docstring says (synthetic rows)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from dialogue import dialogue


def row(question: str, *golds: tuple[str, str]) -> dict[str, Any]:
    contexts = [{"title": t, "paragraph_text": p, "is_supporting": True} for t, p in golds]
    contexts.append({"title": "Noise", "paragraph_text": "Unrelated.", "is_supporting": False})
    return {"question_text": question, "contexts": contexts}


def test_the_named_gold_title_becomes_the_first_turn_and_a_pronoun_in_the_second() -> None:
    d = dialogue(row("Who founded the company that makes the Zorbex 9?",
                     ("Zorbex 9 (device)", "The Zorbex 9 is a phone. It was released in 2001."),
                     ("Qantel", "Qantel makes phones. Qantel was founded by Ann Lee.")))
    assert d is not None
    assert d.first == "Tell me about Zorbex 9."
    assert d.second == "Who founded the company that makes it?"


def test_people_get_he_or_she_in_the_right_case() -> None:
    text = "Ann Lee is a chemist. She founded Qantel and her work is known."
    d = dialogue(row("What prize did Ann Lee win?", ("Ann Lee", text), ("Qantel", "A firm.")))
    assert d is not None and d.second == "What prize did she win?"
    d = dialogue(row("Which company was founded by Ann Lee?", ("Ann Lee", text),
                     ("Qantel", "A firm.")))
    assert d is not None and d.second == "Which company was founded by her?"
    d = dialogue(row("Where is Ann Lee's company?", ("Ann Lee", text), ("Qantel", "A firm.")))
    assert d is not None and d.second == "Where is her company?"


def test_rows_naming_neither_or_both_gold_titles_are_skipped() -> None:
    assert dialogue(row("Who won?", ("Alpha", "A."), ("Beta", "B."))) is None
    assert dialogue(row("Is Alpha older than Beta?", ("Alpha", "A."), ("Beta", "B."))) is None
