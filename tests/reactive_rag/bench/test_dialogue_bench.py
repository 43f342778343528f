"""``bench/dialogue.py`` builds its two-turn dialogues as its docstring says (synthetic rows)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from _scripted_rewriter import ScriptedLine, ScriptedRewriter
from dialogue import PRONOUNS, dialogue, pronoun_dialogues

from actors.models import OpenAIChatClient
from reactive_rag.judgement import Turn
from reactive_rag.judgement.model import ChatRewriter, RewriteError


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


def test_the_pronoun_set_keeps_it_they_he_she_and_that_and_no_possessive() -> None:
    band = ("Vortle", "Vortle are a band. They toured in 1999 and their album sold well.")
    rows = [
        row("Who produced the album recorded by Vortle?", band, ("Quin", "A producer.")),
        row("Who founded the company that makes the Zorbex 9?",
            ("Zorbex 9", "The Zorbex 9 is a phone. It was released in 2001."), ("Q", "A.")),
        row("Where is Ann Lee's company?",
            ("Ann Lee", "Ann Lee is a chemist. She founded Qantel."), ("Qantel", "A firm.")),
        *(row(f"Which city is Gadget {n} made in?",
              (f"Gadget {n}", f"Gadget {n} is a tool. It is sold in shops."), ("Q", "A."))
          for n in range(3)),
    ]
    got = [(d.pronoun, d.second) for d in pronoun_dialogues(rows)]
    words = [p for p, _ in got]
    assert "her" not in words and "them" not in words  # possessive/object forms left out
    assert ("it", "Who founded the company that makes it?") in got
    assert ("that", "Which city is that made in?") in got  # every third "it" says "that"
    assert all(p in PRONOUNS for p in words)
    d = dialogue(row("When did Vortle split?", band, ("Quin", "A producer.")), plural=True)
    assert d is not None and (d.pronoun, d.second) == ("they", "When did they split?")


async def test_the_scripted_rewriter_resolves_only_what_the_turns_show() -> None:
    line = ScriptedLine("it", "Zorbex 9", "Who founded the company that makes the Zorbex 9?")
    server = ScriptedRewriter({"Who founded the company that makes it?": line})
    await server.start()
    client = OpenAIChatClient(server.base_url, model="scripted", max_retries=0)
    try:
        rewriter = ChatRewriter(client)
        shown = Turn(run_id="r1", question="Tell me about Zorbex 9.",
                     standalone="Tell me about Zorbex 9.", outcome="answered",
                     answer="The Zorbex 9 is a phone.")
        other = Turn(run_id="r1", question="Tell me about tea.",
                     standalone="Tell me about tea.", outcome="answered", answer="A drink.")
        rewrite = await rewriter.rewrite("Who founded the company that makes it?", [shown])
        assert rewrite.standalone == line.standalone and rewrite.resolved == {"it": "Zorbex 9"}
        unseen = await rewriter.rewrite("Who founded the company that makes it?", [other])
        assert not unseen.changed  # the entity was not in the turns shown: left as asked
        for fault in ("malformed", "error"):
            server.fault = fault
            with pytest.raises(RewriteError):
                await rewriter.rewrite("Who founded the company that makes it?", [shown])
        assert server.calls["followup_rewrite"] == 4
    finally:
        await client.aclose()
        await server.close()
