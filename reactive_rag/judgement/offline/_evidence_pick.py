"""Choosing the evidence to answer from, including a multi-hop question's second hop.

Kept apart from the planner: the machine's ``CHOOSING`` phase calls it through
the selector actor, and the planner only ranks with its own coverage score.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from actors.text import content_terms, url_host
from streams import EvidenceChunk

from ._loop_guard import normalize_query

__all__ = ["PoolScorer", "mentions", "named_hops", "select_evidence", "title_keys"]


class PoolScorer:
    """BM25 over the evidence pool itself: rare terms in the pool weigh more.

    Titles count twice (a passage *about* the query's entity beats one that
    mentions it in passing).
    """

    def __init__(self, evidence: Sequence[EvidenceChunk]) -> None:
        self.docs: list[Counter[str]] = []
        df: Counter[str] = Counter()
        for c in evidence:
            tf = Counter(content_terms(c.text))
            for t in content_terms(c.title):
                tf[t] += 2
            self.docs.append(tf)
            df.update(tf.keys())
        n = max(1, len(evidence))
        self.idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.avg = sum(sum(d.values()) for d in self.docs) / n if self.docs else 1.0

    def scores(self, query: str) -> list[float]:
        terms = set(content_terms(query))
        out: list[float] = []
        for tf in self.docs:
            length = sum(tf.values()) or 1
            s = 0.0
            for t in terms:
                f = tf.get(t, 0)
                if f:
                    s += self.idf[t] * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * length / self.avg))
            out.append(s)
        return out


_PAREN = re.compile(r"\s*\([^)]*\)\s*$")
# A page's <title> often ends in its site's name: "EFL Cup - SimWiki", "X | Site".
_SITE_SUFFIX = re.compile(r"\s+[-|\u2013\u2014\u00b7]\s+[^-|\u2013\u2014\u00b7]+$")


def title_keys(title: str) -> tuple[str, ...]:
    """How text would mention a page: "Winner (band)" -> "winner";
    "Summerlin, Nevada" -> "summerlin nevada" or "summerlin"; "EFL Cup - SimWiki"
    (a page title with its site's name) -> also "efl cup"."""
    named = _SITE_SUFFIX.sub("", title)
    if named != title and len(normalize_query(named)) > 2:
        return tuple(dict.fromkeys((*title_keys(named), *_keys(title))))
    return _keys(title)


def _keys(title: str) -> tuple[str, ...]:
    base = _PAREN.sub("", title)
    keys = [normalize_query(base)]
    head = base.split(",")[0]
    if head != base and len(normalize_query(head)) > 3:
        keys.append(normalize_query(head))
    return tuple(k for k in keys if len(k) > 2)


def mentions(text_norm: str, keys: Sequence[str]) -> bool:
    padded = f" {text_norm} "
    return any(f" {k} " in padded for k in keys)


def named_hops(shortlist: Sequence[EvidenceChunk],
               others: Sequence[EvidenceChunk]) -> list[EvidenceChunk]:
    """The chunks of ``others`` whose title a ``shortlist`` chunk names (in order).

    A multi-hop question's second passage rarely shares the question's words,
    so a rerank against the question drops it; the first passage naming its
    title is what links it to the question.
    """
    text = normalize_query(" ".join(c.text for c in shortlist))
    if not text:
        return []
    return [c for c in others if c.title and mentions(text, title_keys(c.title))]


def select_evidence(
    question: str,
    evidence: Sequence[EvidenceChunk],
    queries: Sequence[str] = (),
    *,
    k: int = 5,
    weights: tuple[float, float, float] = (0.6, 1.0, 1.0),
    n_heads: int = 3,
    ranked: int = 0,
    rank_weight: float = 1.0,
) -> list[EvidenceChunk]:
    """Pick ``k`` chunks that answer the question, including its second hop.

    Ranking everything against the question alone throws away the second hop
    (its passage rarely shares the question's words). So a chunk scores by:
    its match to the question (BM25 over the evidence pool), whether its title
    is named in the question, whether its title is *named in one of the best
    question matches* (the link a multi-hop question follows), its best
    match to any follow-up query, and its place in the final rerank: the first
    ``ranked`` chunks of ``evidence`` are the rerank's shortlist in its order
    (it weighs the question's meaning, not only its words), and the chunk at
    place ``i`` gains ``rank_weight / (1 + i)``; without it a reworded
    question's answer ("keep settings between runs" for ``shelve``) loses to
    passages that share more of the asker's words. ``evidence`` order breaks
    ties. ``weights`` are those of the follow-up match, the title named in the
    question and the link from a top match.

    A chunk whose words a better chunk already holds (a mirror of a page on
    another host, a snippet of a page read whole) takes a place only when no
    other chunk is left: a copy adds nothing for the writer and would push out
    the second hop. Of two copies, the one from the host most of ``evidence``
    comes from is kept (a mirror site copies a few pages of a big one). A
    passage whose text only repeats its title (a disambiguation stub) comes
    last: it holds nothing to answer from, yet its words would make the real
    page look like its copy.
    """
    w_follow, w_title, w_link = weights
    if k <= 0 or not evidence:
        return []
    scorer = PoolScorer(evidence)
    n = len(evidence)

    def normed(q: str) -> list[float]:
        sc = scorer.scores(q)
        top = max(sc) if sc else 0.0
        return [x / top if top > 0 else 0.0 for x in sc]

    qs = normed(question)
    q_norm = normalize_query(question)
    texts = [normalize_query(c.text) for c in evidence]
    titles = [title_keys(c.title) if c.title else () for c in evidence]
    follow = [0.0] * n
    seen_q = {q_norm}
    for q in queries:
        key = normalize_query(q)
        if not key or key in seen_q:
            continue
        seen_q.add(key)
        for i, x in enumerate(normed(q)):
            follow[i] = max(follow[i], x)
    heads = sorted(range(n), key=lambda i: (-qs[i], i))[:n_heads]
    score: list[float] = []
    for i in range(n):
        s = qs[i] + w_follow * follow[i]
        if i < ranked:
            s += rank_weight / (1.0 + i)
        if mentions(q_norm, titles[i]):
            s += w_title
        link = max((qs[h] for h in heads if h != i and mentions(texts[h], titles[i])), default=0.0)
        s += w_link * link
        score.append(s)
    order = sorted(range(n), key=lambda i: (-score[i], i))
    # Of copies on several hosts, the one on the host most of the pool comes from
    # (a mirror site copies a few pages of a big one) takes the place.
    hosts = [url_host(c.url) if c.url else "" for c in evidence]
    per_host = Counter(hosts)
    picked: list[int] = []
    copies: list[int] = []
    stubs: list[int] = []
    held: list[frozenset[str]] = []
    for i in order:
        words = frozenset(content_terms(evidence[i].text))
        if words <= frozenset(content_terms(evidence[i].title)):
            stubs.append(i)  # its text only repeats its title: nothing to answer from
            continue
        twin = next((j for j, h in enumerate(held) if _copied(words, h)), None)
        if twin is None:
            picked.append(i)
            held.append(words)
        elif per_host[hosts[i]] > per_host[hosts[picked[twin]]]:
            copies.append(picked[twin])
            picked[twin] = i
        else:
            copies.append(i)
    picked = picked[:k]
    picked.extend(copies[: k - len(picked)])  # copies only take places nothing else wants
    picked.extend(stubs[: k - len(picked)])
    return [evidence[i] for i in picked]


def _copied(a: frozenset[str], b: frozenset[str], share: float = 0.8) -> bool:
    """One text's content words are (nearly) all in the other's: a copy, or a part of it."""
    if not a or not b:
        return False
    return len(a & b) >= share * min(len(a), len(b))
