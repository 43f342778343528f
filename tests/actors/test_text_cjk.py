
"""CJK text: language detection, word segmentation, content terms and sentence splits."""

from __future__ import annotations

from actors.text import (
    chunk_text,
    content_terms,
    is_cjk_text,
    keyword_coverage,
    split_sentences,
    text_language,
    tokenize,
)


def _sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


def test_a_chinese_question_with_a_latin_name_is_chinese() -> None:
    assert is_cjk_text("微软的Windows操作系统是哪一年发布的？")
    assert text_language("长城有多长？") == "zh"
    assert text_language("How long is the Great Wall?") == "en"
    assert not is_cjk_text("Python 3.12 release notes (中文)")  # mostly Latin letters
    assert not is_cjk_text("2024-01-01 !!!")  # no letters at all


def test_chinese_is_cut_into_words_and_numbers_stand_apart() -> None:
    words = tokenize("这座桥在1937年建成，全长2.7公里。")
    assert "1937" in words and "年" in words and "建成" in words
    assert "这座桥在1937年建成" not in words  # no longer one token per clause
    assert all(w.strip() for w in words)


def test_mixed_text_keeps_latin_words_as_before() -> None:
    words = tokenize("他用Python写了一个Web服务")
    assert "python" in words and "web" in words and "服务" in words


def test_english_tokens_unchanged() -> None:
    assert tokenize("It\u2019s the Dog's bone, isn't it?") == ["it's", "the", "dog's", "bone",
                                                                "isn't", "it"]
    assert content_terms("The studies were running") == ["studi", "run"]


def test_content_terms_drop_chinese_function_and_question_words() -> None:
    terms = content_terms("谁设计了这座桥？")
    assert "设计" in terms and "桥" in terms
    assert "谁" not in terms and "了" not in terms


def test_keyword_coverage_matches_a_chinese_passage() -> None:
    question = "这座桥是谁设计的？"
    assert keyword_coverage(question, "这座桥由一位法国工程师设计，于1937年建成。") == 1.0
    assert keyword_coverage(question, "长江是中国最长的河流。") < 0.5


def test_chinese_sentences_end_at_full_width_marks_without_spaces() -> None:
    text = "他说：“明天见。”然后离开了。真的吗？！是的；没错"
    assert _sentences(text) == ["他说：“明天见。”", "然后离开了。", "真的吗？！", "是的；", "没错"]


def test_english_sentences_unchanged() -> None:
    text = "Dr. Smith arrived. He said \"hi.\" Then he left! Why? Because."
    assert _sentences(text) == ["Dr. Smith arrived.", "He said \"hi.\"", "Then he left!",
                                "Why?", "Because."]


def test_a_long_chinese_text_is_chunked_by_characters_not_as_one_word_per_sentence() -> None:
    text = "青湖位于山谷北部，是当地最大的淡水湖。湖面面积约为三十二平方公里。" * 30
    chunks = chunk_text(text, target_words=120, max_words=160)
    assert len(chunks) >= 6  # ~1,000 characters: several chunks, not one
    for c in chunks:
        assert text[c.start:c.end] == c.text
        assert c.word_count <= 160
