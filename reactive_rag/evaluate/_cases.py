"""Question files for ``reactive-rag eval``: our JSONL, HotpotQA and SQuAD, told apart by shape.

- **jsonl** (ours): one ``{"question": str, "answers": [str, ...], "collections"?: [str, ...],
  "id"?: str|int}`` per line. ``answers`` may be empty: no answer is expected (the
  question is there to be abstained on).
- **hotpotqa**: JSONL rows ``{"question", "answer"}`` (HotpotQA's own rows, ``answer`` a
  string; NQ-open's a list) or the IRCoT processed rows ``{"question_id",
  "question_text", "answers_objects": [{"spans": [...]}]}``; a JSON array of such rows is
  read too (HotpotQA's distributed files). Their contexts are not indexed here: index
  them into a collection first.
- **squad**: one JSON document ``{"data": [{"paragraphs": [{"qas": [{"id", "question",
  "answers": [{"text"}], "is_impossible"?}]}]}]}`` (SQuAD 1.1/2.0, CMRC 2018).

The format is told by the first row (or the document's shape) and every row must have it;
a row that does not is an error naming its line (or its place in a SQuAD document). A
HotpotQA or SQuAD question with no text (CMRC 2018's trial set has two) is skipped and
named in :attr:`QAFile.skipped`, not an error: the file is the data set's as published.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["QACase", "QAFile", "QAFileError", "QAFormat", "read_cases"]

QAFormat = Literal["jsonl", "hotpotqa", "squad"]


class QAFileError(ValueError):
    """A question file cannot be read: its message is one line naming the file and the place."""


@dataclass(frozen=True, slots=True)
class QACase:
    """One question with the answers expected of it.

    ``collections``: the collections it names (empty: the caller's default ones);
    ``id``: the file's id for it, else ``line N`` (or its SQuAD ``id``).
    """

    id: str
    question: str
    answers: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QAFile:
    """A question file as read: its format, its questions, and the places of those skipped."""

    format: QAFormat
    cases: tuple[QACase, ...]
    skipped: tuple[str, ...] = ()


def read_cases(path: Path) -> QAFile:
    """The questions of a file in any of the three formats, and which format it was.

    Raises:
        QAFileError: unreadable, empty, not JSON, or a row of the wrong shape (the first
            problem, with its line or place).
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise QAFileError(f"{path}: cannot read it ({exc})") from exc
    try:
        whole: Any = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # JSON lines (or broken): read line by line below
    try:
        if isinstance(whole, dict) and "data" in whole:
            read: list[QACase | str] = list(_squad(whole))
            fmt: QAFormat = "squad"
        elif isinstance(whole, list):
            fmt, read = _rows([(f"item {i}", row) for i, row in enumerate(whole)])
        else:
            fmt, read = _rows(list(_json_lines(text)))
    except _RowError as exc:
        raise QAFileError(f"{path}: {exc}") from None
    cases = tuple(c for c in read if isinstance(c, QACase))
    if not cases:
        raise QAFileError(f"{path}: no questions in it")
    return QAFile(fmt, cases, tuple(c for c in read if isinstance(c, str)))


class _RowError(Exception):
    """A row's problem, with its place; :func:`read_cases` adds the file."""


def _json_lines(text: str) -> Iterator[tuple[str, Any]]:
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"line {n}", json.loads(line)
        except json.JSONDecodeError as exc:
            raise _RowError(f"line {n}: not JSON ({exc.msg} at column {exc.colno})") from None


def _rows(rows: Sequence[tuple[str, Any]]) -> tuple[QAFormat, list[QACase | str]]:
    if not rows:
        return "jsonl", []
    fmt = _shape(*rows[0])
    return fmt, [_ROW_READERS[fmt](where, row) for where, row in rows]


def _shape(where: str, row: Any) -> QAFormat:
    if isinstance(row, dict):
        if "answers" in row and "question" in row:
            return "jsonl"
        if "question_text" in row or ("question" in row and "answer" in row):
            return "hotpotqa"
    keys = sorted(row) if isinstance(row, dict) else type(row).__name__
    raise _RowError(f"{where}: not a question row: expected {{question, answers}} "
                    f"(or HotpotQA's {{question, answer}}, or SQuAD), got {keys}")


def _blank(row: Mapping[str, Any], key: str) -> bool:
    """A foreign row's question left empty by its data set (skipped, not an error)."""
    return isinstance(row.get(key), str) and not row[key].strip()


def _text(where: str, row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _RowError(f"{where}: {key!r} must be a non-empty string, got {value!r}")
    return value.strip()


def _strings(where: str, value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _RowError(f"{where}: {key!r} must be a list of non-empty strings, got {value!r}")
    return tuple(dict.fromkeys(v.strip() for v in value))


def _row_id(where: str, row: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        if isinstance(row.get(key), str | int) and str(row[key]).strip():
            return str(row[key])
    return where


def _ours(where: str, row: Any) -> QACase:
    if not isinstance(row, dict):
        raise _RowError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if not isinstance(row.get("answers"), list):
        raise _RowError(f"{where}: 'answers' must be a list of strings "
                        f"(empty: no answer expected)")
    collections = _strings(where, row["collections"], "collections") \
        if row.get("collections") is not None else ()
    return QACase(_row_id(where, row, "id"), _text(where, row, "question"),
                  _strings(where, row["answers"], "answers"), collections)


def _hotpot(where: str, row: Any) -> QACase | str:
    """A case, or ``where`` for a row skipped as blank."""
    if not isinstance(row, dict):
        raise _RowError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if _blank(row, "question_text" if "question_text" in row else "question"):
        return where
    if "question_text" in row:  # the IRCoT processed rows
        objects = row.get("answers_objects")
        if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
            raise _RowError(f"{where}: 'answers_objects' must be a list of {{spans: [...]}}")
        spans = [s for o in objects for s in o.get("spans", [])]
        return QACase(_row_id(where, row, "question_id"), _text(where, row, "question_text"),
                      _strings(where, spans, "answers_objects[].spans"))
    answer = row.get("answer")
    answers = [answer] if isinstance(answer, str) else answer
    return QACase(_row_id(where, row, "_id", "id"), _text(where, row, "question"),
                  _strings(where, answers, "answer"))


_ROW_READERS: dict[QAFormat, Callable[[str, Any], QACase | str]] = {
    "jsonl": _ours, "hotpotqa": _hotpot}


def _squad(doc: Mapping[str, Any]) -> Iterator[QACase | str]:
    """Each question as a case, or its place when it is blank (skipped)."""
    def items(value: Any, where: str, what: str) -> list[Any]:
        if not isinstance(value, list):
            raise _RowError(f"{where}: '{what}' must be a list (SQuAD format)")
        return value

    for i, article in enumerate(items(doc.get("data"), "data", "data")):
        where = f"data[{i}]"
        if not isinstance(article, dict):
            raise _RowError(f"{where}: expected an object with 'paragraphs'")
        for j, para in enumerate(items(article.get("paragraphs"), where, "paragraphs")):
            at = f"{where}.paragraphs[{j}]"
            if not isinstance(para, dict):
                raise _RowError(f"{at}: expected an object with 'qas'")
            for k, qa in enumerate(items(para.get("qas"), at, "qas")):
                place = f"{at}.qas[{k}]"
                if not isinstance(qa, dict):
                    raise _RowError(f"{place}: expected an object with 'question'")
                if _blank(qa, "question"):
                    yield place
                    continue
                answers = qa.get("answers", [])
                if not isinstance(answers, list) or not all(
                        isinstance(a, dict) and isinstance(a.get("text"), str) for a in answers):
                    raise _RowError(f"{place}: 'answers' must be a list of {{text, ...}}")
                texts = [] if qa.get("is_impossible") else [a["text"] for a in answers]
                yield QACase(_row_id(place, qa, "id"), _text(place, qa, "question"),
                             _strings(place, [t for t in texts if t.strip()], "answers"))
