"""The SSRF guard's decisions: schemes, IP literals in every spelling, resolved names."""

from __future__ import annotations

import ipaddress

import pytest

from actors.scrape import BlockedAddress, BlockedScheme, GuardedResolver, UrlGuard
from actors.scrape._guard import is_public_address, parse_ip_literal

from ._scrape_fixtures import FakeResolver

PRIVATE_URLS = [
    "http://127.0.0.1/",
    "http://127.0.0.53:8080/admin",
    "http://10.0.0.1/",
    "http://10.255.255.255/",
    "http://172.16.0.1/",
    "http://172.31.255.1/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",  # CGNAT
    "http://0.0.0.0/",
    "http://0/",
    "http://224.0.0.1/",  # multicast
    "http://240.0.0.1/",  # reserved
    "http://255.255.255.255/",
    "http://[::1]/",
    "http://[::]/",
    "http://[fe80::1]/",
    "http://[fe80::1%25eth0]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[ff02::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
    "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
    # legacy numeric spellings the OS resolver accepts
    "http://2130706433/",  # decimal 127.0.0.1
    "http://0x7f000001/",  # hex
    "http://0x7f.1/",
    "http://0x7f.0x0.0x0.0x1/",
    "http://0177.0.0.1/",  # octal
    "http://0177.1/",
    "http://127.1/",
    "http://017700000001/",
    "http://3232235777/",  # 192.168.1.1
    "http://0xa9.0xfe.0xa9.0xfe/",  # 169.254.169.254
    "http://127.0.0.1./",  # trailing dot
    "http://localhost/",
    "http://LOCALHOST:8080/",
    "http://app.localhost/",
    "http://%31%32%37.0.0.1/",  # percent-encoded host
]


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_private_and_special_addresses_are_refused(url: str) -> None:
    with pytest.raises(BlockedAddress):
        UrlGuard().check_url(url)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com:70/_x",
            "data:text/html,<script>alert(1)</script>", "javascript:alert(1)",
            "ws://example.com/", "mailto:a@example.com", "/relative/path"],
)
def test_non_http_schemes_are_refused(url: str) -> None:
    with pytest.raises(BlockedScheme):
        UrlGuard().check_url(url)


def test_blocked_errors_are_permission_errors_with_the_url() -> None:
    with pytest.raises(PermissionError) as info:
        UrlGuard().check_url("http://169.254.169.254/latest")
    assert isinstance(info.value, BlockedAddress)
    assert info.value.url == "http://169.254.169.254/latest"


@pytest.mark.parametrize(
    "url", ["http://example.com/", "https://93.184.216.34/x", "http://8.8.8.8/",
            "https://[2606:4700:4700::1111]/", "http://xn--bcher-kva.example/"],
)
def test_public_urls_pass(url: str) -> None:
    assert UrlGuard().check_url(url).host


def test_credentials_in_the_url_are_stripped() -> None:
    url = UrlGuard().check_url("https://alice:s3cret@example.com/page")
    assert url.user is None and url.password is None
    assert str(url) == "https://example.com/page"


def test_numeric_forms_parse_like_the_os_does() -> None:
    assert parse_ip_literal("0x7f.1") == ipaddress.IPv4Address("127.0.0.1")
    assert parse_ip_literal("2130706433") == ipaddress.IPv4Address("127.0.0.1")
    assert parse_ip_literal("0177.0.0.1") == ipaddress.IPv4Address("127.0.0.1")
    assert parse_ip_literal("example.com") is None
    assert parse_ip_literal("cafe.be") is None


def test_ipv6_forms_embedding_ipv4_are_refused_when_the_inner_address_is() -> None:
    assert not is_public_address(ipaddress.IPv6Address("::ffff:10.1.2.3"))
    # IPv4-mapped addresses are refused outright (a public site has a real AAAA or A record)
    assert not is_public_address(ipaddress.IPv6Address("::ffff:8.8.8.8"))
    assert not is_public_address(ipaddress.IPv6Address("2002:c0a8:101::"))  # 6to4 192.168.1.1
    assert is_public_address(ipaddress.IPv6Address("2002:808:808::"))  # 6to4 of 8.8.8.8


def test_allow_list_admits_only_the_named_network() -> None:
    guard = UrlGuard.allowing("127.0.0.1")
    assert guard.check_url("http://127.0.0.1:8080/").port == 8080
    for url in ("http://127.0.0.2/", "http://10.0.0.1/", "http://[::1]/", "http://localhost/"):
        with pytest.raises(BlockedAddress):
            guard.check_url(url)
    assert guard.check_url("http://example.com/")  # non-exclusive: the public web stays open


def test_allowed_address_in_a_legacy_spelling_is_canonicalised() -> None:
    assert str(UrlGuard.allowing("127.0.0.1").check_url("http://0x7f.1:81/a")) == (
        "http://127.0.0.1:81/a"
    )


def test_exclusive_mode_refuses_everything_off_the_list() -> None:
    guard = UrlGuard.allowing("docs.internal.example", exclusive=True)
    assert guard.check_url("https://docs.internal.example/a")
    for url in ("https://example.com/", "http://8.8.8.8/", "http://10.0.0.1/"):
        with pytest.raises(BlockedAddress):
            guard.check_url(url)
    guard.check_addresses("docs.internal.example", ["10.1.2.3"])  # its own (private) address
    with pytest.raises(ValueError):
        UrlGuard(exclusive=True)


def test_disabled_guard_still_checks_schemes() -> None:
    guard = UrlGuard(enabled=False)
    assert guard.check_url("http://127.0.0.1/")
    with pytest.raises(BlockedScheme):
        guard.check_url("file:///etc/passwd")


@pytest.mark.parametrize(
    ("addresses", "refused"),
    [
        (["10.0.0.5"], True),
        (["127.0.0.1"], True),
        (["169.254.169.254"], True),
        (["::1"], True),
        (["fe80::1%2"], True),
        (["::ffff:192.168.0.1"], True),
        (["93.184.216.34", "10.0.0.5"], True),  # one public, one private: refused
        (["2606:4700::1111", "fc00::1"], True),
        ([], True),
        (["93.184.216.34"], False),
        (["93.184.216.34", "2606:4700::1111"], False),
    ],
)
async def test_guarded_resolver_checks_every_address(addresses: list[str], refused: bool) -> None:
    resolver = GuardedResolver(UrlGuard(), FakeResolver({"evil.example": addresses}))
    if refused:
        with pytest.raises(BlockedAddress):
            await resolver.resolve("evil.example", 80)
    else:
        got = await resolver.resolve("evil.example", 80)
        assert [r["host"] for r in got] == addresses
    await resolver.close()
