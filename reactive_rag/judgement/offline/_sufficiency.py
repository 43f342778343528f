"""The offline answerability judge: does the chosen evidence answer the question?

No model reads the question here, so the judge works from its shape: what
kind of answer it asks for (who / when / where / how many / yes-no / how-to /
definition), the named things it is about, and its other content words, in
English or in Chinese (:mod:`._question_zh`). It measures

1. which named things of the question some chosen passage mentions (its title
   counts: a passage is *about* what it is titled after);
2. how much of the question's content words, weighted by how specific they
   are, the passages that mention its subject hold: one passage, or two linked
   ones (one names the other's title, stem by stem), or the pages of two
   different named things of the question; with no name, a window of a few
   sentences of one passage;
3. whether a passage that bears on the question holds a value of the asked
   kind that the question does not already give (a year for "when", a number
   for "how many", a name for "who" / "where").

A fitted score (:mod:`._sufficiency_head`) weighs these into the verdict; with
the head switched off, fixed shares decide (``judge_answerability_fixed``).
A name with one word typed one letter off a word the passages hold is that
word ("Orsley Hal" for "Orsley Hall", "Eurpean" for "European"); a lower-case
word general English and every passage lack is a typo that weighs nothing. A
lifespan in brackets says "born" and "died", "Western" is "West", and "the 16th
century" or "the 1990s" is a date. A Chinese word counts as held when each of
its character pairs is, whatever either side's segmentation. Parts that are
missing become the verdict's ``missing`` list and the follow-up searches that
might find them. Pure and deterministic: it runs inside the state machine.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from wordfreq import zipf_frequency

from actors.text import (
    CJK,
    CJK_RUN,
    cjk_ngrams,
    content_terms,
    is_cjk_text,
    split_sentences,
    stem,
    tokenize,
)
from reactive_rag.judgement import Answerability, QuestionSimilarity
from streams import EvidenceChunk

from ._question import desubjectivize, extract_entities, question_entities
from ._question_zh import ZH_ASKING, zh_answer_type, zh_entities, zh_holds_new_value
from ._sufficiency_head import SufficiencyFeatures, SufficiencyHead, load_sufficiency_head

__all__ = [
    "QuestionNeeds",
    "analyse_question",
    "holds_new_value",
    "judge_answerability",
    "judge_answerability_fixed",
    "sufficiency_features",
    "term_weight",
]

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
# "the 8th and 16th centuries", "the 1990s": a time, though no single year.
_CENTURY = re.compile(r"\b(?:\d{1,2}(?:st|nd|rd|th)\s+(?:and\s+\d{1,2}(?:st|nd|rd|th)\s+)?"
                      r"centur(?:y|ies)|1[0-9]{2}0s|20[0-9]0s)\b", re.IGNORECASE)
_NUMBER = re.compile(r"\b\d[\d,.]*\b")
_MONTH = re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|"
                    r"October|November|December)\b")
_NUMBER_WORDS = frozenset(
    [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve", "thirteen", "fourteen", "fifteen", "twenty", "thirty", "forty", "fifty",
        "hundred", "thousand", "million", "billion", "dozen",
    ]
)
# "What is the name of ...", "What was the population of ...".
_NOUN_OF = re.compile(
    r"(?:^\s*|[,;:]\s*)what(?:'s|\s+(?:is|are|was|were))\s+the\s+(?:\w+\s+)?(\w+)\s+of\b",
    re.IGNORECASE,
)
_QUANTITIES = frozenset(
    [
        "population", "number", "amount", "length", "height", "width", "depth", "area", "size",
        "distance", "capacity", "age", "weight", "count", "total", "duration", "elevation",
        "altitude",
    ]
)
# Question openings, most specific first: (pattern, answer type).
_TYPES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), t) for p, t in (
        (r"^\s*(?:in\s+)?(?:what|which)\s+(?:year|decade|century|date|month|day)\b", "when"),
        (r"^\s*when\b", "when"),
        (r"^\s*how\s+(?:many|much|long|old|tall|far|big|large|high|wide|deep)\b", "how_many"),
        (r"^\s*(?:who|whom|whose)\b", "who"),
        (r"^\s*where\b", "where"),
        (r"^\s*(?:in\s+)?(?:what|which)\s+(?:city|country|state|town|place|county|region|"
         r"continent|location)\b", "where"),
        (r"^\s*how\s+(?:do|can|should|would|could|to)\b", "how_to"),
        (r"^\s*(?:what\s+is|what\s+are|what's|define|meaning\s+of)\b", "definition"),
        (r"^\s*(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b",
         "yes_no"),
        (r"^\s*why\b", "why"),
    )
)
# The same asks later in a sentence ("... can seat how many people?", "... formed by who?").
_TYPES_ANYWHERE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), t) for p, t in (
        (r"\bhow\s+(?:many|much)\b", "how_many"),
        (r"\b(?:what|which)\s+(?:year|decade|century|date)\b", "when"),
        (r"\bwhen\s*\??\s*$", "when"),
        (r"\b(?:by|of|to|for)\s+(?:who|whom)\s*\??\s*$", "who"),
        (r"\bwhere\s*\??\s*$", "where"),
        (r"\b(?:what|which)\s+(?:city|country|state|town|place|county|region)\b", "where"),
    )
)
# A leading condition about the asker ("When I open a file, ...", "If you pass None what
# ..."): it sets the scene; the question is the clause after it, so "When I" asks no date.
_CONDITION = re.compile(
    r"^\s*(?:when|whenever|if|once)\s+(?:i|you|we|one|my|your|our)\b[^,?]*?"
    r"(?:,\s*|\s+(?=(?:is|are|was|were|does|do|did|can|could|will|would|should|how|what|"
    r"why|which|who|where)\b))",
    re.IGNORECASE,
)
# Words of a question that only say how it is asked (never a part to cover).
_ASKING = frozenset(
    [
        "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "name", "named",
        "called", "known", "tell", "explain", "describe", "please", "know", "want", "like",
        "give", "list", "way", "use", "using", "get", "make", "find", "best", "good",
        "difference", "differences", "between", "versus", "vs", "example", "examples",
    ]
)
# Numbers a question gives ("the 1964 team", "Interstate 77"): a passage about another year
# or another number is about something else.
_QUESTION_NUMBER = re.compile(r"\b\d+(?:[\u2013\-/]\d+)?(?:st|nd|rd|th)?\b")


@dataclass(frozen=True, slots=True)
class QuestionNeeds:
    """What a question asks for: the answer's kind, its named things, its other words."""

    answer_type: str
    entities: tuple[str, ...]  # named things, then the numbers the question gives
    terms: tuple[str, ...]  # stems of content words outside the entities
    words: tuple[str, ...]  # the same words as written, for messages and searches

    @property
    def names(self) -> tuple[str, ...]:
        """The named things alone, without the question's numbers."""
        return tuple(e for e in self.entities if not e[:1].isdigit())


