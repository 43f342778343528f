"""Source credibility: the table's lookups, its place in the rerank score, and its config."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.models import HashingEmbedder
from actors.providers import CredibilitySettings, ProviderNotConfigured, load_search_config
from actors.rerank import DEFAULT_DOMAIN_WEIGHTS, Credibility, Reranker
from streams import EvidenceChunk

FLOOR = 0.15  # HashingEmbedder's scale

TEXT = "Aspirin lowers fever by blocking prostaglandin synthesis in the hypothalamus."
QUERY = "how does aspirin lower fever"


def chunk(cid: str, text: str = TEXT, *, url: str = "", source: str = "",
          score: float | None = None) -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text, doc_id=cid, url=url, source=source, score=score)


# --- the table ------------------------------------------------------------------------


def test_unlisted_sources_weigh_one_and_an_empty_table_is_neutral() -> None:
    table = Credibility()
    assert table.neutral and table.weight(chunk("a", url="https://anything.example/x")) == 1.0
    assert table.weight(chunk("b")) == 1.0  # no URL, no collection


def test_bare_domains_match_subdomains_and_globs_match_hosts() -> None:
    table = Credibility({"docs.python.org": 1.5, "*.gov": 1.3, "example.com": 0.5})
    assert table.for_url("https://docs.python.org/3/library/") == 1.5
    assert table.for_url("https://www.example.com/page") == 0.5
    assert table.for_url("https://notexample.com/") is None  # not a subdomain
    assert table.for_url("https://data.census.gov/table") == 1.3
    assert table.for_url("https://gov.example.org/") is None
    assert table.for_url("not a url") is None and table.for_domain("") is None


def test_the_most_specific_pattern_wins() -> None:
    table = Credibility({"*.gov": 1.3, "spam.agency.gov": 0.5})
    assert table.for_domain("spam.agency.gov") == 0.5
    assert table.for_domain("other.agency.gov") == 1.3


def test_a_local_chunk_takes_its_collections_weight_before_its_domain() -> None:
    table = Credibility({"docs.python.org": 1.5}, {"handbook": 1.2})
    assert table.weight(chunk("a", source="local:handbook",
                              url="https://docs.python.org/x")) == 1.2
    assert table.weight(chunk("b", source="local:other", url="https://docs.python.org/x")) == 1.5
    assert table.weight(chunk("c", source="handbook")) == 1.0  # a web provider's name


def test_defaults_raise_primary_sources_and_lower_content_farms() -> None:
    table = Credibility.defaults()
    assert not table.neutral
    assert table.for_url("https://www.irs.gov/forms") == 1.3
    assert table.for_url("https://docs.python.org/3/") == 1.5
    assert table.for_url("https://www.ehow.com/how_123") == 0.5
    assert table.for_url("https://en.wikipedia.org/wiki/X") == 1.1
    assert all(0.1 <= w <= 10 for w in DEFAULT_DOMAIN_WEIGHTS.values())


def test_merged_overrides_and_adds_without_changing_the_original() -> None:
    base = Credibility.defaults()
    mine = base.merged(domains={"ehow.com": 0.9, "my.example": 2.0}, collections={"c": 1.1})
    assert mine.for_domain("ehow.com") == 0.9 and mine.for_domain("my.example") == 2.0
    assert mine.for_collection("c") == 1.1
    assert base.for_domain("ehow.com") == 0.5 and base.for_domain("my.example") is None


@pytest.mark.parametrize("weight", [0.0, -1.0, 11.0, float("nan"), float("inf")])
def test_weights_out_of_range_are_refused(weight: float) -> None:
    with pytest.raises(ValueError, match="credibility"):
        Credibility({"example.com": weight})


# --- in the rerank score ----------------------------------------------------------------


def test_a_gov_page_outranks_an_equal_content_farm_page() -> None:
    # the farm comes first in fusion order, so without credibility it wins on the prior
    cands = [chunk("farm", url="https://www.ehow.com/aspirin", score=2.0),
             chunk("gov", url="https://www.fda.gov/aspirin", score=1.0)]
    plain = Reranker(HashingEmbedder(), floor=FLOOR).rerank(QUERY, cands, 2)
    assert [c.id for c in plain.chunks] == ["farm", "gov"]
    weighed = Reranker(HashingEmbedder(), floor=FLOOR,
                       credibility=Credibility.defaults()).rerank(QUERY, cands, 2)
    assert [c.id for c in weighed.chunks] == ["gov", "farm"]
    assert [s.credibility for s in weighed.scored] == [1.3, 0.5]
    # relevance (and so the floor) is untouched; only the final score moves
    assert [s.relevance for s in weighed.all_scored] == [s.relevance for s in plain.all_scored]


def test_all_weights_one_leaves_order_and_scores_unchanged() -> None:
    texts = [TEXT, "Fever reduction with aspirin works through prostaglandin inhibition.",
             "Aspirin is an old drug.", "The violin has four strings tuned in perfect fifths."]
    cands = [chunk(f"c{i}", t, url=f"https://site{i}.gov/p", score=float(10 - i))
             for i, t in enumerate(texts)]
    ones = Credibility({"*.gov": 1.0, "site1.gov": 1.0})
    plain = Reranker(HashingEmbedder(), floor=FLOOR).rerank(QUERY, cands, 4)
    neutral = Reranker(HashingEmbedder(), floor=FLOOR, credibility=ones).rerank(QUERY, cands, 4)
    assert [c.id for c in neutral.chunks] == [c.id for c in plain.chunks]
    assert [c.score for c in neutral.chunks] == [c.score for c in plain.chunks]


def test_credibility_never_rescues_a_passage_below_the_floor() -> None:
    cands = [chunk("off", "The violin has four strings tuned in perfect fifths.",
                   url="https://docs.python.org/x")]
    result = Reranker(HashingEmbedder(), floor=FLOOR,
                      credibility=Credibility({"docs.python.org": 10.0})).rerank(QUERY, cands, 1)
    assert result.chunks == () and result.below_floor == 1


# --- in the search config -------------------------------------------------------------------


def test_credibility_table_in_the_search_toml(tmp_path: Path) -> None:
    path = tmp_path / "search.toml"
    path.write_text('[credibility]\ndomains = {"example.com" = 0.5, "*.gov" = 1.4}\n'
                    'collections = {"handbook" = 1.3}\n')
    settings = load_search_config(path, env={}).tenant().credibility
    assert settings.domains == {"example.com": 0.5, "*.gov": 1.4}
    assert settings.collections == {"handbook": 1.3} and settings.defaults
    assert load_search_config(None, env={}).tenants == {}
    assert CredibilitySettings().domains == {} and CredibilitySettings().defaults


@pytest.mark.parametrize("table", ['domains = {"example.com" = 0}', 'domain = {"a.b" = 1.0}',
                                   'domains = {"example.com" = 12.0}'])
def test_a_bad_credibility_table_fails_at_load(tmp_path: Path, table: str) -> None:
    path = tmp_path / "search.toml"
    path.write_text(f"[credibility]\n{table}\n")
    with pytest.raises(ProviderNotConfigured, match="credibility"):
        load_search_config(path, env={})
