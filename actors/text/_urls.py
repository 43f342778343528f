"""URL normalisation: one spelling per page, so dedup and seen-URL sets work.

Shared by the web searcher (merging hits from several providers) and the
corpus index. Follows RFC 3986 section 6 (case, percent-encoding, dot segments,
default ports) plus the usual web-crawler rules (drop fragments and tracking
parameters, sort the query).
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit, urlunsplit

import idna

__all__ = ["TRACKING_PARAMS", "TRACKING_PREFIXES", "normalize_url", "url_host", "url_key"]

TRACKING_PARAMS: frozenset[str] = frozenset(
    {
        "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid",
        "twclid", "ttclid", "li_fat_id", "igshid", "mc_cid", "mc_eid", "ref_src",
        "ref_url", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok", "oly_anon_id",
        "oly_enc_id", "vero_id", "vero_conv", "wickedid", "rb_clickid", "s_cid",
        "spm", "srsltid", "__s", "trk", "trkcampaign",
    }
)
"""Query parameters that identify a click or campaign, never the content."""

TRACKING_PREFIXES: tuple[str, ...] = ("utm_", "pk_", "hsa_", "mtm_", "ga_")
"""Parameter-name prefixes of analytics families (``utm_source``, ``pk_campaign``...)."""

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PCT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SUB_DELIMS = "!$&'()*+,;="
_PATH_SAFE = _SUB_DELIMS + ":@/%"
_QUERY_PART_SAFE = "!$'()*,;:@/?%"  # '&', '=' and '+' keep their meaning inside a query


def _fix_escapes(s: str, safe: str) -> str:
    """Upper-case escapes, decode escaped unreserved chars, escape what must be."""
    s = _STRAY_PCT.sub("%25", s)

    def unescape(m: re.Match[str]) -> str:
        ch = chr(int(m.group(1), 16))
        return ch if ch in _UNRESERVED else "%" + m.group(1).upper()

    return quote(_PCT.sub(unescape, s), safe=safe)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4: resolve ``.`` and ``..`` segments."""
    if "." not in path:
        return path
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


def _host(hostname: str) -> str:
    host = hostname.rstrip(".").lower()
    if not host or host.startswith("["):
        return host
    if host.isascii():
        return host
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:
        try:
            return host.encode("idna").decode("ascii")
        except UnicodeError:
            return quote(host, safe="")


def _is_tracking(name: str) -> bool:
    n = name.lower()
    return n in TRACKING_PARAMS or n.startswith(TRACKING_PREFIXES)


def normalize_url(url: str) -> str:
    """The canonical spelling of ``url`` (idempotent: normalising twice changes nothing).

    Lower-cases scheme and host, encodes international hosts with IDNA, drops
    default ports, userinfo-less ``@``, fragments and tracking parameters
    (``utm_*``, ``gclid``, ``fbclid``, ``mc_cid``...), sorts the remaining query
    parameters, resolves ``.``/``..``, normalises percent-encoding (upper-case
    hex, unreserved characters decoded, spaces and non-ASCII encoded as UTF-8)
    and removes a trailing slash except on the root path.

    A URL without a scheme and host (``"/a/b"``, ``"mailto:x"``) is only
    trimmed and percent-normalised: there is no host to canonicalise.

    Raises:
        ValueError: the URL cannot be parsed (e.g. an unclosed IPv6 bracket,
            a non-numeric port).
    """
    raw = url.strip()
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"invalid URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if not parts.netloc:
        path = _fix_escapes(parts.path, _PATH_SAFE)
        query = _normalize_query(parts.query)
        return urlunsplit((scheme, "", path, query, ""))

    host = _host(parts.hostname or "")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    netloc = host
    if port is not None and _DEFAULT_PORTS.get(scheme) != port:
        netloc = f"{host}:{port}"
    if parts.username is not None or parts.password is not None:
        user = _fix_escapes(parts.username or "", _SUB_DELIMS.replace(":", "") + "%")
        if parts.password is not None:
            user += ":" + _fix_escapes(parts.password, _SUB_DELIMS + ":%")
        netloc = f"{user}@{netloc}"

    path = _remove_dot_segments(_fix_escapes(parts.path, _PATH_SAFE))
    if not path:
        path = "/"
    elif len(path) > 1:
        path = path.rstrip("/") or "/"
    return urlunsplit((scheme, netloc, path, _normalize_query(parts.query), ""))


def _normalize_query(query: str) -> str:
    params: list[tuple[str, str]] = []
    for piece in query.split("&"):
        if not piece:
            continue
        name, eq, value = piece.partition("=")
        name = _fix_escapes(name, _QUERY_PART_SAFE + "+=")
        if _is_tracking(_PCT.sub(lambda m: chr(int(m.group(1), 16)), name)):
            continue
        params.append((name, eq + _fix_escapes(value, _QUERY_PART_SAFE + "+=")))
    params.sort()
    return "&".join(n + v for n, v in params)


def url_host(url: str) -> str:
    """A URL's host as sites are compared: lower case, no ``www.``, no trailing dot.

    Empty when the URL has no host or cannot be parsed (never raises).
    """
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:
        return ""
    return host.rstrip(".").lower().removeprefix("www.")


def url_key(url: str) -> str:
    """A URL as pages are compared: normalised, or the stripped raw string if unparsable."""
    try:
        return normalize_url(url)
    except (ValueError, TypeError):
        return url.strip()