def analyse_question(question: str) -> QuestionNeeds:
    """Split a question into the parts the evidence has to cover."""
    if is_cjk_text(question):
        return _analyse_zh(question)
    text = desubjectivize(question)
    entities = tuple(_outer_entities(question_entities(question)))
    numbers = tuple(dict.fromkeys(m.group(0) for m in _QUESTION_NUMBER.finditer(text)))
    entities += tuple(n for n in numbers if not any(n in e for e in entities))
    asked = _CONDITION.sub("", text, count=1)  # "When I run X, does it ...": asks "does"
    answer_type = next((t for p, t in _TYPES if p.search(asked)), "")
    if not answer_type or answer_type in ("who", "what"):
        answer_type = next((t for p, t in _TYPES_ANYWHERE if p.search(asked)), answer_type)
    if _is_choice(text, entities):
        answer_type = "choice"
    noun_of = _NOUN_OF.search(text)
    if noun_of and answer_type in ("definition", "what", ""):
        # "What is the population of X?" asks for a number, "What is the name of ..." a thing
        answer_type = "how_many" if noun_of.group(1).lower() in _QUANTITIES else "what"
    answer_type = answer_type or "what"
    in_entities = {t for e in entities for t in content_terms(e)}
    kind_nouns = _kind_nouns(text)
    words: list[str] = []
    terms: list[str] = []
    for word in tokenize(text):
        if word in _ASKING or len(word) < 2 or word in kind_nouns:
            continue
        stems = _question_terms(word)
        if not stems or stems[0] in in_entities or stems[0] in terms:
            continue
        terms.append(stems[0])
        words.append(word)
    return QuestionNeeds(answer_type, entities, tuple(terms), tuple(words))


def _analyse_zh(question: str) -> QuestionNeeds:
    """:func:`analyse_question` for a question in Chinese (see :mod:`._question_zh`)."""
    entities = tuple(zh_entities(question))
    answer_type = zh_answer_type(question) or "what"
    in_entities = {t for e in entities for t in content_terms(e)}
    terms: list[str] = []
    for word in content_terms(question):
        if word in ZH_ASKING or word in in_entities or word in terms:
            continue
        if CJK.search(word) and any(q in word for q in ("什么", "哪", "多少")):
            continue  # "什么人", "哪一年": a question word glued to its noun
        terms.append(word)
    return QuestionNeeds(answer_type, entities, tuple(terms), tuple(terms))


def _is_choice(text: str, entities: Sequence[str]) -> bool:
    """ "Who is older, A or B?": the answer is one of two named things."""
    for a in entities:
        for b in entities:
            if a != b and re.search(rf"{re.escape(a)}\W+(?:or|vs\.?|versus)\s+{re.escape(b)}",
                                    text):
                return True
    return False


