"""Soft failures of a search: stuffed and boilerplate pages flagged as spam, mirrored text kept
once, stale results noticed only when every dated result predates the period asked about.

The pages are written here by hand about made-up subjects: encyclopedic paragraphs (one
naming its subject five times), pages stuffed with the question's words, a content farm
made of menus and banners, and one paragraph copied to several hosts with small edits.
"""

from __future__ import annotations

import datetime as dt

import pytest

from reactive_rag.judgement.offline._soft_failures import SpamVerdict, spam_flags, stale_flag
from streams import Hit

QUESTION = "How deep is Lake Orvelle?"

# Encyclopedic paragraphs about the question's subject: never spam.
LAKE = (
    "Lake Orvelle is a freshwater lake in the Tarsk highlands, fed by three glacial streams "
    "and drained by the river Venn. Lake Orvelle reaches a depth of 212 metres near its "
    "northern shore, which makes it the deepest lake in the region. The first survey of Lake "
    "Orvelle was carried out in 1874 by a team of surveyors who lowered weighted lines "
    "through the winter ice. Fishing villages grew up along the southern shore, and today "
    "Lake Orvelle supplies drinking water to the nearby towns. In summer the surface of Lake "
    "Orvelle warms quickly, but below forty metres the water stays close to four degrees "
    "all year."
)
GEOLOGY = (
    "The basin that holds the lake was carved by a glacier during the last ice age. As the "
    "ice retreated it left a moraine across the southern end of the valley, and the "
    "meltwater trapped behind it formed a long, narrow lake. Sediment cores taken from the "
    "deepest part of the basin record about twelve thousand years of layered clay, each "
    "pale summer layer followed by a dark winter one. Geologists use these layers to date "
    "changes in the climate of the highlands, and they show that the lake was once much "
    "larger than it is now."
)
ECOLOGY = (
    "Orvelle char, a small cold-water fish, lives only in the deep basin of the lake and "
    "spawns on gravel beds in late autumn. Its numbers fell sharply when perch were "
    "introduced for anglers, but a breeding programme and a ban on live bait have helped "
    "the population recover. Divers who studied the lake bed describe a steep rocky slope "
    "on the western side and soft mud in the centre, where oxygen is scarce and few animals "
    "survive. The water is clear enough that sunlight reaches down about fifteen metres."
)
TRAVEL = (
    "Visitors reach the lake by the old mountain road from Tarsk or by the summer ferry "
    "that crosses from Venmouth twice a day. The walking trail around the shore is about "
    "thirty kilometres long and passes two mountain huts, a ruined watchtower and the pier "
    "where the depth soundings of the first survey began. Swimming is allowed at the "
    "southern beaches, although the water is cold even in August, and boats with engines "
    "are banned to protect the fish that spawn in the shallows."
)

# Pages stuffed with the question's words, in three styles.
STUFFED_REPEAT = (
    "lake orvelle depth lake orvelle deep how deep is lake orvelle lake orvelle depth chart "
    "lake orvelle deep lake orvelle depth 2024 best lake orvelle tours lake orvelle depth map "
    "cheap lake orvelle hotels lake orvelle deep water lake orvelle depth facts lake orvelle "
    "depth meters lake orvelle deep lake orvelle depth review lake orvelle depth today"
)
STUFFED_PROSE = (
    "How deep is Lake Orvelle? If you want to know how deep Lake Orvelle is, our Lake Orvelle "
    "depth guide tells you how deep Lake Orvelle is. Lake Orvelle depth is the depth of Lake "
    "Orvelle. The deep Lake Orvelle is deep, and the Lake Orvelle depth makes Lake Orvelle a "
    "deep lake. Book Lake Orvelle tours to see how deep Lake Orvelle is. Lake Orvelle depth, "
    "Lake Orvelle deep, how deep Lake Orvelle: all about how deep Lake Orvelle is."
)
STUFFED_TAGS = (
    "Tags: lake orvelle, orvelle depth, deep lake, lake depth, orvelle lake, how deep orvelle, "
    "lake orvelle depth, orvelle deep, deepest lake, lake orvelle facts, orvelle lake deep, "
    "lake orvelle map, orvelle depth chart, lake orvelle 2024, deep orvelle, orvelle lake "
    "depth, lake orvelle tours, orvelle lake facts, lake orvelle hotels, depth orvelle"
)

