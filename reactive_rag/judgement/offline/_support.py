"""Does a claim's quote say what its statement says? An offline, lexical estimate.

A quote can occur verbatim in its chunk and still not support the statement
written next to it: the statement may add a year, drop a "not", name another
person, or turn "reduces" into "increases". :func:`support_score` compares the
two (with the rest of the cited chunk, title included, as context: the title
often names the subject a quote leaves implicit) and returns a score in 0..1
with the parts it was made of, so the verifier can say *why* it refused a claim.

The score is a product of factors, each 1.0 when nothing is wrong::

    score = coverage ** w.coverage * exp(-(w.number * numbers + w.name * names
            + w.added_negation * added + w.dropped_negation * dropped
            + w.conflict * conflicts + w.unbacked * min(2, unbacked)))

* ``coverage``: share of the statement's distinct content stems found in the
  quote; a stem found only in the context counts ``w.context_credit``;
* ``numbers``: numbers and dates (digits, number words, month names) of the
  statement found in neither quote nor context ("adds 1951"); the context
  does not count when the quote has a number the statement leaves out (a
  year swapped for another year of the same chunk);
* ``names``: capitalised words and acronyms of the statement found in neither
  quote nor context ("names 'Flaubert'");
* ``added`` / ``dropped``: the statement negates and the quote does not, or
  the other way round ("drops 'not'"); negating words ("unrelated",
  "ineffective") and prefixes ("inactive" against "active") count;
* ``conflicts``: statement and quote lean opposite ways on a pair of
  opposites (increase/decrease, promote/inhibit, positive/negative, ...);
* ``unbacked``: direction or evaluation words of the statement the quote does
  not share at all (a statement that says "improves" over a quote that never
  says so).

Every list below is generic English (function, negation, direction and
evaluation words); no term is taken from any data set. The polarity weights
(``added_negation``, ``conflict``, ``unbacked``) are those fitted on the
SciFact *train* split (SUPPORT vs CONTRADICT; ``bench/_support_auc.py --fit``),
rounded, ``conflict`` raised a little so that one flipped direction alone fails
the verifier's threshold. The exact-fact weights (``coverage``, ``number``,
``name``, ``dropped_negation``) are set for the verifier, not fitted: SciFact's
claims paraphrase and abbreviate freely and never test an added year or a
swapped name (the fit gives them 0 there), while the verifier must drop a
claim for one added year, another name or a dropped "not" alone. A statement
equal to its quote, or the quote prefixed by the chunk's title, scores ~1.0.

Paraphrase a capable model writes is not a changed fact (added after the chat path's
drops on the HotpotQA tuning rows 0-149 with a scripted paraphrasing model, issue 25;
general English, no word from any data set): an abbreviation of what the quote or its
chunk spells out is the same name (initials of a capitalised name, "USN" for "United
States Navy", or the short table ``actors.text.ABBREVIATIONS``: "US" for "American",
"TV" for "television"); a capitalised or quoted negating word inside a name or title
("I Don't Wanna Know", "No Doubt") negates nothing; and :func:`without_verdict` takes a
leading yes/no ("No: X was born in 1950") off a statement before it is scored, since it
is the writer's verdict (checked as a lead is), not part of the fact. The family is
switched off with the verifier's ``support_threshold=0``, and a model judge replaces it.

This is a lexical estimate, not an entailment model: it catches changed facts
and flipped directions that are spelled out, not paraphrases it has no words
for (see ``bench/_support_auc.py`` for how far it goes). With the default MiniLM
embedder the verifier multiplies it by a learned embedding factor <= 1
(:mod:`._support_head`), recorded in :attr:`SupportScore.embedding_factor`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from actors.text import ABBREVIATIONS, CAPITALISED_NAME, NEGATIONS, STOPWORDS, stem, tokenize

__all__ = [
    "DEFAULT_SUPPORT_WEIGHTS",
    "SupportScore",
    "SupportWeights",
    "pronoun_resolved",
    "support_score",
    "without_verdict",
]


@dataclass(frozen=True, slots=True)
class SupportWeights:
    """What each kind of mismatch costs (see the module docstring for the formula)."""

    coverage: float = 1.0
    context_credit: float = 0.9
    number: float = 2.0
    name: float = 1.5
    added_negation: float = 2.2
    dropped_negation: float = 1.5
    conflict: float = 1.5
    unbacked: float = 0.7


DEFAULT_SUPPORT_WEIGHTS = SupportWeights()


@dataclass(frozen=True, slots=True)
class SupportScore:
    """How well a quote supports a statement, and what is missing or contradicting.

    ``score`` is in 0..1: 1.0 when every content word, number and name of the
    statement is in the quote (or its context) and nothing flips its polarity.
    """

    score: float
    coverage: float
    terms: int = 0
    in_quote: int = 0
    in_context: int = 0
    missing_terms: tuple[str, ...] = ()
    missing_numbers: tuple[str, ...] = ()
    missing_names: tuple[str, ...] = ()
    added_negations: tuple[str, ...] = ()
    dropped_negations: tuple[str, ...] = ()
    conflicts: tuple[tuple[str, str], ...] = ()
    unbacked: tuple[str, ...] = ()
    embedding_factor: float | None = None
    """The embedding head's multiplier (``_support_head``), None when it did not apply."""

    @property
    def reasons(self) -> tuple[str, ...]:
        """Human-readable parts, most serious first (empty when nothing is wrong)."""
        out = [f"adds {n}" for n in self.missing_numbers]
        out += [f"drops {n!r}" for n in self.dropped_negations]
        out += [f"adds {n!r}" for n in self.added_negations]
        out += [f"says {s!r} where the quote says {q!r}" for s, q in self.conflicts]
        out += [f"names {n!r}" for n in self.missing_names]
        shown = [t for t in self.missing_terms if t not in {n.lower() for n in self.missing_names}]
        if shown:
            more = f" (+{len(shown) - 4} more)" if len(shown) > 4 else ""
            out.append("adds " + ", ".join(repr(t) for t in shown[:4]) + more)
        if self.embedding_factor is not None and self.embedding_factor < _SHOWN_FACTOR:
            out.append(f"reads closer to its opposite (embedding x{self.embedding_factor:.2f})")
        return tuple(out)

    def explain(self) -> str:
        """One line: the reasons joined by " / ", or ``"supported"``."""
        return " / ".join(self.reasons) or "supported"

    def rescored(self, weights: SupportWeights) -> float:
        """The score these parts would get under other ``weights`` (for fitting them)."""
        factor = 1.0 if self.embedding_factor is None else self.embedding_factor
        return _combine(self, weights) * factor