_JOINED = re.compile(r"\s(?:and|or|&)\s")


def _outer_entities(entities: Sequence[str]) -> list[str]:
    """Drop entities that are parts of a longer one ("Kansas" inside "University of Kansas").

    A name joined by "and"/"or" ("A and B") is two things: its parts are kept instead.
    """
    keys = [set(content_terms(e)) for e in entities]
    n = len(entities)
    joined = {i for i in range(n) if _JOINED.search(entities[i])
              and any(j != i and keys[j] and keys[j] < keys[i] for j in range(n))}
    out: list[str] = []
    for i, e in enumerate(entities):
        if not keys[i] or i in joined:
            continue
        if any(j != i and j not in joined and keys[i] < keys[j] for j in range(n)):
            continue
        if any(keys[i] == set(content_terms(o)) for o in out):
            continue
        out.append(e)
    return out


def _terms(chunk: EvidenceChunk) -> set[str]:
    return _stems(f"{chunk.title} {chunk.text}")


def _stems(text: str) -> set[str]:
    """Content stems of ``text``, each also without its accents ("zürich" and "zurich")."""
    stems = set(content_terms(text))
    stems |= {t for w in tokenize(text) if (t := _irregular(w))}
    if _LIFESPAN.search(text):
        stems |= _LIFESPAN_TERMS
    stems |= {_COMPASS[t] for t in stems if t in _COMPASS}
    stems |= _bigrams(text)
    return stems | {_fold(t) for t in stems}


def _bigrams(text: str) -> set[str]:
    """Every pair of adjacent CJK characters of ``text``, marked so no word collides.

    A segmenter may cut a passage's "中离" where the question's cut keeps it whole;
    a Chinese word counts as present when each of its character pairs is (see
    :func:`_covered`), whatever either side's segmentation.
    """
    if not CJK.search(text):
        return set()
    flat = unicodedata.normalize("NFKC", text)
    return {_PAIR + g for m in CJK_RUN.finditer(flat) for g in cjk_ngrams(m.group())
            if len(g) == 2}


_PAIR = "\x00"  # marks a character pair among the stems (no word starts with NUL)


def _covered(term: str, have: set[str]) -> bool:
    """``term`` is among ``have``, or (a Chinese word) each of its character pairs is."""
    if term in have:
        return True
    if len(term) < 2 or not CJK.match(term[0]):
        return False
    pairs = {_PAIR + term[i:i + 2] for i in range(len(term) - 1)}
    return pairs <= have


# "Western Lirean" is the "West Lirean" of a passage: a compass adjective counts as its
# direction.
_COMPASS = {"western": "west", "eastern": "east", "northern": "north", "southern": "south"}


# "Tarvo Meresk (June 2, 1901 - May 3, 1980)", "(c.1585-1650)", any dash: a life's
# span in brackets after a name says when its bearer was born and died without the words.
_LIFESPAN = re.compile(r"[A-Z][\w.'\u2019-]*\s+\((?:[^()]*?\D)?\d{3,4}(?:/\d{2})?"
                       r"\s*[\u2013\u2014-]\s*(?:[^()]*?\D)?\d{3,4}\)")
_LIFESPAN_TERMS = frozenset(content_terms("born died"))


@functools.lru_cache(maxsize=65536)
def _irregular(word: str) -> str:
    """The stem of the verb that ``word`` is an irregular form of ("fought": "fight"), or "".

    The stemmer keeps "fought" and "fight" apart; a question asking who
    "fought" is answered by a passage saying "fighting". A word that is a
    lemma itself ("born", "found", "left") stays as it is.
    """
    if len(word) < 3 or not word.isalpha():
        return ""
    lemmas = _lemmas(word)
    if not lemmas or any(word in forms for forms in lemmas.values()):
        return ""
    verbs = lemmas.get("VERB", ())
    verb = content_terms(verbs[0]) if verbs else []
    own = content_terms(word)
    return verb[0] if verb and own and verb[0] != own[0] else ""


def _lemmas(word: str) -> dict[str, tuple[str, ...]]:
    """``word``'s dictionary forms by part of speech (lemminflect's bundled lexicon)."""
    from lemminflect import getAllLemmas  # imported on first use: it loads its lexicon

    lemmas: dict[str, tuple[str, ...]] = getAllLemmas(word)
    return lemmas


def _question_terms(word: str) -> list[str]:
    """A question word's stems, an irregular verb form as its verb's ("fought": "fight")."""
    irregular = _irregular(word)
    return [irregular] if irregular else content_terms(word)


