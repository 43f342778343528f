"""The offline judge reads a Chinese question: its answer type, its names, its words.

Passages and questions here are written for the tests (no data set rows).
"""

from __future__ import annotations

import pytest

from reactive_rag.judgement import Answerability, partial_note
from reactive_rag.judgement.offline import analyse_question, judge_answerability
from streams import EvidenceChunk

LAKE = EvidenceChunk(
    id="lake#0", title="青湖",
    text=("青湖位于山谷北部，是当地最大的淡水湖。湖面面积约为三十二平方公里。"
          "青湖于1958年被列为自然保护区，每年冬季有大量候鸟在此栖息。"),
)
BRIDGE = EvidenceChunk(
    id="bridge#0", title="石桥",
    text="石桥是一座古老的拱桥，由当地工匠在清朝修建，全长八十米。",
)
GAME = EvidenceChunk(
    id="game#0", title="《星海远征》",
    text=("《星海远征》是一款太空策略游戏，由北辰工作室开发。"
          "玩家若在对局中途离开，则十分钟内不得重新进入匹配。"),
)


@pytest.mark.parametrize(("question", "kind"), [
    ("青湖是哪一年被列为自然保护区的？", "when"),
    ("青湖的面积有多少平方公里？", "how_many"),
    ("《星海远征》是由谁开发的？", "who"),
    ("青湖位于哪里？", "where"),
    ("为什么候鸟在青湖过冬？", "why"),
    ("青湖是淡水湖吗？", "yes_no"),
    ("如何进入匹配？", "how_to"),
])
def test_a_chinese_question_word_sets_the_answer_type(question: str, kind: str) -> None:
    assert analyse_question(question).answer_type == kind


def test_book_title_brackets_mark_a_named_thing() -> None:
    needs = analyse_question("《星海远征》是由哪个工作室开发的？")
    assert "星海远征" in needs.entities
    assert not {"哪个", "是", "的"} & set(needs.terms)


def test_a_reworded_chinese_question_whose_answer_is_held_is_answerable() -> None:
    verdict = judge_answerability("青湖在哪一年成为自然保护区？", [LAKE, BRIDGE])
    assert verdict.verdict == "answerable", verdict


def test_a_value_question_is_answered_by_a_sentence_with_a_new_number() -> None:
    verdict = judge_answerability("玩家中途离开对局后，多少分钟内不能重新匹配？", [GAME])
    assert verdict.verdict == "answerable", verdict


def test_a_chinese_question_about_something_absent_is_not_answerable() -> None:
    verdict = judge_answerability("《银河列车》的作曲者是谁？", [LAKE, BRIDGE, GAME])
    assert verdict.verdict != "answerable"
    assert "没有找到" in verdict.reason or "未涉及" in verdict.reason  # said in Chinese


def test_a_partial_note_is_written_in_the_question_language() -> None:
    judged = Answerability("partial", "what", ("青湖",), ("候鸟",), "")
    assert partial_note(judged, "zh").startswith("部分回答")
    assert partial_note(judged).startswith("Partial answer")


def test_when_i_opening_a_condition_asks_no_date() -> None:
    assert analyse_question("When I open a file in text mode, what encoding is used?"
                            ).answer_type != "when"
    assert analyse_question("When did the bridge open?").answer_type == "when"