CONTENT_FARM = """Skip to content
Home | News | Travel | Lakes | Shop | Contact
Sign in
Subscribe
We use cookies to improve your experience. Accept all
Lake Orvelle
Lake Orvelle is deep.
Share on Facebook
Tweet
Pin it
Related posts
Top 10 lakes
Best lake hotels
Cheap ferry tickets
Read more
Trending
Advertisement
Subscribe to our newsletter for the latest deals
Leave a comment
Privacy policy | Terms of use | Sitemap | Careers
Copyright 2024 All rights reserved"""

# A real article as a scraper keeps it: a little navigation around a lot of prose.
ARTICLE_WITH_CHROME = "Home | News | Travel | Contact\nSign in\n\n" + LAKE + "\n\n" + GEOLOGY + (
    "\n\nShare on Facebook\nPrivacy policy | Terms of use")

# A data page: short lines, but no navigation or banners.
DATA_PAGE = """Lake Orvelle
Surface area
48 square kilometres
Maximum depth
212 metres
Mean depth
97 metres
Elevation
1,204 metres
Inflows
Three glacial streams
Outflow
River Venn
Frozen
December to March
First survey
1874
Catchment
310 square kilometres
Shore length
30 kilometres
Settlements
Venmouth, Orvelby, Tarsk Bridge"""

# One paragraph copied to other hosts with small edits (a word changed, a by-line added).
MIRROR_ORIGINAL = LAKE + " " + GEOLOGY
MIRROR_COPY_1 = (MIRROR_ORIGINAL.replace("freshwater lake", "fresh water lake")
                 .replace("quickly", "fast").replace("long, narrow", "narrow"))
MIRROR_COPY_2 = "By staff writers. " + (
    MIRROR_ORIGINAL.replace("nearby towns", "surrounding towns")
    .replace("grew up", "were built").replace("much larger", "far larger")) + " Source: archive."


def _hit(url: str, text: str | None = None, *, snippet: str = "",
         published: str | None = None) -> Hit:
    return Hit(url=url, title="Lake Orvelle", snippet=snippet, content=text,
               published_at=published)


def _encyclopedic() -> list[Hit]:
    return [_hit("https://encyclopedia.example/wiki/Lake_Orvelle", LAKE),
            _hit("https://geo.example/orvelle-basin", GEOLOGY),
            _hit("https://nature.example/char", ECOLOGY),
            _hit("https://visit.example/orvelle", TRAVEL)]


# --- spam -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [STUFFED_REPEAT, STUFFED_PROSE, STUFFED_TAGS],
                         ids=["repeated-keywords", "stuffed-prose", "tag-list"])
def test_pages_stuffed_with_the_question_words_are_spam(text: str) -> None:
    hits = [*_encyclopedic(), _hit("https://orvelle-deals.example/depth", text)]
    verdict = spam_flags(QUESTION, hits)
    assert verdict.urls == ("https://orvelle-deals.example/depth",)
    (flag,) = verdict.spam
    assert flag.kind == "stuffing" and "keyword" in flag.reason
    assert verdict.hosts == ("orvelle-deals.example",)
    assert "orvelle-deals.example" in verdict.reason and "spam" in verdict.reason


def test_encyclopedic_paragraphs_about_the_question_are_not_spam() -> None:
    # LAKE names its subject five times and answers the question: natural density.
    assert LAKE.count("Lake Orvelle") == 5
    verdict = spam_flags(QUESTION, _encyclopedic())
    assert verdict.flagged == ()
    assert verdict.reason == "" and verdict.hosts == ()


@pytest.mark.parametrize("question", [
    "What is Lake Orvelle?",
    "Lake Orvelle depth",
    "Is Lake Orvelle the deepest lake in the Tarsk highlands?",
    "When was the first survey of Lake Orvelle, and how deep did it find the lake?",
])
def test_topic_paragraphs_stay_clean_whatever_the_wording_of_the_question(question: str) -> None:
    assert spam_flags(question, _encyclopedic()).flagged == ()