def _mentions(chunk_terms: set[str], entity: str) -> bool:
    """Every word of ``entity`` is in the passage; accents and initials aside ("Zurich" is
    "Zürich", "Ana M Ruiz" is "Ana Maria Ruiz")."""
    if CJK.search(entity):  # a Chinese title: its words or its character pairs
        return all(_covered(t, chunk_terms) for t in content_terms(entity)) and bool(
            content_terms(entity))
    stems = set(content_terms(entity))
    if len(stems) > 1:
        stems = {t for t in stems if len(t) > 1} or stems  # "Ana M Ruiz": "M" is an initial
    return bool(stems) and {_fold(_COMPASS.get(t, t)) for t in stems} <= chunk_terms


@functools.lru_cache(maxsize=65536)
def _fold(term: str) -> str:
    """``term`` without its accents: how a question typed on a plain keyboard spells it."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", term)
                   if not unicodedata.combining(ch))


@functools.lru_cache(maxsize=65536)
def _weight(word: str) -> float:
    """How specific a word is: rare words (names, technical terms) weigh more than common ones.

    From the word's Zipf frequency in general English (``wordfreq``): "the" ~7.7,
    "people" ~6.3, "arena" ~4.3, "aorta" ~2.9, an unknown name 0.
    """
    zipf = _zipf_zh(word) if CJK.match(word) else zipf_frequency(word, "en")
    return min(_MAX_WEIGHT, max(_MIN_WEIGHT, _ZIPF_CEILING - zipf))


@functools.lru_cache(maxsize=65536)
def _zipf_zh(word: str) -> float:
    """A Chinese word's Zipf frequency from wordfreq's bundled list (0 when it is not there).

    Looked up directly: ``zipf_frequency(word, "zh")`` would re-segment the word with
    jieba, which the lookup of one already segmented word does not need.
    """
    freq = _zh_frequencies().get(word, 0.0)
    return math.log10(freq * 1e9) if freq > 0 else 0.0


@functools.lru_cache(maxsize=1)
def _zh_frequencies() -> dict[str, float]:
    from wordfreq import get_frequency_dict

    return dict(get_frequency_dict("zh", wordlist="best"))


def term_weight(word: str) -> float:
    """How specific ``word`` is in general English (see :func:`_weight`): "hosted" > "film"."""
    return _weight(word)


def _weighted_terms(question: str) -> dict[str, float]:
    """Every content stem of the question (entities included) with its specificity."""
    if is_cjk_text(question):
        needs = _analyse_zh(question)
        words = [*needs.terms, *(t for e in needs.entities for t in content_terms(e))]
        return {w: _weight(w) for w in dict.fromkeys(words)}
    text = desubjectivize(question)
    kind_nouns = _kind_nouns(text)
    out: dict[str, float] = {}
    for word in tokenize(text):
        if word in _ASKING or len(word) < 2 or word in kind_nouns:
            continue
        stems = _question_terms(word)
        if stems:
            key = _fold(stems[0])
            out[key] = max(out.get(key, 0.0), _weight(word))
    return out


def _typos(question: str, seen: set[str]) -> set[str]:
    """Stems of lower-case words of ``question`` that are a common English word misspelt.

    A word general English and every passage lack, one edit from a common
    word ("eavery", "hree"), is a typo; an unknown word no common word is
    near ("pymongo", "goroutines") is a technical term the evidence must
    hold, and a rare word some passage does hold ("tarn") is neither.
    """
    return {t for w in _LOWER_WORD.findall(desubjectivize(question))
            if zipf_frequency(w, "en") == 0 and _near_common(w)
            for t in content_terms(w) if _fold(t) not in seen}


@functools.lru_cache(maxsize=4096)
def _near_common(word: str) -> bool:
    """A common English word is one edit from ``word`` (a letter dropped, added, changed or
    two swapped)."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    edits = {a + b[1:] for a, b in splits if b}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    edits |= {a + ch + b[1:] for a, b in splits if b for ch in _LETTERS}
    edits |= {a + ch + b for a, b in splits for ch in _LETTERS}
    edits.discard(word)
    return any(zipf_frequency(e, "en") >= _COMMON_ZIPF for e in edits)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_COMMON_ZIPF = 4.0  # "every" 6.2, "three" 5.9: words everyone spells


def _respelt_names(entities: Sequence[str], chunks: Sequence[EvidenceChunk],
                   terms_of: dict[str, set[str]], seen: set[str]) -> dict[str, set[str]]:
    """Names with one word typed one letter off a word the passages hold, respelt.

    "Orsley Hal War Memorial" is the "Orsley Hall War Memorial" a passage names,
    "Eurpean" the "European" it says: a word no passage holds, one edit (a
    letter dropped, added or changed) from one a passage does, is read as that
    word when the whole name is then mentioned by one passage. One word per
    name at most: two slips make another name. Returns, per respelt name, its
    stems as respelt (what :func:`_mentions` then checks).
    """
    out: dict[str, set[str]] = {}
    for entity in entities:
        if CJK.search(entity) or any(_mentions(terms_of[c.id], entity) for c in chunks):
            continue
        stems = [_fold(t) for t in content_terms(entity)]
        odd = [t for t in stems if t not in seen]
        if len(odd) != 1 or len(odd[0]) < 3:
            continue
        for near in sorted(t for t in seen
                           if len(t) >= 3 and t[:1] != _PAIR and _one_edit(odd[0], t)):
            respelt = {near if t == odd[0] else t for t in stems}
            if any(respelt <= terms_of[c.id] for c in chunks):
                out[entity] = respelt
                break
    return out


