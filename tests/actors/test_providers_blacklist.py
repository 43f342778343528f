"""Blacklist rules: wildcard and regex, one compiled expression, no compile per result."""

from __future__ import annotations

import re
from typing import Any

import pytest

from actors.providers import Blacklist, BlacklistRuleError


@pytest.mark.parametrize(
    ("url", "blocked"),
    [
        ("https://www.example.com/page", True),
        ("http://a.b.example.com/", True),
        ("https://example.com/", True),  # *. also covers the bare domain
        ("https://notexample.com/", False),
        ("https://example.com.evil.test/", False),
        ("https://EXAMPLE.COM/x", True),
        ("https://example.net/a", True),  # regex rule
        ("https://sub.example.org/b", True),
        ("https://example.io/", False),
        ("https://pinterest.com/pin/1", True),  # bare domain rule
        ("https://de.pinterest.com/pin/1", True),
        ("https://docs.python.org/3/", False),
    ],
)
def test_wildcard_regex_and_bare_domain_rules(url: str, blocked: bool) -> None:
    bl = Blacklist(["*://*.example.com/*", r"/example\.(net|org)/", "pinterest.com"])
    assert bl.blocks(url) is blocked


def test_empty_blacklist_blocks_nothing() -> None:
    bl = Blacklist(["", "   "])
    assert not bl and len(bl) == 0 and not bl.blocks("https://x.test/")


def test_scheme_specific_wildcard() -> None:
    bl = Blacklist(["http://*/*"])
    assert bl.blocks("http://plain.test/") and not bl.blocks("https://plain.test/")


def test_filter_keeps_order() -> None:
    bl = Blacklist(["*://bad.test/*"])
    urls = ["https://a.test/", "https://bad.test/x", "https://b.test/"]
    assert bl.filter(urls) == ["https://a.test/", "https://b.test/"]


@pytest.mark.parametrize("rule", ["/exa(mple/", "just words"])
def test_bad_rule_is_named_in_the_error(rule: str) -> None:
    with pytest.raises(BlacklistRuleError, match=re.escape(repr(rule))):
        Blacklist(["*://ok.test/*", rule])


def test_thousand_rules_compile_once_and_never_per_result(monkeypatch: pytest.MonkeyPatch) -> None:
    rules = [f"*://*.spam{i}.test/*" for i in range(500)]
    rules += [f"/tracker{i}\\.(net|org)/" for i in range(400)]
    rules += [f"*://*/ads{i}/*" for i in range(100)]
    calls: list[Any] = []
    real_compile = re.compile
    real_internal = re._compile  # type: ignore[attr-defined]

    def counting_compile(*args: Any, **kw: Any) -> Any:
        calls.append(args[0])
        return real_compile(*args, **kw)

    def counting_internal(*args: Any, **kw: Any) -> Any:
        calls.append(args[0])
        return real_internal(*args, **kw)

    monkeypatch.setattr(re, "compile", counting_compile)
    bl = Blacklist(rules)
    assert len(calls) == 2  # one expression for the wildcards, one for the regexes
    calls.clear()
    monkeypatch.setattr(re, "_compile", counting_internal)  # catches re.search(str, ...) too
    urls = [f"https://www.site{i}.test/page/{i}" for i in range(5000)]
    urls += ["https://a.spam499.test/x", "https://tracker7.org/", "https://spam0.test/",
             "https://news.test/ads42/banner.png"]
    blocked = [u for u in urls if bl.blocks(u)]
    assert calls == []
    assert blocked == ["https://a.spam499.test/x", "https://tracker7.org/",
                       "https://spam0.test/", "https://news.test/ads42/banner.png"]