def test_a_stuffed_snippet_is_flagged_and_an_ordinary_short_one_is_not() -> None:
    stuffed = _hit("https://orvelle-deals.example/x", None,
                   snippet="lake orvelle depth lake orvelle deep lake orvelle depth best price")
    plain = _hit("https://atlas.example/orvelle", None,
                 snippet="Lake Orvelle is a freshwater lake in the Tarsk highlands, fed by "
                         "three glacial streams")
    verdict = spam_flags(QUESTION, [stuffed, plain])
    assert verdict.urls == ("https://orvelle-deals.example/x",)


def test_a_page_that_only_restates_the_question_is_flagged_as_an_echo() -> None:
    question = "Which glacial streams feed Lake Orvelle in the Tarsk highlands?"
    farm = _hit("https://answers-farm.example/q", (
        f"{question} Looking for glacial streams that feed Lake Orvelle? Our experts answered "
        f"which glacial streams feed Lake Orvelle in the Tarsk highlands and more questions. "
        f"{question} Click here for the streams of Lake Orvelle."))
    article = _hit("https://atlas.example/orvelle", LAKE)
    verdict = spam_flags(question, [farm, article])
    assert [(f.url, f.kind) for f in verdict.flagged] == [("https://answers-farm.example/q",
                                                          "echo")]


def test_content_is_judged_when_present_else_the_snippet() -> None:
    clean_snippet_stuffed_page = _hit("https://a.example/1", STUFFED_PROSE,
                                      snippet="Lake Orvelle is a freshwater lake.")
    stuffed_snippet_only = _hit("https://b.example/2", None, snippet=STUFFED_REPEAT)
    clean_page_stuffed_snippet = _hit("https://c.example/3", LAKE, snippet=STUFFED_REPEAT)
    verdict = spam_flags(QUESTION, [clean_snippet_stuffed_page, stuffed_snippet_only,
                                    clean_page_stuffed_snippet])
    assert verdict.urls == ("https://a.example/1", "https://b.example/2")


def test_a_content_farm_of_menus_and_banners_is_spam() -> None:
    hits = [*_encyclopedic(), _hit("https://lakes-today.example/orvelle", CONTENT_FARM)]
    verdict = spam_flags(QUESTION, hits)
    (flag,) = verdict.spam
    assert flag.url == "https://lakes-today.example/orvelle"
    assert flag.kind == "boilerplate" and "navigation" in flag.reason


def test_an_article_with_some_navigation_and_a_data_page_are_not_spam() -> None:
    hits = [_hit("https://encyclopedia.example/a", ARTICLE_WITH_CHROME),
            _hit("https://data.example/orvelle", DATA_PAGE)]
    assert spam_flags(QUESTION, hits).flagged == ()


def test_a_host_is_offered_for_exclusion_only_when_none_of_its_results_is_clean() -> None:
    hits = [_hit("https://big.example/good", LAKE),
            _hit("https://big.example/bad", STUFFED_PROSE),
            _hit("https://farm.example/bad", STUFFED_REPEAT)]
    verdict = spam_flags(QUESTION, hits)
    assert set(verdict.urls) == {"https://big.example/bad", "https://farm.example/bad"}
    assert verdict.hosts == ("farm.example",)


def test_clean_returns_the_results_to_use_in_order() -> None:
    hits = [*_encyclopedic(), _hit("https://orvelle-deals.example/d", STUFFED_REPEAT)]
    verdict = spam_flags(QUESTION, hits)
    assert verdict.clean(hits) == hits[:4]
    assert verdict.dropped == {"https://orvelle-deals.example/d"}


def test_no_results_no_verdict() -> None:
    assert spam_flags(QUESTION, []) == SpamVerdict()


# --- mirrors ------------------------------------------------------------------------------


def _mirrors() -> list[Hit]:
    return [_hit("https://first.example/orvelle", MIRROR_ORIGINAL),
            _hit("https://copy-one.example/lake", MIRROR_COPY_1),
            _hit("https://copy-two.example/lake", MIRROR_COPY_2),
            _hit("https://nature.example/char", ECOLOGY)]


