"""Reading a question without a model: its topic, its named things, its shape.

Shared by the offline planner (what to search), the answerability judge (what
must be covered), the writer and the conversation rewriter (what a follow-up
refers to). Names in prose are told apart from code vocabulary, so a code-style
corpus gives no ``None``/``Returns`` "entities". Regexes, stemming and set
algebra only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from actors.text import (
    CAPITALISED_NAME,
    DEMONYMS,
    STOPWORDS,
    looks_like_code,
    stem,
    tokenize,
)
from streams import EvidenceChunk

__all__ = [
    "COMPARED_ATTRIBUTE",
    "FILLER",
    "MULTI_HOP",
    "OPINION",
    "comparison_pair",
    "desubjectivize",
    "extract_entities",
    "key_words",
    "names_used_as_code",
    "prose_entities",
    "question_entities",
    "words_key",
]

# Question words and fillers that carry no topic (on top of the stopwords).
FILLER = frozenset(
    """
    what which who whom whose when where why how name named called known also tell explain
    describe think opinion please know want like give list does did do is are was were the
    one ones kind type
    """.split()  # noqa: SIM905
)
# Lead-ins that ask for an opinion or a favour rather than name a topic. A
# following "about"/"whether"/"if" goes too; "how"/"why"/"what" stay (they are
# part of what is asked: "how vaccines work").
_SUBJECTIVE = re.compile(
    r"^\s*(?:(?:so|ok(?:ay)?|hey|hi|please)[,\s]+)*(?:"
    r"what\s+(?:do|would|did)\s+you\s+(?:think|know|say|believe|feel)\s+(?:about|of|on|regarding)"
    r"|what(?:'s|\s+is)\s+your\s+(?:opinion|view|take|understanding)\s+(?:about|of|on)"
    r"|(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:tell\s+me|explain|describe|say)"
    r"(?:\s+(?:about|whether|if))?"
    r"|(?:please\s+)?(?:tell\s+me|explain(?:\s+to\s+me)?|describe)(?:\s+(?:about|whether|if))?"
    r"|i\s+(?:want|would\s+like|'d\s+like|need)\s+to\s+(?:know|understand|learn)"
    r"(?:\s+(?:about|whether|if))?"
    r"|i(?:'m|\s+am)\s+(?:curious|wondering)(?:\s+(?:about|whether|if))?"
    r"|do\s+you\s+know(?:\s+(?:about|whether|if))?"
    r")\s+",
    re.IGNORECASE,
)
# Relative clauses and possessive chains: the shape of a question with a hidden hop.
MULTI_HOP = re.compile(
    r"\b(?:that|which|who|whom|whose|where|when)\b.+\b(?:that|which|who|whom|whose|where)\b"
    r"|\w\s+(?:that|who|whom|whose|which)\s+\w|['\u2019]s\s+\w+\s+(?:of|in|for)\b",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201c\u201d]{2,80})[\"\u201d]")
_NUM_UNIT = re.compile(
    r"\b\d[\d,.]*\s*(?:%|percent|km|kilometres|kilometers|miles|m|kg|tonnes|years?|people|seats?)\b"
)
_POSSESSIVE = re.compile(r"['\u2019]s?$")
# Capitalised words that name no page worth a search of its own.
_WEAK_NAMES = DEMONYMS | frozenset(
    """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday roman latin christian jewish
    muslim catholic north south east west northern southern eastern western
    """.split()  # noqa: SIM905
)


OPINION = re.compile(r"\b(?:think|opinion|view|take|feel|believe)\b", re.IGNORECASE)


def desubjectivize(question: str) -> str:
    """Drop "What do you think about", "Can you tell me" and similar lead-ins.

    >>> desubjectivize("What do you think about nuclear power?")
    'nuclear power'
    """
    text = question.strip()
    for _ in range(3):
        m = _SUBJECTIVE.match(text)
        if not m or m.end() >= len(text):
            break
        text = _ARTICLE.sub("", text[m.end() :])
    text = text.strip().rstrip("?!. ")
    return text or question.strip().rstrip("?!. ")


def words_key(text: str) -> frozenset[str]:
    return frozenset(stem(w for w in tokenize(text) if w not in STOPWORDS))


_INNER_POSSESSIVE = re.compile(r"['\u2019]s\s+")
_JOINER = re.compile(r"\s+(?:and|&|or)\s+")


def _clean_name(name: str) -> str | None:
    """Trim punctuation, possessives and a leading article; None if nothing specific is left."""
    name = _POSSESSIVE.sub("", name.rstrip(".-")).rstrip(".'\u2019-")
    words = name.split()
    if words and words[0].lower() in STOPWORDS and len(words) > 1:
        words = words[1:]
        name = " ".join(words)
    if not words or all(w.lower() in _WEAK_NAMES for w in words):
        return None
    if len(words) == 1:
        low = name.lower()
        if low in STOPWORDS or low in FILLER or len(name) < 3:
            return None
    return name


def extract_entities(text: str) -> list[str]:
    """Names, quoted titles and number+unit phrases in ``text``, in order of appearance.

    A name with a possessive or joined by "and"/"or" is returned whole and as
    its parts ("Diamond Head Classic's MVP" also gives "Diamond Head Classic"
    and "MVP"; "Scott Derrickson and Ed Wood" gives both names); a leading article
    is dropped; months, nationalities and sentence-initial function words are
    not names.
    """
    found: list[tuple[int, int, str]] = []
    for m in _QUOTED.finditer(text):
        found.append((m.start(1), 0, m.group(1).strip()))
    for m in CAPITALISED_NAME.finditer(text):
        whole = _clean_name(m.group(0))
        if whole is None:
            continue
        found.append((m.start(), 0, whole))
        pieces = [p for p in _INNER_POSSESSIVE.split(whole) if p]
        if len(pieces) == 1:
            pieces = _JOINER.split(whole)
        if len(pieces) > 1:
            for rank, piece in enumerate(pieces, 1):
                sub = _clean_name(piece)
                if sub is not None and sub[:1].isupper():
                    found.append((m.start(), rank, sub))
    for m in _NUM_UNIT.finditer(text):
        found.append((m.start(), 0, m.group(0)))
    found.sort()
    out: list[str] = []
    seen: set[str] = set()
    for _, _, name in found:
        key = name.lower()
        if key not in seen and tokenize(name):
            seen.add(key)
            out.append(name)
    return out


# Capitalised words that are code or docstring vocabulary, never a page to search for.
_CODE_WORDS = frozenset(
    """
    none true false null nil nan undefined return returns raise raises yield yields args
    kwargs arguments argument parameters parameter param params example examples note notes
    see default defaults optional deprecated self cls usage attributes
    """.split()  # noqa: SIM905
)
# Identifiers and code tokens a sentence may embed: URLs, dotted names (``asyncio.Future``),
# snake_case and ``_private`` names, calls (``gather()``) and backticked code.
_IDENTIFIER = re.compile(
    r"\S*(?:https?://|www\.)\S*"
    r"|`[^`]*`"
    r"|\b(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w+(?:\([^()\s]*\))?"
    r"|\b\w*_\w*"
    r"|\b\w+\([^()]*\)"
)
# A name an API gives a class: used dotted or called somewhere ("x.OrderedDict", "Future(").
_API_USE = re.compile(r"\.([A-Z]\w*)|\b([A-Z]\w*)\(")
_CODE_SUFFIX = re.compile(r"[a-z](?:Error|Exception|Warning|Exit|Interrupt)$")


def names_used_as_code(chunks: Sequence[EvidenceChunk]) -> set[str]:
    """Capitalised names the evidence uses as code (dotted or called), lower-cased."""
    out: set[str] = set()
    for c in chunks:
        for m in _API_USE.finditer(f"{c.title}\n{c.text}"):
            out.add((m.group(1) or m.group(2)).lower())
    return out


def prose_entities(sentence: str, code_names: set[str]) -> list[str]:
    """The names of a *prose* sentence worth a search: :func:`extract_entities` without code.

    A code-like sentence (see :func:`~actors.text.looks_like_code`) names nothing.
    Identifiers (URLs, dotted names, snake_case, calls, backticked code) are cut
    out before names are looked for, so a name never straddles one; code
    keywords and docstring labels ("None", "Returns", "Args") are trimmed off a
    name's ends; CamelCase exception names and names in ``code_names`` (the
    evidence uses them dotted or called: ``asyncio.Future``) are dropped.
    """
    if looks_like_code(sentence):
        return []
    masked = _IDENTIFIER.sub(" ; ", sentence)
    out: list[str] = []
    for name in extract_entities(masked):
        words = name.split()
        while words and words[0].lower().strip(".,'") in _CODE_WORDS:
            words.pop(0)
        while words and words[-1].lower().strip(".,'") in _CODE_WORDS:
            words.pop()
        if not words or any(_CODE_SUFFIX.search(w) or w.lower() in code_names for w in words):
            continue
        kept = _clean_name(" ".join(words))
        if kept is not None and kept not in out:
            out.append(kept)
    return out


def question_entities(question: str) -> list[str]:
    """The named things a question is about (its first word is a question word, not a name)."""
    text = desubjectivize(question)
    words = text.split()
    if words and words[0].lower().strip(",") in (FILLER | STOPWORDS):
        text = "x " + " ".join(words[1:])  # the question word is not a name
    return [e for e in extract_entities(text) if e.lower() not in FILLER]


def key_words(question: str) -> list[str]:
    """Content words of the question in order (surface forms, not stems), no fillers."""
    out: list[str] = []
    seen: set[str] = set()
    for w in tokenize(desubjectivize(question)):
        if w in STOPWORDS or w in FILLER or w in seen:
            continue
        seen.add(w)
        out.append(w)
    return out


_BETWEEN = re.compile(r"^\s*,?\s*(?:or|and|vs\.?|versus)\s*$", re.IGNORECASE)
# Comparison attributes that are found on each entity's page under another word.
COMPARED_ATTRIBUTE = {
    "older": "born",
    "younger": "born",
    "oldest": "born",
    "youngest": "born",
    "first": "",
    "earlier": "",
    "later": "",
    "same": "",
    "both": "",
    "longer": "",
    "larger": "",
    "bigger": "",
    "more": "",
    "higher": "",
    "taller": "",
}

def comparison_pair(question: str, ents: Sequence[str]) -> tuple[str, str] | None:
    """Two entities the question joins with "or"/"and"/"vs" ("A or B"), if any."""
    for a in ents:
        i = question.find(a)
        if i < 0:
            continue
        for b in ents:
            if b == a or a in b or b in a:
                continue
            j = question.find(b, i + len(a))
            if j >= 0 and _BETWEEN.match(question[i + len(a) : j]):
                return a, b
    return None
