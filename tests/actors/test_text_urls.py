"""normalize_url: one spelling per page; idempotent on anything it accepts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.text import normalize_url


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://Example.COM/", "http://example.com/"),
        ("https://example.com", "https://example.com/"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("https://example.com/a/b/", "https://example.com/a/b"),
        ("https://example.com/a#section-2", "https://example.com/a"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com/?b=2&a=1&a=0", "https://example.com/?a=0&a=1&b=2"),
        (
            "https://example.com/p?utm_source=x&UTM_Medium=y&id=3&gclid=1&fbclid=2"
            "&mc_cid=3&mc_eid=4&ref_src=twsrc&_ga=5",
            "https://example.com/p?id=3",
        ),
        ("https://example.com/p?utm_campaign=only", "https://example.com/p"),
        ("https://example.com/%7euser/%e2%82%ac", "https://example.com/~user/%E2%82%AC"),
        ("https://example.com/a b/ü", "https://example.com/a%20b/%C3%BC"),
        ("https://example.com/a%2fb", "https://example.com/a%2Fb"),  # escaped slash stays
        ("https://example.com/100%", "https://example.com/100%25"),
        ("https://example.com/s?q=a+b&x=%20", "https://example.com/s?q=a+b&x=%20"),
        ("https://Bücher.Example/", "https://xn--bcher-kva.example/"),
        ("https://example.com./", "https://example.com/"),
        ("  https://example.com/x  ", "https://example.com/x"),
        ("http://user:Pass@Example.com:80/", "http://user:Pass@example.com/"),
        ("http://[::1]:8080/x/", "http://[::1]:8080/x"),
        ("https://example.com/?&&a=1&", "https://example.com/?a=1"),
        ("/relative/path/", "/relative/path/"),
    ],
)
def test_cases(raw: str, expected: str) -> None:
    assert normalize_url(raw) == expected
    assert normalize_url(expected) == expected


def test_same_page_different_spellings_collapse() -> None:
    spellings = [
        "https://www.example.org/docs/Intro/?lang=en&utm_source=newsletter",
        "HTTPS://WWW.EXAMPLE.ORG:443/docs/Intro?lang=en#top",
        "https://www.example.org/docs/%49ntro?fbclid=abc&lang=en",
        "https://www.example.org/docs/./Intro/?lang=en",
    ]
    assert len({normalize_url(u) for u in spellings}) == 1


def test_path_case_is_preserved() -> None:
    assert normalize_url("https://example.com/Docs") != normalize_url("https://example.com/docs")


@pytest.mark.parametrize("bad", ["http://[::1/", "http://example.com:notaport/"])
def test_unparseable_urls_raise_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid URL"):
        normalize_url(bad)


_seg = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/?#\r\n\t"), max_size=8)
_host = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?(\.[A-Za-z]{2,6}){1,2}",
                      fullmatch=True)
_param = st.tuples(
    st.one_of(st.sampled_from(["utm_source", "gclid", "id", "q", "Ref_Src", "a"]),
              st.text(alphabet="abcxyz_%2F+", max_size=5)),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="&#\r\n\t"), max_size=6),
)


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "Https", "ftp"]))
    host = draw(_host)
    port = draw(st.sampled_from(["", ":80", ":443", ":8080"]))
    path = "/".join(draw(st.lists(_seg, max_size=4)))
    params = draw(st.lists(_param, max_size=4))
    query = "&".join(f"{k}={v}" for k, v in params)
    frag = draw(st.sampled_from(["", "#x", "#"]))
    return f"{scheme}://{host}{port}/{path}" + (f"?{query}" if query else "") + frag


@settings(max_examples=150, deadline=None)
@given(urls())
def test_idempotent_on_generated_urls(url: str) -> None:
    once = normalize_url(url)
    assert normalize_url(once) == once
    assert "#" not in once and "utm_source" not in once and "gclid" not in once


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_is_normalised_idempotently_or_rejected(text: str) -> None:
    try:
        once = normalize_url(text)
    except ValueError:
        return
    assert normalize_url(once) == once


def test_url_host_is_the_host_as_sites_are_compared() -> None:
    from actors.text import url_host

    assert url_host("https://WWW.Example.com./a?b=1") == "example.com"
    assert url_host("http://sub.example.com:8080/x") == "sub.example.com"
    assert url_host("corpus://notes/doc") == "notes"
    assert url_host("not a url") == "" and url_host("http://[::1") == ""