# An embedding factor below this is named among the reasons (above it, it is a nudge).
_SHOWN_FACTOR = 0.75


def _combine(parts: SupportScore, w: SupportWeights) -> float:
    if parts.terms:
        coverage = (parts.in_quote + w.context_credit * parts.in_context) / parts.terms
    else:
        coverage = 1.0
    base = 1.0 if w.coverage == 0 else (float(coverage**w.coverage) if coverage > 0 else 0.0)
    penalty = (
        w.number * len(parts.missing_numbers)
        + w.name * len(parts.missing_names)
        + w.added_negation * min(1, len(parts.added_negations))
        + w.dropped_negation * min(1, len(parts.dropped_negations))
        + w.conflict * len(parts.conflicts)
        + w.unbacked * min(2, len(parts.unbacked))
    )
    return max(0.0, min(1.0, base * math.exp(-penalty)))


# --- lexicons ---------------------------------------------------------------------------

def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NEGATION_WORDS = NEGATIONS | _wordset(
    """cannot nothing nobody nowhere lack lacks lacked
    lacking fail fails failed unable absent absence unrelated unaffected unchanged independent
    independently ineffective incapable insignificant nonsignificant unnecessary dispensable
    irrelevant inactive unlikely impossible"""
)
# Negating prefixes: "inactive" negates "active" when the other side says "active".
# (Only prefixes that rarely start an unrelated word; the base must have >= 5 letters.)
_NEG_PREFIXES = ("non", "un", "in", "ir", "il")

