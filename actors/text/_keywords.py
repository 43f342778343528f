"""Tokenising, stopwords, stemming and the keyword-coverage signal.

Coverage answers "does this passage mention what the query asks about?" — a
cheap lexical check the reranker combines with dense similarity, which tends to
match topic but miss the specific entity or term a query hinges on.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from collections.abc import Set as AbstractSet

import Stemmer

from ._language import CJK_CHARS, CJK_RUN, segment_cjk

__all__ = [
    "ABBREVIATIONS",
    "CAPITALISED_NAME",
    "CJK",
    "CJK_STOPWORDS",
    "DEMONYMS",
    "NEGATIONS",
    "STOPWORDS",
    "content_terms",
    "jaccard",
    "keyword_coverage",
    "stem",
    "tokenize",
]

_CAP = r"[A-Z\u00c0-\u00de][\w'\u2019.\-]*"
CAPITALISED_NAME = re.compile(
    rf"{_CAP}(?:\s+(?:(?:of|the|for|de|del|da|du|la|le|von|van|der|di|y|and|N'|&)\s+)*{_CAP})*"
)
"""A capitalised phrase, a name as prose writes it: "Buddy Hield", "University of Kansas",
"Guns N' Roses" (capitalised words, joined by the small words names hold)."""

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")

CJK = re.compile(f"[{CJK_CHARS}]")
"""One CJK character (kana, Han, Hangul): scripts written without spaces, where a character
counts as a word for lengths and budgets."""

_STOPWORDS_TEXT = """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do
    does doesn't doing don't down during each few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out
    over own same shan't she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those through to too under until up very was wasn't we we'd we'll
    we're we've were weren't what what's when when's where where's which while who who's
    whom why why's with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves also may might must shall will just s t does much many
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORDS_TEXT.split())
"""English function words (the classic Snowball/SMART core) ignored by coverage."""

_CJK_STOPWORDS_TEXT = """
    的 了 是 在 和 与 及 或 也 都 而 被 把 对 之 其 于 为 以 这 那 个 着 过 吗 呢 吧 啊 呀 么
    就 还 又 并 且 但 由 从 到 向 将 让 给 等 地 得 所 该 此 有 要 会 能 可 可以 一个 这个
    那个 这些 那些 这样 那样 他 她 它 他们 她们 它们 我 你 我们 你们 什么 谁 哪 哪里 哪儿
    哪个 哪些 哪家 哪一年 多少 几 怎么 怎样 怎么样 如何 为什么 为何 是否 何时 何 时候
"""
CJK_STOPWORDS: frozenset[str] = frozenset(_CJK_STOPWORDS_TEXT.split())
"""Chinese function words and question words (as jieba cuts them) ignored by coverage,
the counterpart of :data:`STOPWORDS`: a question's 谁/什么时候 is no term a passage must hold."""

NEGATIONS: frozenset[str] = frozenset({"not", "no", "never", "nor", "none", "neither", "without"})
"""Words that negate what follows: a fuzzy match or a paraphrase must not drop or add one."""

DEMONYMS: frozenset[str] = frozenset(
    """
    american british english scottish welsh irish french german italian spanish portuguese
    dutch belgian swiss austrian swedish norwegian danish finnish icelandic polish czech
    slovak hungarian romanian bulgarian greek turkish russian ukrainian serbian croatian
    bosnian slovenian albanian estonian latvian lithuanian canadian mexican brazilian
    argentine argentinian chilean colombian peruvian venezuelan cuban jamaican australian
    zealander chinese japanese korean indian pakistani bangladeshi nepalese thai vietnamese
    filipino indonesian malaysian singaporean iranian iraqi israeli egyptian moroccan
    algerian tunisian nigerian ghanaian kenyan ethiopian lebanese syrian saudi emirati
    taiwanese mongolian georgian armenian european african asian
    """.split()  # noqa: SIM905
)
"""Nationality and origin adjectives (lower case): names of no page, values of "nationality"."""

ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "us": ("united states", "america", "american"),
    "usa": ("united states of america", "united states", "america", "american"),
    "uk": ("united kingdom", "britain", "great britain", "british"),
    "gb": ("great britain", "britain", "british"),
    "eu": ("european union",),
    "un": ("united nations",),
    "ussr": ("soviet union", "soviet"),
    "uae": ("united arab emirates", "emirati"),
    "tv": ("television",),
    "pc": ("personal computer",),
    "pm": ("prime minister",),
    "mp": ("member of parliament",),
    "ceo": ("chief executive officer", "chief executive"),
    "phd": ("doctor of philosophy", "doctorate"),
}
"""Common English abbreviations (lower case, dots dropped) and the forms they stand for; an
acronym spelled by initials ("United States Navy": USN) needs no entry. A paraphrase writes
one for the other: neither is a new name."""

_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    # PyStemmer objects keep a per-instance cache and are not safe to share
    # between threads, and callers run us in worker threads.
    s: Stemmer.Stemmer | None = getattr(_local, "stemmer", None)
    if s is None:
        s = Stemmer.Stemmer("english")
        _local.stemmer = s
    return s


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits; inner apostrophes kept).

    CJK runs are cut into words (:func:`~actors.text.segment_cjk`): "在2011年发行" gives
    ``["在", "2011", "年", "发行"]``, not one token. Text without CJK is tokenised as before.
    """
    words = _WORD.findall(text.lower())
    if CJK.search(text) is None:
        return [w.replace("\u2019", "'") for w in words]
    out: list[str] = []
    for word in words:
        if CJK.search(word) is None:
            out.append(word.replace("\u2019", "'"))
            continue
        pos = 0
        for m in CJK_RUN.finditer(word):
            out.extend(w.replace("\u2019", "'") for w in _WORD.findall(word, pos, m.start()))
            out.extend(segment_cjk(m.group()))
            pos = m.end()
        out.extend(w.replace("\u2019", "'") for w in _WORD.findall(word, pos))
    return out


def stem(words: Iterable[str]) -> list[str]:
    """English Snowball stems (``studies`` -> ``studi``), so inflections still match."""
    out: list[str] = _stemmer().stemWords(list(words))
    return out


def content_terms(text: str) -> list[str]:
    """Stems of the non-stopword tokens of ``text``, in order (duplicates kept).

    CJK words are kept as written (nothing to stem) unless they are in
    :data:`CJK_STOPWORDS`.
    """
    if CJK.search(text) is None:
        return stem(w for w in tokenize(text) if w not in STOPWORDS)
    words = [w for w in tokenize(text) if w not in STOPWORDS and w not in CJK_STOPWORDS]
    latin = [i for i, w in enumerate(words) if CJK.match(w) is None]
    for i, s in zip(latin, stem(words[i] for i in latin), strict=True):
        words[i] = s
    return words


def jaccard(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """``|a & b| / |a | b|``: how alike two sets of words are, from 0.0 to 1.0.

    Two empty sets are alike (1.0): nothing tells them apart, so two texts with
    no words are duplicates of each other, not strangers.
    """
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def keyword_coverage(query: str, text: str) -> float:
    """Fraction of the query's distinct content stems that occur in ``text``.

    Returns 0.0 when the query has no content words (nothing to cover), so the
    signal never rewards a passage for an empty query.
    """
    wanted = set(content_terms(query))
    if not wanted:
        return 0.0
    have = set(content_terms(text))
    return len(wanted & have) / len(wanted)
