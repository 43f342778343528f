"""The period a question asks about: relative phrases from ``today``, bare years only after a
time preposition, recency words as a default window, names and quantities left alone."""

from __future__ import annotations

import datetime as dt

import pytest

from actors.text import (
    DEFAULT_RECENT_DAYS,
    AskedPeriod,
    asked_period,
    date_mentions,
    is_time_sensitive,
)

TODAY = dt.date(2025, 6, 18)  # a Wednesday
D = dt.date


@pytest.mark.parametrize(
    ("question", "date_from", "date_to"),
    [
        # calendar periods relative to today
        ("Who won the regional chess open last year?", D(2024, 1, 1), D(2024, 12, 31)),
        ("who won last year's spelling bee", D(2024, 1, 1), D(2024, 12, 31)),
        ("What has the council approved this year?", D(2025, 1, 1), TODAY),
        ("What did the board announce last month?", D(2025, 5, 1), D(2025, 5, 31)),
        ("Which films opened this month?", D(2025, 6, 1), TODAY),
        ("What happened in parliament this week?", D(2025, 6, 16), TODAY),
        ("Who scored last week?", D(2025, 6, 9), D(2025, 6, 15)),
        ("What did the minister say yesterday?", D(2025, 6, 17), D(2025, 6, 17)),
        # rolling windows
        ("Storms in the past 3 days", D(2025, 6, 15), TODAY),
        ("What changed over the last two weeks?", D(2025, 6, 4), TODAY),
        ("Prices over the past 6 months", D(2024, 12, 18), TODAY),
        ("Who won the league in the last 10 years?", D(2015, 6, 18), TODAY),
        ("How has the town grown in the last decade?", D(2015, 6, 18), TODAY),
        ("What happened in the past year?", D(2024, 6, 18), TODAY),
        ("Releases in the past few days", D(2025, 6, 15), TODAY),
        # explicit years and dates after a time preposition
        ("Who was president in 1990?", D(1990, 1, 1), D(1990, 12, 31)),
        ("What happened during 2019?", D(2019, 1, 1), D(2019, 12, 31)),
        ("Which bridges were built since 2020?", D(2020, 1, 1), None),
        ("Which cars were sold before 2015?", None, D(2014, 12, 31)),
        ("Which records were set after 2015?", D(2016, 1, 1), None),
        ("What was the tax rate until 2015?", None, D(2015, 12, 31)),
        ("What was the population as of 2023?", D(2023, 1, 1), D(2023, 12, 31)),
        ("What happened in March 2021?", D(2021, 3, 1), D(2021, 3, 31)),
        ("What was signed on March 3, 2021?", D(2021, 3, 3), D(2021, 3, 3)),
        ("Who was born on 22 October 1930?", D(1930, 10, 22), D(1930, 10, 22)),
        ("Who led the club from 2010 to 2015?", D(2010, 1, 1), D(2015, 12, 31)),
        ("Who ruled between 1573 and 1575?", D(1573, 1, 1), D(1575, 12, 31)),
        ("What did it sell in 2010-15?", D(2010, 1, 1), D(2015, 12, 31)),
        ("Which bands were popular in the 1990s?", D(1990, 1, 1), D(1999, 12, 31)),
        ("Who ruled the empire in the 1500s?", D(1500, 1, 1), D(1599, 12, 31)),  # a century
        ("What fell in the year 1066?", D(1066, 1, 1), D(1066, 12, 31)),
        ("prior to 1948 the two regions were part of what", None, D(1947, 12, 31)),
        # two periods: the span covering both
        ("Who won in 2016 and in 2018?", D(2016, 1, 1), D(2018, 12, 31)),
        # a range said wins over a recency word: the latest of 2019
        ("What was the latest GDP figure in 2019?", D(2019, 1, 1), D(2019, 12, 31)),
    ],
)
def test_period_phrasings(question: str, date_from: dt.date | None,
                          date_to: dt.date | None) -> None:
    period = asked_period(question, TODAY)
    assert period is not None, question
    assert (period.date_from, period.date_to) == (date_from, date_to)
    assert period.phrase
    assert all(part in question.lower() for part in period.phrase.lower().split(", "))