# Opposites, as groups of (one side, the other side). Generic English direction and
# evaluation words; stems are matched exactly, or as a prefix for stems of >= 5 letters.
_OPPOSITES_TEXT: tuple[tuple[str, str], ...] = (
    (  # direction: more / less of something, or making it happen / stopping it
        "increase increased increases increasing increment higher high highest more "
        "greater greatest larger largest bigger elevate elevated elevation raise raised rise "
        "rises rising rose risen augment augmented boost boosted gain gains gained exceed "
        "excess upregulate upregulated upregulation amplify amplified amplification expand "
        "expansion grow grows growth accelerate accelerated acceleration overestimate "
        "overexpression maximum maximal peak extend extended prolong prolonged "
        "strengthen strengthened promote promotes promoted promoting promotion enhance "
        "enhanced enhances enhancing enhancement enhancer stimulate stimulates stimulated "
        "stimulation activate activates activated activation induce induces induced induction "
        "facilitate facilitates encourage encourages enable enables enabled allow allows "
        "permit permits potentiate trigger triggers",
        "decrease decreased decreases decreasing reduce reduced reduces reducing reduction "
        "lower low lowest less fewer smaller smallest decline declined declines "
        "diminish diminished drop dropped drops fall falls fell fallen shrink shrank lose "
        "loses lost loss deplete depleted depletion downregulate downregulated "
        "downregulation attenuate attenuated attenuation slow slowed slower delay delayed "
        "underestimate minimum minimal shorten shortened weaken weakened "
        "inhibit inhibits inhibited inhibiting inhibition suppress suppresses suppressed "
        "suppression suppressor impair impairs impaired impairment block blocks blocked "
        "blockade prevent prevents prevented prevention hinder hinders abolish abolished "
        "abrogate abrogated eliminate eliminated deactivate deactivates inactivate "
        "inactivated disrupt disrupts disrupted antagonize interfere interferes",
    ),
    ("positive positively", "negative negatively"),
    ("benefit benefits beneficial better improve improves improved improvement superior "
     "protect protects protective",
     "harm harms harmful detrimental worse worsen worsens worsened inferior damage damages "
     "damaging"),
    ("safe safety", "unsafe dangerous toxic hazardous"),
    ("success successful succeed succeeds", "failure unsuccessful"),
    ("accurate accurately correct correctly true", "inaccurate incorrect incorrectly false wrong"),
    ("common commonly frequent frequently often usual usually", "rare rarely uncommon "
     "infrequent infrequently seldom unusual"),
    ("fast faster rapid rapidly quick quickly", "slowly gradual gradually"),
    ("long longer longest", "short shorter shortest brief"),
    ("major majority", "minor minority"),
    ("strong stronger strongly", "weak weaker weakly"),
    ("agonist", "antagonist"),
    ("dependent depends depend", "independent independently"),
    ("associated association linked related correlated correlation", "unrelated unassociated"),
    ("include includes included", "exclude excludes excluded"),
    ("accept accepted", "reject rejected"),
    ("present presence", "absent absence"),
    ("sufficient", "insufficient"),
    ("necessary essential required requires require", "dispensable unnecessary"),
    ("possible possibly", "impossible"),
    ("likely", "unlikely"),
    ("able capable", "unable incapable"),
    ("consistent consistently", "inconsistent"),
    ("significant significantly", "insignificant nonsignificant"),
    ("normal", "abnormal"),
    ("warm warmer warming hot hotter heat", "cool cooler cooling cold colder"),
    ("wet wetter", "dry drier"),
    ("all always every everyone", "none never nobody"),
    ("many", "few"),
    ("begin begins began start starts started", "end ends ended stop stops stopped"),
    ("same similar identical", "different differ differs distinct"),
    ("agree agrees agreed", "disagree disagrees disagreed"),
    ("confirm confirms confirmed", "refute refutes refuted deny denies denied"),
    ("known", "unknown"),
    ("win wins won", "lose loses lost"),
    ("alive survive survival", "dead death die dies died"),
)


def _stems(text: str) -> list[str]:
    return stem(tokenize(text))