def _one_edit(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by one letter dropped, added or changed."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i + (len(a) == len(b)):] == b[i + 1:]


# A word written in lower case, letters only ("eavery"; not "iPhone", "x86", "Leda").
_LOWER_WORD = re.compile(r"(?<![\w'\u2019-])[a-z]{3,}(?![\w'\u2019-])")
# "What year", "which city": the noun names the kind of answer, which a passage
# gives without saying the noun ("born in Venice" answers "in what city").
_KIND_NOUN = re.compile(
    r"\b(?:what|which)\s+(year|decade|century|date|month|day|city|country|state|town|"
    r"place|county|region|continent|location)\b",
    re.IGNORECASE,
)


def _kind_nouns(text: str) -> set[str]:
    """The nouns that only name the kind of answer asked for (see ``_KIND_NOUN``)."""
    return {m.group(1).lower() for m in _KIND_NOUN.finditer(text)}


def _share(weights: dict[str, float], have: set[str]) -> float:
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if _covered(t, have)) / total if total else 1.0


def holds_new_value(kind: str, sentence: str, question: str) -> bool:
    """Whether ``sentence`` holds a value of the asked kind that the question does not give.

    A year or a month for "when", a number (not a year) or a number word for
    "how many", a name for "who" / "where" / "what": a sentence restating the
    question ("the 1925 honours") holds no answer to it, however well it matches.
    Other kinds ask for no single value: always True.
    """
    if is_cjk_text(question):
        return zh_holds_new_value(kind, sentence, question)
    q_tokens = set(tokenize(question))
    if kind == "when":
        values = [m.group(0) for m in _YEAR.finditer(sentence)]
        if "year" not in q_tokens:  # "which year" asks for a year, not a day or a century
            values += [m.group(0) for m in _MONTH.finditer(sentence)]
            values += [m.group(0) for m in _CENTURY.finditer(sentence)]
        asked = question.lower()
        return any(v.lower() not in q_tokens and v.lower() not in asked for v in values)
    if kind == "how_many":
        numbers = [m.group(0).rstrip(".,") for m in _NUMBER.finditer(sentence)]
        if any(n not in question and not _YEAR.fullmatch(n) for n in numbers):
            return True
        return any(w in _NUMBER_WORDS and w not in q_tokens for w in tokenize(sentence))
    if kind in ("who", "where", "what"):
        return any(
            not set(tokenize(name)) <= q_tokens and not _YEAR.fullmatch(name)
            and not _MONTH.fullmatch(name)
            for name in extract_entities(sentence)
        )
    return True


def _value_sentence(answer_type: str, question: str, weights: dict[str, float],
                    chunks: Sequence[EvidenceChunk]) -> bool:
    """A sentence that bears on the question and holds a value of the asked kind."""
    for c in chunks:
        title_terms = _stems(c.title) if c.title else set()
        for s, e in split_sentences(c.text) or [(0, len(c.text))]:
            sentence = c.text[s:e]
            if _share(weights, _stems(sentence) | title_terms) < _VALUE_RELEVANCE:
                continue
            if holds_new_value(answer_type, sentence, question):
                return True
    return False


def _best_pair(weights: dict[str, float], chunks: Sequence[EvidenceChunk],
               terms_of: dict[str, set[str]],
               entities: Sequence[str] = (), names: Sequence[str] = ()
               ) -> tuple[float, tuple[EvidenceChunk, ...]]:
    """The share of the question's weighted terms that the best one or two passages cover.

    A multi-hop question is answered by two passages together: the one naming
    its subject and the one it links to (names the title of), or, when the
    question names two things (a comparison), one passage about each. Scattered
    words across unrelated passages are not an answer, so no other pair counts.
    """
    best: tuple[float, tuple[EvidenceChunk, ...]] = (0.0, ())
    for i, a in enumerate(chunks):
        one = _share(weights, terms_of[a.id])
        if one > best[0]:
            best = (one, (a,))
        for b in chunks[i + 1:]:
            if not (_linked(a, b) or _linked(b, a)
                    or _each_about_one(terms_of[a.id], terms_of[b.id], entities)
                    or _each_titled(a, b, names)):
                continue
            two = _share(weights, terms_of[a.id] | terms_of[b.id])
            if two > best[0] + 1e-9:
                best = (two, (a, b))
    return best


