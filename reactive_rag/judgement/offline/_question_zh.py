"""Reading a Chinese question: what it asks for, the names it gives, the words that ask.

Chinese puts its question word where the answer goes ("若游戏中离，则多少分钟内不得进行
配对？": the answer replaces 多少分钟), writes no capitals and marks titles with book
brackets (《》) or corner quotes (「」). So the English readers' anchored patterns,
capitalised names and year regexes do not apply; this module gives the same three
answers for a question in Chinese: its answer type, its named things, and which of
its words only say how it is asked. Where it came from: the Chinese question words
of any grammar (谁, 什么时候/哪一年, 哪里, 多少/几, 是否/吗, 如何/怎么, 为什么, 什么是);
nothing here is fitted to a data set.
"""

from __future__ import annotations

import re
import unicodedata

from actors.text import CJK, content_terms, tokenize

__all__ = [
    "ZH_ASKING",
    "zh_answer_type",
    "zh_entities",
    "zh_holds_new_value",
]

# Question words, most specific first: (pattern, answer type). Searched anywhere.
_TYPES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), t) for p, t in (
        (r"什么时候|何时|哪一?年|哪一?天|哪个?月|几月|几年|几号|哪个朝代|哪个世纪|什么时间"
         r"|哪个年代", "when"),
        (r"多少|几[个位次种名人条座家部本场岁年月天小时分钟秒米倍层]|多[大长高远重久深宽]",
         "how_many"),
        (r"谁|哪位|哪些人|何人", "who"),
        (r"哪里|哪儿|何处|何地|什么地方|哪个(?:国家|城市|省|地区|地方)|哪座城市|在哪", "where"),
        (r"为什么|为何|什么原因|原因是什么", "why"),
        (r"如何|怎么|怎样|用什么方法", "how_to"),
        (r"^(?:什么是|何为)|是什么意思|指的是什么|的定义", "definition"),
        (r"是否|是不是|有没有|能不能|可不可以|会不会|吗[？?]?\s*$", "yes_no"),
    )
)

ZH_ASKING = frozenset(
    """
    一下 什么样 会不会 何人 何地 何处 几个 可不可以 告诉 哪位 哪年 多久 多大 多远 多重 多长
    多高 是不是 有没有 知道 能不能 请 请问
    """.split()  # noqa: SIM905
)
"""Words of a Chinese question that only say how it is asked (never a part to cover),
beyond the question words :data:`~actors.text.CJK_STOPWORDS` already drops (谁, 什么, 哪里,
多少, 如何 ...)."""

# Names a Chinese text marks: book titles, corner quotes, quotation marks.
_MARKED = re.compile(r"《([^《》]{1,40})》|「([^「」]{1,40})」|『([^『』]{1,40})』|“([^“”]{2,40})”")
# A Latin-script name inside Chinese text ("ω-force", "IBM", "Python 3").
_LATIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9.\-+]*(?:\s+[A-Za-z0-9][A-Za-z0-9.\-+]*)*")
# A number the question gives, with its unit character ("2011年", "3", "十二月").
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?(?:年|月|日|号|世纪)?")
_ZH_NUMERAL = "零〇一二两三四五六七八九十百千万亿"
_YEAR = re.compile(r"(?:1[0-9]{3}|20[0-9]{2})年?|[" + _ZH_NUMERAL + r"]{2,4}年|\d{1,2}世纪|"
                   r"[" + _ZH_NUMERAL + r"]{1,3}世纪")
_DATE = re.compile(r"\d{1,2}月|\d{1,2}日|[" + _ZH_NUMERAL + r"]{1,3}月|朝|年代|时期")
_COUNT = re.compile(r"\d[\d,.]*|[" + _ZH_NUMERAL
                    + r"]{1,6}[个位次种名人条座家部本场岁年月天分秒米倍层%]")


def zh_answer_type(question: str) -> str:
    """The kind of answer a Chinese question asks for ("" when none of the words is there)."""
    text = unicodedata.normalize("NFKC", question)
    return next((t for p, t in _TYPES if p.search(text)), "")


def zh_entities(question: str) -> list[str]:
    """Named things of a Chinese question: bracketed titles, Latin-script names, numbers."""
    text = unicodedata.normalize("NFKC", question)
    out: list[str] = []
    for m in _MARKED.finditer(text):
        name = next(g for g in m.groups() if g)
        if name not in out:
            out.append(name.strip())
    rest = _MARKED.sub(" ", text)
    for m in _LATIN_NAME.finditer(rest):
        name = m.group(0).strip()
        if len(name) >= 2 and name not in out and not any(name in o for o in out):
            out.append(name)
    for m in _NUMBER.finditer(rest):
        number = m.group(0)
        if not any(number in o for o in out):
            out.append(number)
    return out


def zh_holds_new_value(kind: str, sentence: str, question: str) -> bool:
    """Whether a Chinese ``sentence`` holds a value of the asked kind the question lacks.

    A year, a date or a dynasty for "when", a number or a counted amount for
    "how many", and for "who" / "where" / "what" a word of two or more
    characters that the question does not have (Chinese writes no capitals, so
    a new name is a new word). Other kinds ask for no single value.
    """
    s = unicodedata.normalize("NFKC", sentence)
    q = unicodedata.normalize("NFKC", question)
    if kind == "when":
        values = [m.group(0) for m in _YEAR.finditer(s)] + [m.group(0) for m in _DATE.finditer(s)]
        return any(v not in q for v in values)
    if kind == "how_many":
        return any(m.group(0) not in q for m in _COUNT.finditer(s))
    if kind in ("who", "where", "what"):
        asked = set(tokenize(q))
        return any(len(w) >= 2 and CJK.search(w) and w not in asked and w not in q
                   for w in content_terms(s))
    return True
