"""Soft failures of a web search: results that came back but should not be used as they are.

Pure and deterministic (no I/O, no clock: ``today`` is an argument), so the run
machine can call them on every search's hits. Three kinds, told apart because
the machine treats them differently:

* **spam** (``stuffing``, ``boilerplate``): pages written for ranking, not
  reading. Dropped loudly: the planner is told, and hosts with no clean result
  are offered for ``exclude_sites``.
* **mirror**: the same text on many hosts (scrapers, syndication). One copy
  is kept and the others dropped quietly; a copy is a duplicate, not spam.
* **stale**: every dated result is older than the period the question asks
  about. Kept, but the planner is offered a date filter.

Text is the hit's ``content`` when present, else its ``snippet``; each check
needs a minimum of text and says nothing about shorter texts, since a
30-word snippet has no reliable word statistics.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from actors.text import (
    CAPITALISED_NAME,
    DEFAULT_RECENT_DAYS,
    STOPWORDS,
    asked_period,
    content_terms,
    hamming,
    jaccard,
    simhash64,
    split_sentences,
    stem,
    tokenize,
    url_host,
)
from streams import Hit, SearchFilters

from .. import FlaggedHit, SpamKind, SpamVerdict, StaleVerdict

__all__ = [
    "spam_flags",
    "stale_flag",
]


# Keyword stuffing: the question's words, over and over. Measured by MATTR, the
# mean share of distinct stems in every window of 20 content words (robust to
# length, unlike a type/token ratio), of words only (formula variables and
# numbers repeat in real text). Calibrated on 5,517 paragraphs paired with
# questions about them (multi-hop QA paragraphs, scientific abstracts for their
# claims, fact-check evidence): when the question's words made 30% or more of
# the words, MATTR never fell below 0.56; hand-written stuffed pages score
# 0.40-0.46. Question-word density alone does not separate them (a short
# paragraph quoting a long question reaches 70%), nor do repeated phrases (a
# page quoting the question twice repeats 59% of its question 3-grams), nor a
# low MATTR alone (formulas and unit tables reach 0.44).
_MIN_WORDS = 30  # fewer tokens have no reliable word statistics ...
_WINDOW = 20
_MIN_CONTENT = 25  # ... nor fewer content words than a window and a bit
_STUFFED_MATTR = 0.50  # at or below, with the question's words ...
_STUFFED_SHARE = 0.30  # ... at least this share of the content words
_LIST_FUNCTION_SHARE = 0.10  # function words below this: a list of words, not prose
_LIST_SHARE = 0.25  # ... about the question
_LIST_MATTR = 0.65  # ... and repetitive
_GATE_SHARE = 0.15  # below this share of possible question words, nothing to measure
# Stuffing of *other* words than the question's (a page built to rank for another
# query that a search still returns): one phrase of 4 words, not all function words,
# said 3 times or more, in repetitive text of 60 words or more. Set on the 1,498
# paragraphs of HotpotQA tune rows 0-149 (title + text): 42 repeat a 4-word phrase 3
# times (names: "Walt Disney World Dolphin"), none flagged at 60+ words; 177 of the 450
# spam pages bench/_simweb.py makes for those rows are, whatever question judges them.
_PHRASE_MIN_WORDS = 60  # a short page naming its subject 3 times is no stuffing
_PHRASE_WORDS = 4
_PHRASE_REPEATS = 3
_PHRASE_MATTR = 0.55

# Boilerplate: navigation, link and banner text around little prose. Lines are
# what a scraper keeps of a page's blocks, so they are the unit here.
# Snippets (too short for the window statistics): a snippet whose content words are
# mostly the question's, with several of them repeated, in few distinct words. Set on
# the first 20 words of 1,500 paragraphs (HotpotQA tune rows 0-149): 5 flagged (0.3%).
_SNIPPET_MIN_CONTENT = 8
_SNIPPET_SHARE = 0.5
_SNIPPET_REPEATED = 3  # distinct question words seen twice or more
_SNIPPET_DISTINCT = 0.6  # distinct content words / content words below this
# A result that restates the question and says little else (a Q&A farm, a page built
# to rank for the question): most of its content words are the question's and it
# holds most of them. Set on the same 1,500 paragraphs: none flagged, whole or as snippet.
_ECHO_MIN_CONTENT = 8
_ECHO_SHARE = 0.6
_ECHO_COVER = 0.8
_ECHO_RUN = 8  # ...or it copies the question, from its question word, this far (none did)
_ECHO_SCAN = 200  # tokens of a page searched for the copy
_ECHO_SNIPPET_NOVEL = 1  # a snippet adding at most this many words of its own says nothing new
_BOILER_MIN_WORDS = 40
_BOILER_SHARE = 0.40  # navigation / link / banner words / words: at least this ...
_PROSE_MAX = 0.35  # ... and prose words / words below this: the page says little
_BOILER_SIGNALS = 3  # ... shown by this many distinct navigation words or banner phrases
_PROSE_SENTENCE_WORDS = 8
_NAV_LINE_WORDS = 5

# Mirrors: the same text on several hosts.
_MIRROR_MIN_WORDS = 40
_MIRROR_DISTANCE = 6  # SimHash bits; see ``dedup_chunks`` (edits move 2-6 bits)
_MIRROR_HOSTS = 3
_MIRROR_NAMES = 0.6  # Jaccard of capitalised words; templated pages differ in names ...
_MIRROR_NUMBERS = 0.8  # ... and numbers ("The 2013 regatta was won by ...")

# Banner phrases by an anchor word: a line is searched for a phrase only when its
# anchor is among the page's words (set lookups instead of a slow regex per line).
_CUE_PHRASES: dict[str, tuple[str, ...]] = {
    "cookie": ("cookie",), "cookies": ("cookies",), "accept": ("accept all",),
    "privacy": ("privacy policy",), "rights": ("all rights reserved",),
    "terms": ("terms of use", "terms of service", "terms and conditions"),
    "copyright": ("copyright",), "subscribe": ("subscribe",), "newsletter": ("newsletter",),
    "sign": ("sign in", "sign up"), "log": ("log in", "log out"), "login": ("login",),
    "account": ("create an account", "my account"), "follow": ("follow us",),
    "share": ("share this", "share on", "share via"), "tweet": ("tweet",), "pin": ("pin it",),
    "advertisement": ("advertisement",), "sponsored": ("sponsored",),
    "related": ("related posts", "related articles", "related stories"),
    "read": ("read more",), "continue": ("continue reading",), "click": ("click here",),
    "skip": ("skip to content", "skip to main content"), "top": ("back to top",),
    "like": ("you may also like",), "recommended": ("recommended for you",),
    "trending": ("trending",), "popular": ("popular posts",),
    "leave": ("leave a comment", "leave a reply"), "powered": ("powered by",),
    "load": ("load more",), "buy": ("buy now",), "cart": ("add to cart",),
    "shipping": ("free shipping",), "coupon": ("coupon",), "coupons": ("coupons",),
}
_NAV_WORDS = frozenset(
    """
    home about contact blog shop store cart login register menu search news sitemap faq
    help careers jobs privacy terms subscribe share tweet pin email print next previous prev
    comments comment reply tags categories archives top more trending popular sponsored ads
    advertisement advertise deals sale offers account wishlist checkout
    """.split()  # noqa: SIM905
)
_SEPARATORS = re.compile(r"\s*(?:[|\u00b7\u2022\u203a\u00bb]|\s[>/]\s)\s*")
_TERMINAL = re.compile(r"[.!?:;\"'\u201d)\]]\s*$")
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")
_STEM_MEMO: dict[str, str] = {}
_STEM_MEMO_MAX = 200_000


def _text(hit: Hit) -> str:
    return hit.content if hit.content else hit.snippet


def _stems(words: Sequence[str]) -> list[str]:
    """Snowball stems, memoised: a run sees the same few thousand words on every page.

    Reads go through a local table, so another thread clearing the memo loses
    only cached work.
    """
    table: dict[str, str] = {}
    missing: list[str] = []
    for w in set(words):
        s = _STEM_MEMO.get(w)
        if s is None:
            missing.append(w)
        else:
            table[w] = s
    if missing:
        fresh = dict(zip(missing, stem(missing), strict=True))
        table.update(fresh)
        if len(_STEM_MEMO) + len(fresh) > _STEM_MEMO_MAX:
            _STEM_MEMO.clear()
        _STEM_MEMO.update(fresh)
    return [table[w] for w in words]


def _mattr(stems: Sequence[str], window: int = _WINDOW) -> float:
    """Moving-average type/token ratio: distinct stems per window, averaged over windows."""
    if len(stems) <= window:
        return len(set(stems)) / max(len(stems), 1)
    counts = Counter(stems[:window])
    total = len(counts)
    for new, old in zip(stems[window:], stems, strict=False):
        counts[new] += 1
        counts[old] -= 1
        if not counts[old]:
            del counts[old]
        total += len(counts)
    return total / ((len(stems) - window + 1) * window)


def _is_word(token: str) -> bool:
    # Words only: formula variables ("P ( A ) + P ( B )") and numbers repeat in real text.
    return token not in STOPWORDS and len(token) > 1 and not token.isdigit()


_WH = frozenset("what which who whom whose when where why how".split())  # noqa: SIM905


def _copied_question(question_tokens: Sequence[str], tokens: Sequence[str]) -> int:
    """How many of a question's words, from its first, the text copies verbatim.

    Only for questions that open with a question word: a page that contains the
    question *as a question* was made to rank for it (an encyclopedia paragraph
    may share a long phrase with a question written from it, never its "Which...").
    """
    if not question_tokens or question_tokens[0] not in _WH or not tokens:
        return 0
    best = 0
    first = question_tokens[0]
    for i, t in enumerate(tokens):
        if t != first:
            continue
        n = 0
        while (n < len(question_tokens) and i + n < len(tokens)
               and tokens[i + n] == question_tokens[n]):
            n += 1
        best = max(best, n)
    return best


def _echo(question_stems: frozenset[str], text: str,
          question_tokens: Sequence[str] = ()) -> str:
    """Why a result reads as the question restated with nothing added, or ""."""
    if not question_stems:
        return ""
    tokens = tokenize(text)
    run = _copied_question(question_tokens, tokens[:_ECHO_SCAN])
    if run >= min(_ECHO_RUN, len(question_tokens)):
        return f"copies the question verbatim ({run} words in a row)"
    if len(tokens) < _MIN_WORDS:
        # A short, direct answer restates the question too ("X founded Y in 1863"), but
        # adds names and facts; a snippet that adds (next to) nothing is only an echo.
        stems = content_terms(text)
        novel = set(stems) - question_stems
        if (len(stems) >= _ECHO_MIN_CONTENT and len(novel) <= _ECHO_SNIPPET_NOVEL
                and len(question_stems.intersection(stems)) >= _ECHO_COVER * len(question_stems)):
            return (f"restates the question and adds {len(novel)} word"
                    f"{'' if len(novel) == 1 else 's'} to it")
        return ""
    stems = content_terms(text)
    if len(stems) < _ECHO_MIN_CONTENT:
        return ""
    share = sum(1 for s in stems if s in question_stems) / len(stems)
    cover = len(question_stems.intersection(stems)) / len(question_stems)
    if share >= _ECHO_SHARE and cover >= _ECHO_COVER:
        return (f"restates the question: {share:.0%} of its words are the question's "
                f"({cover:.0%} of them), nothing else to learn from it")
    return ""


def _repeated_phrase(tokens: list[str]) -> str:
    """Why ``tokens`` read as stuffing of some phrase, whatever the question, or ""."""
    if len(tokens) < _PHRASE_MIN_WORDS:
        return ""
    n = _PHRASE_WORDS
    grams = Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    phrase, times = next(((g, c) for g, c in grams.most_common()
                          if not all(w in STOPWORDS for w in g)), ((), 0))
    if times < _PHRASE_REPEATS:
        return ""
    mattr = _mattr(_stems([t for t in tokens if _is_word(t)]))
    if mattr > _PHRASE_MATTR:
        return ""
    return (f"keyword stuffing: \"{' '.join(phrase)}\" {times} times in repetitive text "
            f"(MATTR {mattr:.2f})")


def _stuffed_snippet(question_stems: frozenset[str], tokens: list[str]) -> str:
    """Why a result's short snippet reads as keyword stuffing, or "".

    A real snippet names its subject and goes on about it; a stuffed one
    repeats the question's words in a small vocabulary.
    """
    if len(tokens) >= _MIN_WORDS or not question_stems:
        return ""
    stems = _stems([t for t in tokens if _is_word(t)])
    if len(stems) < _SNIPPET_MIN_CONTENT:
        return ""
    asked = Counter(s for s in stems if s in question_stems)
    share = sum(asked.values()) / len(stems)
    repeated = sum(1 for n in asked.values() if n >= 2)
    distinct = len(set(stems)) / len(stems)
    need = max(2, min(_SNIPPET_REPEATED, len(question_stems) - 1))  # a short question has few
    if share >= _SNIPPET_SHARE and repeated >= need and distinct < _SNIPPET_DISTINCT:
        return (f"keyword stuffing in the snippet: the question's words are {share:.0%} of it, "
                f"{repeated} of them repeated")
    return ""


def _stuffing(question_stems: frozenset[str], tokens: list[str], counts: Counter[str]) -> str:
    """Why ``tokens`` read as keyword stuffing, or "" when they read as prose."""
    if len(tokens) < _MIN_WORDS or not question_stems:
        return ""
    # Cheap bound first: a word stems to a question stem only if it shares its first
    # letters, and most pages have few such words (set and slice work, no stemming).
    # Sound while digits and one-letter tokens are under 40% of the non-function words.
    prefixes = {s[:3] for s in question_stems}
    maybe = sum(counts[w] for w in counts if w[:3] in prefixes)
    n_stop = sum(counts[w] for w in counts.keys() & STOPWORDS)
    if maybe < _GATE_SHARE * (len(tokens) - n_stop):
        return ""
    kinds = [w for w in counts if w not in STOPWORDS and len(w) > 1 and not w.isdigit()]
    n_content = sum(counts[w] for w in kinds)
    if n_content < _MIN_CONTENT:
        return ""
    asked = sum(counts[w] for w, s in zip(kinds, _stems(kinds), strict=True)
                if s in question_stems)
    q_share = asked / n_content
    if q_share < min(_STUFFED_SHARE, _LIST_SHARE):
        return ""
    mattr = _mattr(_stems([t for t in tokens if _is_word(t)]))
    if mattr <= _STUFFED_MATTR and q_share >= _STUFFED_SHARE:
        return (f"keyword stuffing: the question's words, over and over, are {q_share:.0%} "
                "of the text")
    function_share = n_stop / len(tokens)
    if (function_share < _LIST_FUNCTION_SHARE and q_share >= _LIST_SHARE
            and mattr <= _LIST_MATTR):
        return (f"keyword list: {function_share:.0%} function words, "
                f"the question's words are {q_share:.0%}")
    return ""


def _cues(line: str, words: list[str], anchors: frozenset[str]) -> set[str]:
    """The banner phrases in ``line`` (tokenised as ``words``) whose anchor the page has."""
    found: set[str] = {"\u00a9"} if "\u00a9" in line else set()
    present = anchors.intersection(words)
    if present:
        padded = " " + " ".join(words) + " "
        found.update(p for a in present for p in _CUE_PHRASES[a] if f" {p} " in padded)
    return found


def _boilerplate(text: str, n_words: int, counts: Counter[str]) -> str:
    """Why ``text`` reads as a page of navigation and banners, or "".

    Short lines count as navigation only when they hold a navigation word or a
    banner phrase, so headings and table cells ("Population", "12,345") are
    neither prose nor boilerplate: a data page is not a content farm.
    """
    if n_words < _BOILER_MIN_WORDS:
        return ""
    anchors = frozenset(a for a in _CUE_PHRASES if a in counts)
    if not anchors and "\n" not in text.strip():
        return ""  # one block of text with no banner word: prose or nothing
    boiler = 0
    signals: set[str] = set()
    long_lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        n = len(line.split())
        pieces = _SEPARATORS.split(line) if n <= 40 else [line]
        if len(pieces) >= 3 and all(len(p.split()) <= 4 for p in pieces):
            words = tokenize(line)  # "Home | News | Sport": a menu or breadcrumbs
            boiler += len(words)
            signals.update(_NAV_WORDS.intersection(words))
            continue
        if n <= _NAV_LINE_WORDS and not _TERMINAL.search(line):
            words = tokenize(line)
            found = _cues(line, words, anchors) | _NAV_WORDS.intersection(words)
            if found:  # link text, menu entries; a heading or a table cell has none
                boiler += len(words)
                signals |= found
            continue
        # Long lines: only sentences holding an anchor as a substring are tokenised.
        present = [a for a in anchors if a in line.lower()]
        if not present:
            long_lines.append(line)
            continue
        for sentence in (line[s:e] for s, e in split_sentences(line)):
            low = sentence.lower()
            found = (_cues(sentence, tokenize(sentence), anchors)
                     if any(a in low for a in present) else set())
            if found:  # "We use cookies to ...", "Subscribe to our newsletter"
                boiler += len(sentence.split())
                signals |= found
            else:
                long_lines.append(sentence)
    boiler_share = boiler / n_words
    if boiler_share < _BOILER_SHARE or len(signals) < _BOILER_SIGNALS:
        return ""
    prose = 0
    for line in long_lines:
        words = line.lower().split()
        if (len(words) >= _PROSE_SENTENCE_WORDS
                and sum(w in STOPWORDS for w in words) >= 0.2 * len(words)):
            prose += len(words)
    prose_share = prose / n_words
    if prose_share >= _PROSE_MAX:
        return ""
    return (f"boilerplate: {boiler_share:.0%} navigation, link or banner text and "
            f"{prose_share:.0%} sentences")




def _names_and_numbers(text: str) -> tuple[set[str], set[str]]:
    return set(CAPITALISED_NAME.findall(text)), set(_NUMBERS.findall(text))


def _mirror_groups(texts: Sequence[str], n_words: Sequence[int], hosts: Sequence[str],
                   max_distance: int, min_hosts: int) -> list[list[int]]:
    """Indices of results sharing near-identical text on at least ``min_hosts`` hosts."""
    idx = [i for i, n in enumerate(n_words) if n >= _MIRROR_MIN_WORDS]
    if len({hosts[i] for i in idx}) < min_hosts:
        return []
    fps = simhash64(texts[i] for i in idx)
    near = hamming(fps[:, None], fps[None, :]) <= max_distance
    parent = list(range(len(idx)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    keys: dict[int, tuple[set[str], set[str]]] = {}

    def key(k: int) -> tuple[set[str], set[str]]:
        if k not in keys:
            keys[k] = _names_and_numbers(texts[idx[k]])
        return keys[k]

    def same_text(a: int, b: int) -> bool:
        # Near-identical by SimHash *and* by names and numbers: templated pages differ there.
        ka, kb = key(a), key(b)
        return (jaccard(ka[0], kb[0]) >= _MIRROR_NAMES
                and jaccard(ka[1], kb[1]) >= _MIRROR_NUMBERS)

    for a, b in zip(*np.nonzero(np.triu(near, 1)), strict=True):
        ra, rb = find(int(a)), find(int(b))
        if ra != rb and same_text(int(a), int(b)):
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for k, i in enumerate(idx):
        groups.setdefault(find(k), []).append(i)
    return [g for g in groups.values() if len({hosts[i] for i in g}) >= min_hosts]


def spam_flags(
    question: str,
    hits: Sequence[Hit],
    *,
    credibility: Callable[[str], float | None] | None = None,
    mirror_distance: int = _MIRROR_DISTANCE,
    mirror_hosts: int = _MIRROR_HOSTS,
) -> SpamVerdict:
    """Flag keyword-stuffed, boilerplate and mirrored results among one search's ``hits``.

    ``hits`` are taken best-ranked first. Of a mirrored text the copy kept is
    the most credible one by ``credibility`` (a URL's weight, e.g.
    ``Credibility.for_url``; unknown counts 1.0), ties going to the best
    ranked, so without weights the first copy is kept; spam copies are never
    kept. A page both stuffed and mirrored is reported as spam.

    Args:
        question: the user's question (its words are what stuffing repeats).
        hits: the search's results, best first.
        credibility: URL -> weight, to choose which mirror copy to keep.
        mirror_distance: SimHash bits within which two texts are the same text.
        mirror_hosts: how many distinct hosts make a text mirrored.
    """
    question_stems = frozenset(content_terms(question))
    question_tokens = tokenize(question)
    hosts = [url_host(h.url) for h in hits]
    texts = [_text(h) for h in hits]
    n_words: list[int] = []
    reasons: dict[int, tuple[SpamKind, str]] = {}
    for i, text in enumerate(texts):
        tokens = tokenize(text)
        counts = Counter(tokens)
        n_words.append(len(tokens))
        why = (_stuffing(question_stems, tokens, counts)
               or _stuffed_snippet(question_stems, tokens))
        if why:
            reasons[i] = ("stuffing", why)
            continue
        why = _echo(question_stems, text, question_tokens)
        if why:
            reasons[i] = ("echo", why)
            continue
        why = _repeated_phrase(tokens)
        if why:
            reasons[i] = ("stuffing", why)
            continue
        why = _boilerplate(text, len(tokens), counts)
        if why:
            reasons[i] = ("boilerplate", why)

    def weight(i: int) -> float:
        w = credibility(hits[i].url) if credibility is not None else None
        return 1.0 if w is None else w

    originals: dict[int, int] = {}
    for group in _mirror_groups(texts, n_words, hosts, mirror_distance, mirror_hosts):
        candidates = [i for i in group if i not in reasons]
        if candidates:
            keep = max(candidates, key=lambda i: (weight(i), -i))
            originals.update((i, keep) for i in candidates if i != keep)
    flagged: list[FlaggedHit] = []
    seen: set[str] = set()
    for i, hit in enumerate(hits):
        if hit.url in seen:
            continue
        if i in reasons:
            kind, why = reasons[i]
            flagged.append(FlaggedHit(hit.url, hosts[i], kind, why))
        elif i in originals:
            keep = originals[i]
            flagged.append(FlaggedHit(
                hit.url, hosts[i], "mirror",
                f"the same text as {hosts[keep] or hits[keep].url} (kept)", hits[keep].url))
        else:
            continue
        seen.add(hit.url)
    clean_hosts = {hosts[i] for i in range(len(hits)) if i not in reasons}
    bad_hosts = tuple(dict.fromkeys(hosts[i] for i in sorted(reasons)
                                    if hosts[i] and hosts[i] not in clean_hosts))
    return SpamVerdict(tuple(flagged), bad_hosts)


_PARTIAL_DATE = re.compile(r"(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?")


def _published(value: str | None) -> dt.date | None:
    """The latest day a ``published_at`` can mean ("2021" -> 2021-12-31), None if unusable."""
    if not value:
        return None
    m = _PARTIAL_DATE.match(value.strip())
    if m is None:
        return None
    try:
        year = int(m.group(1))
        if m.group(3):
            return dt.date(year, int(m.group(2)), int(m.group(3)))
        if m.group(2):
            month = int(m.group(2))
            first_next = dt.date(year + month // 12, month % 12 + 1, 1)
            return first_next - dt.timedelta(days=1)
        return dt.date(year, 12, 31)
    except ValueError:
        return None


def stale_flag(
    question: str,
    hits: Sequence[Hit],
    today: dt.date,
    *,
    recent_days: int = DEFAULT_RECENT_DAYS,
) -> StaleVerdict | None:
    """A verdict when every dated hit is older than the period ``question`` asks about.

    None when the question asks about no period with a start (timeless, or
    "before 2015"), when that start is after ``today``, when no hit has a
    usable ``published_at``, or when any dated hit is recent enough. Undated
    hits count neither way: most providers leave the date out, and an unknown
    date is not evidence of age. A partial date ("2021-06") counts as its last
    day, so a hit is only called old when it surely is.

    Args:
        question: the user's question.
        hits: the search's results.
        today: the date the question is asked on.
        recent_days: the window of "latest" / "current" with no range said.
    """
    period = asked_period(question, today, recent_days=recent_days)
    if period is None or period.date_from is None or period.date_from > today:
        return None
    dated: list[tuple[str, dt.date]] = []
    undated = 0
    for hit in hits:
        day = _published(hit.published_at)
        if day is None:
            undated += 1
        elif day >= period.date_from:
            return None
        else:
            dated.append((hit.url, day))
    if not dated:
        return None
    newest = max(day for _, day in dated)
    start = period.date_from.isoformat()
    skipped = f", {undated} undated not counted" if undated else ""
    reason = (f"every dated result ({len(dated)}{skipped}) is older than the period asked "
              f"about ('{period.phrase}', from {start}); the newest is from {newest.isoformat()}")
    return StaleVerdict(period, SearchFilters(date_from=start),
                        tuple(dict.fromkeys(url for url, _ in dated)), newest, undated, reason)