def _each_titled(a: EvidenceChunk, b: EvidenceChunk, names: Sequence[str]) -> bool:
    """Two passages that are the pages of two different named things of the question.

    "The movies A and B both ...": the page titled A and the page titled B
    together answer it, though neither names the other. One must be titled
    after its thing; the other may instead say so in its first sentence.
    """
    in_a, in_b = _pages_of(a, names), _pages_of(b, names)
    return bool(in_a - in_b) and bool(in_b - in_a) and (
        bool(in_a & _titled(a, names)) or bool(in_b & _titled(b, names)))


def _titled(chunk: EvidenceChunk, names: Sequence[str]) -> set[str]:
    """The names the passage's page is titled after, stem by stem ("Quince Tree (film)")."""
    title = _stemmed(_PAREN.sub("", chunk.title or ""))
    return {n for n in names if title and _stemmed(n) == title}


def _pages_of(chunk: EvidenceChunk, names: Sequence[str]) -> set[str]:
    """The named things a passage is the page of: its title, or what its first sentence
    says its subject is ("Karl IV ... was King of Velmar")."""
    spans = split_sentences(chunk.text)
    first = chunk.text[spans[0][0]:spans[0][1]] if spans else chunk.text
    lead = f" {_stemmed(first)} "
    return _titled(chunk, names) | {n for n in names if f" {_stemmed(n)} " in lead}


def _each_about_one(a: set[str], b: set[str], entities: Sequence[str]) -> bool:
    """Two passages that each name a different named thing of the question the other lacks."""
    only_a = {e for e in entities if _mentions(a, e) and not _mentions(b, e)}
    only_b = {e for e in entities if _mentions(b, e) and not _mentions(a, e)}
    return bool(only_a) and bool(only_b)


def _title_terms(title: str, weights: dict[str, float]) -> set[str]:
    """A title's words, with the question words that open a glued identifier word in it.

    API names glue words together ("datetime", "fromisoformat"): a question
    about a "date" is about ``datetime.date`` too.
    """
    terms = _stems(title)
    glued = [t for t in tokenize(title) if len(t) > 4]
    terms |= {w for w in weights if len(w) >= 4 and any(g.startswith(w) for g in glued)}
    return terms


def _best_window(weights: dict[str, float], chunks: Sequence[EvidenceChunk]
                 ) -> tuple[float, set[str], EvidenceChunk | None]:
    """The best share of the question's words in a few consecutive sentences of one passage.

    A long page holds most common words somewhere; the words of a question
    without names answer it only where they stand together. Returns the share,
    the words of that window and its passage.
    """
    best: tuple[float, set[str], EvidenceChunk | None] = (0.0, set(), None)
    for c in chunks:
        title = _title_terms(c.title, weights) if c.title else set()
        sentences = [_stems(c.text[s:e])
                     for s, e in split_sentences(c.text) or [(0, len(c.text))]]
        for i in range(len(sentences)):
            have = title.union(*sentences[i:i + _WINDOW_SENTENCES])
            share = _share(weights, have)
            if share > best[0]:
                best = (share, have, c)
    return best


_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


def _linked(a: EvidenceChunk, b: EvidenceChunk) -> bool:
    """``a`` names what ``b`` is about (its title), or they are two parts of one document.

    Compared stem by stem: a passage on a "management consultant" names the
    page "Management consulting".
    """
    if a.doc_id and a.doc_id == b.doc_id:
        return True
    title = _stemmed(_PAREN.sub("", b.title or ""))
    return bool(title) and f" {title} " in f" {_stemmed(a.text)} "


@functools.lru_cache(maxsize=4096)
def _stemmed(text: str) -> str:
    """``text`` as its word stems joined by spaces (cached: a passage is linked many times)."""
    return " ".join(stem(tokenize(text)))


@dataclass(frozen=True, slots=True)
class _Assessment:
    """What the judge measured of one question and its evidence."""

    needs: QuestionNeeds
    features: SufficiencyFeatures
    share: float
    threshold: float  # the fixed share the head replaces (``head=None``)
    covered: tuple[str, ...]
    missing: tuple[str, ...]  # named things and the asked value that are missing
    absent: tuple[str, ...]  # the question's other words the best passages lack
    extra: tuple[str, ...]