_OPPOSITES: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(_stems(a)), frozenset(_stems(b))) for a, b in _OPPOSITES_TEXT
)
_POLAR = frozenset().union(*(a | b for a, b in _OPPOSITES))
_POLAR_LONG = tuple(sorted(e for e in _POLAR if len(e) >= 5))
_NEG_STEMS = frozenset(_stems(" ".join(_NEGATION_WORDS)))
_AGENT = ("or", "ors", "er", "ers")

_MONTHS = _wordset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100",
    "thousand": "1000", "million": "1000000", "billion": "1000000000", "once": "1",
    "twice": "2", "single": "1", "double": "2", "half": "0.5",
}
# Number words a statement must not add ("one" and "single" are too often not numbers).
_CHECKED_NUMBER_WORDS = frozenset(_NUMBER_WORDS) - {"one", "once", "single", "half", "double"}
# A number standing alone, not the digits of a name such as "A2" or "H2O".
_NUMBER = re.compile(r"(?<![^\W\d_])\d+(?:[.,]\d+)*(?![^\W\d_])")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")
_PAREN_WORD = re.compile(r"\(\s*([^\W_][\w-]*)\s*\)")


def _canon_number(raw: str) -> str:
    s = raw.replace(",", "")
    try:
        value = float(s)
    except ValueError:
        return s
    return str(int(value)) if value.is_integer() else repr(value)


def _numbers(text: str, tokens: Iterable[str]) -> set[str]:
    out = {_canon_number(m.group()) for m in _NUMBER.finditer(text)}
    out.update(_NUMBER_WORDS[t] for t in tokens if t in _NUMBER_WORDS)
    return out


def _is_acronym(word: str) -> bool:
    upper = sum(c.isupper() for c in word)
    return upper >= 2 or (upper >= 1 and any(c.isdigit() for c in word))


def _drop_spelled_out(text: str) -> str:
    """Text without the acronyms it defines in parentheses ("stem cells (ESCs)")."""
    return _PAREN_WORD.sub(lambda m: " " if _is_acronym(m.group(1)) else m.group(0), text)


def _names(text: str) -> list[str]:
    """Capitalised words not at a sentence start, and acronyms ("UCP1", "HbA1c") anywhere."""
    out: list[str] = []
    last_end = 0
    for m in _WORD.finditer(text):
        word = m.group()
        between = text[last_end : m.start()]
        start = last_end == 0 or bool(_SENTENCE_END.search(between))
        last_end = m.end()
        lower = word.lower()
        if not word[:1].isupper() or lower in STOPWORDS or lower in _MONTHS:
            continue
        if _is_acronym(word) or not start:
            out.append(word)
    return out


def _has_name(name: str, words: frozenset[str]) -> bool:
    pieces = [p[:-2] if p.endswith("'s") else p for p in tokenize(name)]
    if all(p in words for p in pieces):
        return True
    if not _is_acronym(name):
        return False
    # Acronyms are written with and without a plural "s" or a trailing letter or digit
    # ("ESCs" / "ESC", "AMP" / "AMPK"); names are not (another surname is another person).
    key = pieces[0] if len(pieces) == 1 else "".join(pieces)
    if key.endswith("s") and key[:-1] in words:
        return True
    return len(key) >= 3 and any(
        (w.startswith(key) or key.startswith(w)) and abs(len(w) - len(key)) <= 1
        and len(w) >= 3 for w in words)


def _subject_prefix(statement: str, title: str) -> str:
    """The "Title" of a "Title: ..." statement whose head is the chunk's title, else ""."""
    head, sep, _ = statement.partition(": ")
    if not sep or not title.strip():
        return ""
    return head if tokenize(head) == tokenize(title) else ""


def _is_negation(token: str) -> bool:
    return token in _NEGATION_WORDS or token.endswith("n't")