def test_the_same_text_on_three_hosts_keeps_the_best_ranked_copy_and_drops_the_rest_quietly(
) -> None:
    verdict = spam_flags(QUESTION, _mirrors())
    assert verdict.mirror_urls == ("https://copy-one.example/lake",
                                   "https://copy-two.example/lake")
    assert {m.original for m in verdict.mirrors} == {"https://first.example/orvelle"}
    assert "first.example" in verdict.mirrors[0].reason
    # A copy is a duplicate, not spam: nothing to report loudly, no host to exclude.
    assert verdict.spam == () and verdict.reason == "" and verdict.hosts == ()
    assert [h.url for h in verdict.clean(_mirrors())] == ["https://first.example/orvelle",
                                                          "https://nature.example/char"]


def test_the_most_credible_copy_is_kept_when_weights_are_given() -> None:
    def credibility(url: str) -> float | None:
        return 1.5 if "copy-two.example" in url else None

    verdict = spam_flags(QUESTION, _mirrors(), credibility=credibility)
    assert set(verdict.mirror_urls) == {"https://first.example/orvelle",
                                        "https://copy-one.example/lake"}
    assert {m.original for m in verdict.mirrors} == {"https://copy-two.example/lake"}


def test_the_same_text_on_two_hosts_is_not_a_mirror() -> None:
    hits = _mirrors()[:2]
    assert spam_flags(QUESTION, hits).flagged == ()
    assert spam_flags(QUESTION, hits, mirror_hosts=2).mirror_urls == (
        "https://copy-one.example/lake",)


def test_copies_on_one_host_do_not_make_a_mirror() -> None:
    hits = [_hit("https://one.example/a", MIRROR_ORIGINAL),
            _hit("https://one.example/b", MIRROR_COPY_1),
            _hit("https://www.one.example/c", MIRROR_COPY_2)]
    assert spam_flags(QUESTION, hits).flagged == ()


def test_templated_pages_that_differ_in_names_and_numbers_are_not_mirrors() -> None:
    template = (
        "The {year} Orvelle Regatta was the {n}th edition of the summer sailing race on the "
        "lake, held over three days in July. Boats started from the pier at {town} and "
        "sailed a course of about twenty kilometres around the islands, returning past the "
        "old watchtower. The race was won by a crew from {winner}, and the prizes were "
        "presented in the harbour square on the final evening. Weather during the regatta "
        "was mostly calm, with a strong westerly wind on the second day that forced several "
        "smaller boats to retire."
    )
    pages = [
        template.format(year=2021, n=41, town="Venmouth", winner="Orvelby"),
        template.format(year=2022, n=42, town="Tarsk Bridge", winner="Venmouth"),
        template.format(year=2023, n=43, town="Orvelby", winner="Tarsk"),
    ]
    hits = [_hit(f"https://site{i}.example/regatta", p) for i, p in enumerate(pages)]
    assert spam_flags("Who won the Orvelle Regatta?", hits).flagged == ()


def test_stuffed_text_on_many_hosts_is_spam_everywhere_not_a_kept_copy() -> None:
    hits = [_hit(f"https://farm{i}.example/depth", STUFFED_PROSE) for i in range(3)]
    verdict = spam_flags(QUESTION, hits)
    assert verdict.urls == tuple(h.url for h in hits)
    assert verdict.mirrors == ()
    assert verdict.hosts == ("farm0.example", "farm1.example", "farm2.example")


# --- stale ----------------------------------------------------------------------------------

TODAY = dt.date(2025, 6, 18)


def _dated(*dates: str | None) -> list[Hit]:
    return [_hit(f"https://news{i}.example/a", LAKE, published=d) for i, d in enumerate(dates)]


def test_a_latest_question_with_only_old_results_is_stale() -> None:
    verdict = stale_flag("What is the latest survey of Lake Orvelle?",
                         _dated("2019-04-02", "2021-11-30T08:00:00Z", "2017-01-01"), TODAY)
    assert verdict is not None
    assert verdict.filters.date_from == "2024-06-18"  # the default 365-day window
    assert verdict.filters.date_to is None
    assert verdict.newest == dt.date(2021, 11, 30)
    assert len(verdict.urls) == 3 and verdict.undated == 0
    assert "latest" in verdict.reason and "2021-11-30" in verdict.reason