def _assess(question: str, chosen: Sequence[EvidenceChunk], held: Sequence[EvidenceChunk],
            similarity: QuestionSimilarity | None, head: SufficiencyHead | None) -> _Assessment:
    needs = analyse_question(question)
    weights = _weighted_terms(question)
    pool = list(chosen)
    extra: list[str] = []
    chosen_ids = {c.id for c in chosen}
    terms_of = {c.id: _terms(c) for c in [*chosen, *held]}
    seen = set().union(*terms_of.values())
    respelt = _respelt_names(needs.entities, [*chosen, *held], terms_of, seen)  # "Hal": "Hall"
    for stems in respelt.values():
        seen |= stems
    typos = _typos(question, seen)
    for name in respelt:
        typos |= {_fold(t) for t in content_terms(name)} - respelt[name]
    for typo in typos:
        weights[_fold(typo)] = _MIN_WEIGHT  # a misspelt word weighs as little as the commonest
    covered: list[str] = []
    missing: list[str] = []
    # 1. named things: each must be mentioned by a chosen passage (or a held one, added).
    for name in needs.entities:
        def mentions(chunk: EvidenceChunk, name: str = name) -> bool:
            if name in respelt:
                return respelt[name] <= terms_of[chunk.id]
            return _mentions(terms_of[chunk.id], name)

        hit = any(mentions(c) for c in pool)
        if not hit:
            more = [c for c in held if c.id not in chosen_ids and mentions(c)]
            if more:
                extra.append(more[0].id)
                pool.append(more[0])
                hit = True
        (covered if hit else missing).append(name)
    # 2. the question's words, weighted by how specific they are, in one or two passages;
    # with no named thing to anchor them, close together in one passage.
    about = any(_mentions(_stems(c.title), e) for c in pool if c.title
                for e in needs.names)
    threshold = (_TERM_SHARE if about else _TERM_SHARE_IN_PASSING) if needs.entities else (
        _TERM_SHARE_HOW_TO if needs.answer_type == "how_to" else _TERM_SHARE_NO_NAMES)
    if needs.entities:
        compared = needs.names if needs.answer_type in _COMPARING else ()
        share, pair = _best_pair(weights, pool, terms_of, compared, needs.names)
        have: set[str] = set()
        for c in pair:
            have |= terms_of[c.id]
    else:
        share, have, where = _best_window(weights, pool)
        if share < threshold:  # a held passage the final pick left out may say it
            others = [c for c in held if c.id not in chosen_ids and c.id not in extra]
            alt = _best_window(weights, others)
            if alt[0] > share:
                share, have, where = alt
                if where is not None and share >= threshold:
                    extra.append(where.id)
                    pool.append(where)
    absent = [w for w, t in zip(needs.words, needs.terms, strict=True) if not _covered(t, have)]
    covered.extend(w for w in needs.words if w not in absent)
    # 3. a value of the asked kind in a sentence that bears on the question.
    wants_value = needs.answer_type in _VALUE_WORDS
    value = not wants_value or _value_sentence(needs.answer_type, question, weights, pool)
    if not value:
        words = _VALUE_WORDS_ZH if is_cjk_text(question) else _VALUE_WORDS
        missing.append(words[needs.answer_type])
    named = list(needs.entities)
    dense = _dense(chosen, similarity, head)
    features = SufficiencyFeatures(
        share=share,
        rare_share=_share({t: w for t, w in weights.items() if w >= _RARE_WEIGHT}, have),
        soft_share=_share(weights, have | _prefixes(have)),
        rarest_held=1.0 - max((w for t, w in weights.items() if not _covered(t, have)),
                              default=0.0) / _MAX_WEIGHT,
        names=sum(e in covered for e in named) / len(named) if named else 1.0,
        value=1.0 if value else 0.0,
        about=1.0 if about else 0.0,
        no_names=0.0 if needs.entities else 1.0,
        **dense,
        **_asks_value(needs.answer_type, share, dense["dense"]),
    )
    return _Assessment(needs, features, share, threshold, tuple(covered), tuple(missing),
                       tuple(absent), tuple(extra))


def _prefixes(have: set[str]) -> set[str]:
    """The leading parts of ``have``'s longer Latin words, so "enum" counts for
    "enumeration" and "concurrent" for "concurrently" (see ``soft_share``)."""
    out: set[str] = set()
    for t in have:
        if len(t) >= _SOFT_PREFIX and t[:1].isascii() and t.isalpha():
            out.update(t[:n] for n in range(_SOFT_PREFIX, len(t)))
    return out


def _dense(chosen: Sequence[EvidenceChunk], similarity: QuestionSimilarity | None,
           head: SufficiencyHead | None) -> dict[str, float]:
    """``dense`` and ``dense_known`` (see :class:`SufficiencyFeatures`)."""
    fill = {"dense": head.dense_fill if head else 0.0, "dense_known": 0.0}
    if similarity is None or head is None or similarity.model != head.dense_model:
        return fill
    known = [similarity.scores[c.id] for c in chosen if c.id in similarity.scores]
    return {"dense": max(known), "dense_known": 1.0} if known else fill


def _asks_value(answer_type: str, share: float, dense: float) -> dict[str, float]:
    """``asks_value`` and its two products (see :class:`SufficiencyFeatures`)."""
    asks = 1.0 if answer_type in _VALUE_WORDS else 0.0
    return {"asks_value": asks, "asks_value_share": asks * share,
            "asks_value_dense": asks * dense}


