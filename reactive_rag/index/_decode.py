"""Bytes to text for the loaders: binary sniffing, UTF-8 first, then a legacy-encoding guess.

A folder of real files holds images renamed ``.txt``, Windows-1252 notes and
blobs no encoding explains; each of those is skipped with a reason instead of
being indexed as mojibake (the old ``errors="replace"`` decoding did that).
"""

from __future__ import annotations

import codecs

from ._exceptions import DocumentLoadError

__all__ = ["BINARY_SUFFIXES", "MAX_CHAOS", "SNIFF_BYTES", "decode_text", "looks_binary"]

#: Suffixes that are binary whatever their bytes look like (reported as ``binary``).
BINARY_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".tif", ".tiff", ".webp", ".psd",
    ".mp3", ".mp4", ".m4a", ".wav", ".flac", ".ogg", ".avi", ".mov", ".mkv", ".webm",
    ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar", ".whl",
    ".exe", ".dll", ".so", ".dylib", ".o", ".a", ".bin", ".class", ".pyc", ".pyo",
    ".sqlite", ".db", ".npy", ".npz", ".pkl", ".onnx", ".gguf", ".safetensors",
    ".woff", ".woff2", ".ttf", ".otf", ".eot",
})
#: How much of a file the binary sniff looks at.
SNIFF_BYTES = 8192
#: charset-normalizer's "chaos" (mess ratio) above which a guess is not trusted.
MAX_CHAOS = 0.2
_CONTROL_SHARE = 0.1  # text has almost no C0 control bytes besides whitespace
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\b\x1b")
_CONTROLS = frozenset(range(0x20)) - _TEXT_CONTROLS | {0x7F}
_WESTERN_MARGIN = 0.1
_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def looks_binary(head: bytes) -> bool:
    """Whether a file's first block is binary: a NUL byte, or many control bytes.

    UTF-16/32 text (which is full of NULs) is recognised by its byte-order mark.
    """
    if head.startswith(_BOMS):
        return False
    if b"\x00" in head:
        return True
    if not head:
        return False
    controls = sum(1 for b in head if b in _CONTROLS)
    return controls / len(head) > _CONTROL_SHARE


def decode_text(data: bytes, *, where: str = "file") -> tuple[str, str]:
    """``(text, encoding)`` of a text file's bytes.

    UTF-8 (with or without BOM) first; otherwise charset-normalizer's best
    guess whose chaos is at most :data:`MAX_CHAOS`. On short Western texts its
    statistics are noisy (Latin-1 French comes out as Baltic cp1257), so when
    cp1252 explains the bytes nearly as well as the best guess, cp1252 wins:
    it is by far the most common legacy encoding of text files and a superset
    of Latin-1's letters.

    Raises:
        DocumentLoadError: ``reason="undecodable"`` when no guess is good enough.
    """
    try:
        return data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    matches = [m for m in from_bytes(data, threshold=MAX_CHAOS) if m.chaos <= MAX_CHAOS]
    if not matches:
        why = (f"not UTF-8, and no legacy encoding fits (every guess is over "
               f"{MAX_CHAOS:.0%} garbled)")
        raise DocumentLoadError(f"cannot decode {where}: {why}", reason="undecodable",
                                detail=why)
    best = min(matches, key=lambda m: m.chaos)
    for m in matches:
        if m.chaos <= best.chaos + _WESTERN_MARGIN and "cp1252" in m.could_be_from_charset:
            try:
                return data.decode("cp1252"), "cp1252"
            except UnicodeDecodeError:
                break
    return str(best), best.encoding