def _name_negations(raw: str, other: str = "") -> list[str]:
    """Negating words that are part of a name or title: capitalised after a sentence's
    first word ("a song called I Don't Wanna Know", "the band No Doubt"), inside quotes,
    or opening a capitalised name the ``other`` text writes too ("No Doubt recorded")."""
    out: list[str] = []
    for name in CAPITALISED_NAME.finditer(raw):
        words = name.group().split()
        if len(words) >= 2 and _is_negation(words[0].lower().replace("\u2019", "'")) \
                and name.start() == len(raw) - len(raw.lstrip()) and name.group() in other:
            out.append(words[0].lower().replace("\u2019", "'"))
    for quoted in _QUOTED.finditer(raw):
        out += [t for t in tokenize(quoted.group(1)) if _is_negation(t)]
    unquoted = _QUOTED.sub(" ", raw)
    last_end = 0
    for m in _WORD.finditer(unquoted):
        word, between = m.group(), unquoted[last_end : m.start()]
        start = last_end == 0 or bool(_SENTENCE_END.search(between))
        last_end = m.end()
        token = word.lower().replace("\u2019", "'")
        if not start and word[:1].isupper() and _is_negation(token):
            out.append(token)
    return out


def _without(names: list[str], tokens: list[str]) -> list[str]:
    """``tokens`` less one occurrence of each of ``names``."""
    left = list(tokens)
    for name in names:
        if name in left:
            left.remove(name)
    return left


_DOTTED = re.compile(r"\b(?:[A-Z]\.){2,}")
_SPELLED_WORDS = frozenset(f for forms in ABBREVIATIONS.values() for f in forms if " " not in f)
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201c\u201d]{1,120})[\"\u201d]")


@dataclass(frozen=True, slots=True)
class _Spelled:
    """What a text abbreviates or spells out: initials of its names, and known forms."""

    text: str  # " word word ... " (tokens, lower case)
    words: frozenset[str]
    initials: frozenset[str]

    @classmethod
    def of(cls, raw: str, words: frozenset[str]) -> _Spelled:
        initials: set[str] = set()
        for m in CAPITALISED_NAME.finditer(raw):
            caps = [w for w in m.group().split() if w[:1].isupper()]
            for i in range(len(caps)):
                for j in range(i + 2, len(caps) + 1):
                    initials.add("".join(w[0] for w in caps[i:j]).lower())
        dotted = {m.group().replace(".", "").lower() for m in _DOTTED.finditer(raw)}
        return cls(f" {' '.join(tokenize(raw))} ", words | dotted, frozenset(initials))

    def abbreviates(self, token: str) -> bool:
        """Whether a (lower-case) word is an abbreviation of something this text spells out,
        or spells out an abbreviation it uses."""
        if token in self.initials and len(token) >= 2 and token not in STOPWORDS:
            return True
        if token in ABBREVIATIONS or token in _SPELLED_WORDS:
            return self.names(token)
        return False

    def names(self, name: str) -> bool:
        """Whether ``name`` is another way of writing something this text says."""
        key = "".join(tokenize(name))
        if _is_acronym(name.replace(".", "")) and key in self.initials:
            return True
        if any(f" {form} " in self.text for form in ABBREVIATIONS.get(key, ())):
            return True
        lower = " ".join(tokenize(name))
        return any(abbr in self.words and lower in forms
                   for abbr, forms in ABBREVIATIONS.items())


def _prefix_negations(words: Iterable[str], other: _Text) -> list[str]:
    """Words that are a negating prefix plus a word (>= 5 letters) the other side has.

    ("nonsurgical" against "non-surgical" is the same word, not a negation.)
    """
    joined = {a + b for a, b in zip(other.tokens, other.tokens[1:], strict=False)}
    other_stems = other.stem_set
    out: list[str] = []
    for w in words:
        if w in joined:
            continue
        for p in _NEG_PREFIXES:
            base = w[len(p) :]
            if w.startswith(p) and len(base) >= 5 and stem([base])[0] in other_stems:
                out.append(w)
                break
    return out


def _polar(st: str, side: frozenset[str]) -> bool:
    if st in side:
        return True
    # A longer form of a listed stem, but not its agent noun: "inhibitors" are a kind of
    # drug, not a direction.
    return len(st) > 5 and not st.endswith(_AGENT) and any(
        len(e) >= 5 and st.startswith(e) for e in side)


def _is_polar(st: str) -> bool:
    if st in _POLAR:
        return True
    return len(st) > 5 and not st.endswith(_AGENT) and st.startswith(_POLAR_LONG)