def test_a_last_year_question_with_older_results_is_stale() -> None:
    verdict = stale_flag("Who won the Orvelle Regatta last year?",
                         _dated("2022-07-20", "2023-07-19"), TODAY)
    assert verdict is not None
    assert verdict.period.date_from == dt.date(2024, 1, 1)
    assert verdict.filters.date_from == "2024-01-01"


def test_one_recent_result_means_not_stale() -> None:
    hits = _dated("2019-04-02", "2025-05-30", "2017-01-01")
    assert stale_flag("What is the latest survey of Lake Orvelle?", hits, TODAY) is None


def test_a_timeless_question_is_never_stale() -> None:
    assert stale_flag(QUESTION, _dated("1999-01-01", "2003-05-05"), TODAY) is None


def test_undated_results_count_neither_way() -> None:
    question = "What is the current water level of Lake Orvelle?"
    assert stale_flag(question, _dated(None, None), TODAY) is None
    verdict = stale_flag(question, _dated(None, "2020-02-02", ""), TODAY)
    assert verdict is not None and verdict.undated == 2
    assert verdict.urls == ("https://news1.example/a",)
    assert "2 undated" in verdict.reason


def test_a_partial_date_counts_as_its_last_day() -> None:
    question = "Who won the Orvelle Regatta last year?"
    assert stale_flag(question, _dated("2024"), TODAY) is None  # may be December 2024
    assert stale_flag(question, _dated("2024-01"), TODAY) is None
    assert stale_flag(question, _dated("2023-12"), TODAY) is not None
    assert stale_flag(question, _dated("not a date"), TODAY) is None


def test_a_period_without_a_start_or_in_the_future_is_not_checked() -> None:
    old = _dated("2001-01-01")
    assert stale_flag("Which boats raced before 2015?", old, TODAY) is None
    assert stale_flag("What will the lake look like in 2040?", old, TODAY) is None


def test_a_fixed_year_question_is_stale_only_with_results_older_than_that_year() -> None:
    question = "Who won the Orvelle Regatta in 2019?"
    assert stale_flag(question, _dated("2016-08-01", "2018-07-01"), TODAY) is not None
    assert stale_flag(question, _dated("2016-08-01", "2020-01-03"), TODAY) is None


def test_the_recency_window_is_a_parameter() -> None:
    hits = _dated("2025-03-01")
    question = "What is the latest survey of Lake Orvelle?"
    assert stale_flag(question, hits, TODAY) is None
    verdict = stale_flag(question, hits, TODAY, recent_days=30)
    assert verdict is not None and verdict.filters.date_from == "2025-05-19"


def test_a_snippet_copying_the_question_is_flagged_but_a_shared_phrase_is_not() -> None:
    question = ("Which glacial streams feed the freshwater lake in the Tarsk highlands that is "
                "drained by the river Venn?")
    farm = _hit("https://answers-farm.example/q", None,
                snippet="Which glacial streams feed the freshwater lake in the Tarsk highlands "
                        "that is drained by the river")
    article = _hit("https://atlas.example/orvelle", LAKE)  # "a freshwater lake in the Tarsk
    verdict = spam_flags(question, [farm, article])        # highlands ... drained by the river"
    assert [(f.url, f.kind) for f in verdict.flagged] == [("https://answers-farm.example/q",
                                                          "echo")]


def test_a_short_direct_answer_is_kept_and_a_snippet_adding_nothing_is_an_echo() -> None:
    question = "Who founded the Orvelle lake survey of the northern Tarsk highlands in 1921?"
    answer = _hit("https://atlas.example/survey", None,
                  snippet="Ida Marsk founded the Orvelle lake survey of the northern Tarsk "
                          "highlands in 1921.")
    echo = _hit("https://answers-farm.example/s", None,
                snippet="All about the Orvelle lake survey of the northern Tarsk highlands, "
                        "founded in 1921")
    verdict = spam_flags(question, [answer, echo])
    assert [(f.url, f.kind) for f in verdict.flagged] == [("https://answers-farm.example/s",
                                                          "echo")]