@pytest.mark.parametrize(
    "question",
    [
        "What is the latest version of the Norwick compiler?",
        "Who is the current mayor of Felbridge?",
        "Who is currently in charge of the port?",
        "What are recent findings about sleep?",
        "Has the factory recently closed?",
        "Where is the statue now?",
        "What is the largest ethnic group in the region today?",
        "Who is the number one player right now?",
        "How many goals has she scored so far?",
        "WHAT IS THE LATEST SCORE",  # shouting, not a title
    ],
)
def test_recency_words_give_the_default_window(question: str) -> None:
    period = asked_period(question, TODAY)
    assert period == AskedPeriod(TODAY - dt.timedelta(days=DEFAULT_RECENT_DAYS), TODAY,
                                 period.phrase if period else "", relative=True,
                                 default_window=True)
    assert is_time_sensitive(question)


@pytest.mark.parametrize(
    "question",
    [
        "the 1990 World Cup winner's coach",
        "Catch-22",
        "What is 24/7?",
        "What changed in Windows 95?",
        "Who starred in the 2012 film about the storm?",
        "In the 2012 film, who played the pilot?",
        "Summarize the report in 2000 words",
        "Which team won 1990 games?",
        "What is the price in $2019?",
        "What is alternating current?",
        "How is current density measured in a wire?",
        "Why do ocean currents move heat?",
        "Who directed the film Winter Now?",
        "Where is the Harbour Today newspaper printed?",
        "Who sang Yesterday?",
        "What did he do in his last year at school?",
        "What happened in the last year of the war?",
        "When was the last time anyone walked on the moon?",
        "When was the last year the club won the cup?",
        "What was the effect on 2019 elections?",
        "Who founded the company now known as Brightwell?",
        "What is the boiling point of water?",
        "so far as I know, who built the dam?",
        "Who wrote the 1984 novel?",
        "What happened on February 30, 2020?",  # no such day
    ],
)
def test_no_period_is_read_from_names_quantities_and_timeless_questions(question: str) -> None:
    assert asked_period(question, TODAY) is None
    assert not is_time_sensitive(question)


def test_relative_periods_are_time_sensitive_and_fixed_years_are_not() -> None:
    assert is_time_sensitive("Who won the cup last year?")
    assert is_time_sensitive("What happened in the past 3 months?")
    assert not is_time_sensitive("Who won the cup in 1998?")
    fixed = asked_period("Who won the cup in 1998?", TODAY)
    assert fixed is not None and not fixed.relative and not fixed.default_window


def test_the_recency_window_is_a_parameter() -> None:
    period = asked_period("What is the latest release?", TODAY, recent_days=30)
    assert period is not None and period.date_from == D(2025, 5, 19)
    with pytest.raises(ValueError):
        asked_period("latest", TODAY, recent_days=-1)


def test_relative_periods_follow_today() -> None:
    period = asked_period("Who won last year?", D(2021, 1, 5))
    assert period is not None and (period.date_from, period.date_to) == (
        D(2020, 1, 1), D(2020, 12, 31))
    month = asked_period("What happened last month?", D(2024, 3, 31))
    assert month is not None and (month.date_from, month.date_to) == (
        D(2024, 2, 1), D(2024, 2, 29))
    rolling = asked_period("in the past 1 month", D(2024, 3, 31))
    assert rolling is not None and rolling.date_from == D(2024, 2, 29)  # clamped to the month


def test_the_phrase_names_what_was_read() -> None:
    period = asked_period("Who led the club from 2010 to 2015?", TODAY)
    assert period is not None and period.phrase == "from 2010 to 2015"
    both = asked_period("Who won in 2016 and who won last year?", TODAY)
    assert both is not None and both.phrase == "in 2016, last year"
    assert (both.date_from, both.date_to) == (D(2016, 1, 1), D(2024, 12, 31))
    assert both.relative and not both.default_window


# --- dates a passage writes (what "which came first, A or B?" compares) ---------------


@pytest.mark.parametrize(("text", "expected"), [
    ("Ana Ruiz (born 3 May 1960) is a painter.", [("3 May 1960", (1960, 5, 3), 3)]),
    ("The band formed on June 9, 1975, in Ohio.", [("June 9, 1975", (1975, 6, 9), 3)]),
    ("It opened in March 1909 and closed in 1931.",
     [("March 1909", (1909, 3, 0), 2), ("1931", (1931, 0, 0), 1)]),
    ("Popular in the 1990s.", [("the 1990s", (1990, 0, 0), 0)]),
    ("Released 2014-02-30 by mistake.", []),  # no such day
    ("An essay of 2000 words on COVID-2019.", []),  # a length and a name, not dates
])
def test_date_mentions_give_each_date_as_precisely_as_it_is_written(
        text: str, expected: list[tuple[str, tuple[int, int, int], int]]) -> None:
    assert [(d.text, d.key, d.precision) for d in date_mentions(text)] == expected