@dataclass(frozen=True, slots=True)
class _Text:
    raw: str
    tokens: list[str]
    stems: list[str]
    stem_set: frozenset[str]
    word_set: frozenset[str]

    @classmethod
    def of(cls, text: str) -> _Text:
        raw = unicodedata.normalize("NFKC", text).replace("\u2019", "'")
        tokens = tokenize(raw)
        stems = stem(tokens)
        words = set(tokens)
        words.update(t[:-2] for t in tokens if t.endswith("'s"))
        return cls(raw, tokens, stems, frozenset(stems), frozenset(words))


_EMPTY = _Text("", [], [], frozenset(), frozenset())


def support_score(
    statement: str,
    quote: str,
    *,
    context: str = "",
    title: str = "",
    weights: SupportWeights = DEFAULT_SUPPORT_WEIGHTS,
) -> SupportScore:
    """Estimate how well ``quote`` (with ``context``) supports ``statement``.

    Args:
        statement: what the claim asserts.
        quote: the words it cites.
        context: the rest of the cited chunk, title included. A content word
            found only here counts ``weights.context_credit``; numbers and names
            found here are not missing. Negations and directions are compared
            with the quote alone: the quote is what the claim says supports it.
        title: the cited chunk's title (also context). A statement written
            ``"<title>: <quote>"`` is the quote about that subject: the title's
            words count as found and its negation-like words ("No. 5 Battalion",
            "Never Say Goodbye") are part of a name.
        weights: what each kind of mismatch costs.

    Pure and deterministic; well under a millisecond for sentence-sized inputs.
    """
    # An acronym the statement spells out in parentheses is not something it adds.
    statement = _drop_spelled_out(statement)
    q = _Text.of(quote)
    c = _Text.of(context) if context.strip() else _EMPTY
    if title.strip() and c is _EMPTY:
        c = _Text.of(title)
    # "Title: quote" names the subject the chunk's title gives: its words count as
    # found, and its "No." or "Don't" is part of a name, not a negation.
    subject = _Text.of(_subject_prefix(statement, title))
    s = _Text.of(statement)
    body = _Text.of(statement[len(subject.raw) + 1 :]) if subject.raw else s

    # Content words: distinct stems, without stopwords, negations and numbers.
    wanted: dict[str, str] = {}
    for tok, st in zip(s.tokens, s.stems, strict=True):
        if tok in STOPWORDS or _is_negation(tok) or len(tok) < 2 or _NUMBER.fullmatch(tok):
            continue
        wanted.setdefault(st, tok)
    in_quote = in_context = 0
    missing_terms: list[str] = []
    quoted_forms = _Spelled.of(q.raw, q.word_set)
    for st, tok in wanted.items():
        if st in q.stem_set or st in subject.stem_set or quoted_forms.abbreviates(tok):
            in_quote += 1
        elif st in c.stem_set:
            in_context += 1
        else:
            missing_terms.append(tok)

    # Numbers and dates. One found only in the context counts when the quote has no
    # number of its own the statement leaves out: "completed in 1930" over a quote
    # saying 1889 is a swapped year, even if 1930 occurs elsewhere in the chunk.
    said = [m.group() for m in _NUMBER.finditer(s.raw)]
    said += [t for t in s.tokens if t in _CHECKED_NUMBER_WORDS]
    said_keys = {_canon_number(_NUMBER_WORDS.get(raw, raw)) for raw in said}
    quoted = _numbers(q.raw, q.tokens)
    have = quoted if quoted - said_keys - {"1"} else quoted | _numbers(c.raw, c.tokens)
    missing_numbers: list[str] = []
    for raw in said:
        if _canon_number(_NUMBER_WORDS.get(raw, raw)) not in have and raw not in missing_numbers:
            missing_numbers.append(raw)
    have_words = q.word_set | c.word_set
    for m in _WORD.finditer(s.raw):
        word = m.group()
        if word[:1].isupper() and word.lower() in _MONTHS and word.lower() not in have_words \
                and word not in missing_numbers and word.lower() != "may":
            missing_numbers.append(word)

    # Names; an abbreviation of what the quote spells out (or the other way round) is
    # the same name: "US" for "United States" or "American", "TV" for "television".
    missing_names: list[str] = []
    spelled = _Spelled.of(f"{q.raw}\n{c.raw}", have_words)
    for name in _names(s.raw):
        if not _has_name(name, have_words) and not spelled.names(name) \
                and name not in missing_names:
            missing_names.append(name)

    # Negations: negating words on one side only, then negating prefixes. A capitalised
    # "Don't" or "Never" inside a name or title ("I Don't Wanna Know") negates nothing.
    s = body
    s_neg = _without(_name_negations(s.raw, f"{q.raw}\n{c.raw}"),
                     [t for t in s.tokens if _is_negation(t)])
    q_neg = _without(_name_negations(q.raw, s.raw), [t for t in q.tokens if _is_negation(t)])
    added = [] if q_neg else s_neg[:1]
    dropped = [] if s_neg else q_neg[:1]
    s_only = [t for t in s.tokens if t not in q.word_set and not _is_negation(t)]
    q_only = [t for t in q.tokens if t not in s.word_set and not _is_negation(t)]
    if not added:
        added = _prefix_negations(s_only, q)[:1]
    if not dropped:
        dropped = _prefix_negations(q_only, s)[:1]

    # Opposites: on each pair, the statement's own words lean one way, the quote's the other.
    s_extra = [(st, t) for st, t in zip(s.stems, s.tokens, strict=True)
               if st not in q.stem_set and st not in _NEG_STEMS]
    q_extra = [(st, t) for st, t in zip(q.stems, q.tokens, strict=True)
               if st not in s.stem_set and st not in _NEG_STEMS]
    conflicts: list[tuple[str, str]] = []
    for a, b in _OPPOSITES:
        sa = [t for st, t in s_extra if _polar(st, a)]
        sb = [t for st, t in s_extra if _polar(st, b)]
        qa = [t for st, t in q_extra if _polar(st, a)]
        qb = [t for st, t in q_extra if _polar(st, b)]
        if len(sa) > len(sb) and len(qb) > len(qa):
            conflicts.append((sa[0], qb[0]))
        elif len(sb) > len(sa) and len(qa) > len(qb):
            conflicts.append((sb[0], qa[0]))
    unbacked = list(dict.fromkeys(t for st, t in s_extra if _is_polar(st)))

    parts = SupportScore(
        score=0.0,
        coverage=(in_quote + weights.context_credit * in_context) / len(wanted) if wanted else 1.0,
        terms=len(wanted),
        in_quote=in_quote,
        in_context=in_context,
        missing_terms=tuple(missing_terms),
        missing_numbers=tuple(missing_numbers),
        missing_names=tuple(missing_names),
        added_negations=tuple(added),
        dropped_negations=tuple(dropped),
        conflicts=tuple(conflicts),
        unbacked=tuple(unbacked),
    )
    return dataclasses.replace(parts, score=_combine(parts, weights))


