"""Text utilities shared by the scraper, the searcher, the corpus index and the reranker:
markup cleaning, sentence-aware chunking, SimHash near-duplicate detection, URL
normalisation, keyword helpers and the time period a question asks about. Pure Python +
numpy; no models.
"""

from ._chunking import CHUNKING_VERSION, TextChunk, chunk_text, split_sentences
from ._keywords import (
    ABBREVIATIONS,
    CAPITALISED_NAME,
    CJK,
    CJK_STOPWORDS,
    DEMONYMS,
    NEGATIONS,
    STOPWORDS,
    content_terms,
    jaccard,
    keyword_coverage,
    stem,
    tokenize,
)
from ._language import CJK_RUN, cjk_ngrams, is_cjk_text, segment_cjk, text_language
from ._markup import CLEAN_MARKUP_VERSION, clean_markup, looks_like_code
from ._periods import (
    DEFAULT_RECENT_DAYS,
    AskedPeriod,
    DateMention,
    asked_period,
    date_mentions,
    is_time_sensitive,
)
from ._simhash import DedupResult, NearDuplicateIndex, dedup_chunks, hamming, simhash64
from ._urls import TRACKING_PARAMS, TRACKING_PREFIXES, normalize_url, url_host, url_key

__all__ = [
    "ABBREVIATIONS",
    "CAPITALISED_NAME",
    "CHUNKING_VERSION",
    "CJK",
    "CJK_RUN",
    "CJK_STOPWORDS",
    "CLEAN_MARKUP_VERSION",
    "DEFAULT_RECENT_DAYS",
    "DEMONYMS",
    "NEGATIONS",
    "STOPWORDS",
    "TRACKING_PARAMS",
    "TRACKING_PREFIXES",
    "AskedPeriod",
    "DateMention",
    "DedupResult",
    "NearDuplicateIndex",
    "TextChunk",
    "asked_period",
    "chunk_text",
    "cjk_ngrams",
    "clean_markup",
    "content_terms",
    "date_mentions",
    "dedup_chunks",
    "hamming",
    "is_cjk_text",
    "is_time_sensitive",
    "jaccard",
    "keyword_coverage",
    "looks_like_code",
    "normalize_url",
    "segment_cjk",
    "simhash64",
    "split_sentences",
    "stem",
    "text_language",
    "tokenize",
    "url_host",
    "url_key",
]