def sufficiency_features(question: str, chosen: Sequence[EvidenceChunk],
                         held: Sequence[EvidenceChunk] = (), *,
                         similarity: QuestionSimilarity | None = None,
                         head: SufficiencyHead | None = None) -> SufficiencyFeatures:
    """The signals the fitted head weighs for ``question`` over ``chosen`` (for fitting)."""
    return _assess(question, chosen, held, similarity, head or load_sufficiency_head()).features


def judge_answerability(question: str, chosen: Sequence[EvidenceChunk],
                        held: Sequence[EvidenceChunk] = (), *,
                        similarity: QuestionSimilarity | None = None) -> Answerability:
    """The offline :class:`~reactive_rag.judgement.AnswerabilityJudge`, with the fitted head."""
    return _judge(question, chosen, held, similarity, load_sufficiency_head())


def judge_answerability_fixed(question: str, chosen: Sequence[EvidenceChunk],
                              held: Sequence[EvidenceChunk] = (), *,
                              similarity: QuestionSimilarity | None = None) -> Answerability:
    """The judge with the fixed word shares instead of the fitted head (config switch)."""
    return _judge(question, chosen, held, similarity, None)


def _judge(question: str, chosen: Sequence[EvidenceChunk], held: Sequence[EvidenceChunk],
           similarity: QuestionSimilarity | None, head: SufficiencyHead | None) -> Answerability:
    a = _assess(question, chosen, held, similarity, head)
    needs = a.needs
    entities_ok = a.features.names >= 1.0
    if head is None:
        answerable = entities_ok and a.share >= a.threshold and a.features.value > 0
        terms_ok = a.share >= a.threshold
    else:
        answerable = head.answerable(a.features)
        terms_ok = answerable or a.share >= a.threshold
    missing = list(a.missing)
    if not terms_ok or (not answerable and not missing):
        missing.extend(w for w in a.absent if w not in missing)
    searches = _searches(needs, missing, a.covered)
    extra = a.extra
    zh = is_cjk_text(question)
    if answerable:
        return Answerability("answerable", needs.answer_type, a.covered, (),
                             "找到的资料涵盖了问题的各个部分" if zh else
                             "the evidence covers every part of the question", (), extra)
    # A partial answer must be about a named thing of the question: words of a question
    # matched here and there are not a part of its answer.
    named = [e for e in needs.names if e in a.covered]
    if named and len(named) * 2 >= len(needs.entities) and a.share >= _PARTIAL_SHARE:
        return Answerability("partial", needs.answer_type, a.covered, tuple(missing),
                             f"找到的资料未涉及{'、'.join(missing)}" if zh else
                             f"the evidence does not cover {', '.join(missing)}", tuple(searches),
                             extra)
    if zh:
        what_zh = "、".join(missing) or "这个问题"
        return Answerability("unanswerable", needs.answer_type, a.covered, tuple(missing),
                             f"没有找到涉及{what_zh}的资料", tuple(searches), extra)
    what = ", ".join(missing) or "the question"
    return Answerability("unanswerable", needs.answer_type, a.covered, tuple(missing),
                         f"nothing found covers {what}", tuple(searches), extra)


_RARE_WEIGHT = 3.0  # Zipf 4 or rarer: "arena", "coroutine", "续作", not "people" or "time"
_SOFT_PREFIX = 5
_TERM_SHARE = 0.6
_TERM_SHARE_NO_NAMES = 0.85
# A task ("how do I cache the results of an expensive call") is named by its verb and
# object; documentation rarely repeats the asker's qualifiers ("expensive").
_TERM_SHARE_HOW_TO = 0.75
_WINDOW_SENTENCES = 3
_COMPARING = frozenset({"choice", "yes_no"})  # answered by one passage about each named thing
_TERM_SHARE_IN_PASSING = 0.8
_PARTIAL_SHARE = 0.6
_VALUE_RELEVANCE = 0.15
_ZIPF_CEILING = 7.0
_MIN_WEIGHT = 0.5
_MAX_WEIGHT = 6.0
_VALUE_WORDS = {"when": "the date asked for", "how_many": "the number asked for",
                "who": "the name asked for", "where": "the place asked for"}
_VALUE_WORDS_ZH = {"when": "所问的时间", "how_many": "所问的数字", "who": "所问的人名",
                   "where": "所问的地点"}


def _searches(needs: QuestionNeeds, missing: Sequence[str], covered: Sequence[str]) -> list[str]:
    """Queries for the missing parts: each missing entity with the words around it."""
    out: list[str] = []
    words = [w for w in needs.words if w in missing][:3]
    for entity in needs.entities:
        if entity in missing:
            out.append(" ".join([entity, *words[:2]]))
    if words and not out:
        anchor = [e for e in needs.entities if e in covered][:1]
        if not anchor:  # no name to anchor a lone word: the missing words with the rest
            anchor = [w for w in needs.words if w not in missing][:3]
        out.append(" ".join([*words, *anchor] if not needs.entities else [*anchor, *words]))
    return out[:2]