# --- what a statement says beside its fact ------------------------------------------

_VERDICT = re.compile(r"^\s*(?:yes|no|是的|是|不是|否|对|不对)\s*"
                      r"[:,;.!\u2014\u2013\uff0c\uff1a\u3002-]\s*", re.IGNORECASE)


def without_verdict(statement: str) -> str:
    """A statement without the yes/no that answers the question before it ("No: X was
    born in 1950" states that X was born in 1950; the "No" is the writer's inference,
    checked as a lead is, not a negation of the fact)."""
    rest = _VERDICT.sub("", statement, count=1)
    return rest if rest.strip() else statement


_PRONOUN_START = re.compile(r"^\s*(?:it|he|she|they|this|these)\b", re.IGNORECASE)


def pronoun_resolved(quote: str, statement: str, title: str) -> str:
    """The quote with a leading pronoun read as the passage's subject, when the statement
    names it ("It was hosted by ..." under the title the statement starts with): the
    quote's words then line up with the statement's for the embedding factor."""
    subject = re.sub(r"\s*\([^)]*\)\s*$", "", title).strip()
    if not subject or not _PRONOUN_START.match(quote) or _PRONOUN_START.match(statement) \
            or subject.casefold() not in statement.casefold():
        return quote
    return _PRONOUN_START.sub(subject, quote, count=1)
