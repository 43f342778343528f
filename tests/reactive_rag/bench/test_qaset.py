"""``bench/_qaset.py``: the one way hand-written question sets are loaded, split and checked.

``bench/stdlibqa.py`` and ``bench/docsqa.py`` both rest on it, so a malformed
file, a gold string the corpus lacks or a loose match would skew both benches'
figures. Made-up rows only; no corpus is indexed.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests._bench import bench_module

bench_module("hotpot")  # _qaset's sibling import
qa: ModuleType = bench_module("_qaset")


def _row(rid: Any, answers: list[str] | None = None, answerable: bool = True,
         **extra: Any) -> dict[str, Any]:
    return {"id": rid, "question": f"question {rid}?",
            "answers": ["gold"] if answers is None else answers, "answerable": answerable,
            **extra}


def _write(path: Path, rows: list[dict[str, Any]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail, encoding="utf-8")
    return path


def test_a_well_formed_file_loads_in_order(tmp_path: Path) -> None:
    rows = [_row("q-000"), _row("q-001", [], answerable=False), _row("q-002", doc="a")]
    assert qa.load_questions(_write(tmp_path / "q.jsonl", rows)) == rows


def test_a_malformed_file_is_refused_listing_every_problem(tmp_path: Path) -> None:
    rows = [
        _row(7),                                     # id not a string (docsqa's old ids)
        _row("dup"), _row("dup"),                    # repeated id
        {**_row("empty"), "question": "  "},         # empty question
        _row("nogold", []),                          # answerable without gold
        {**_row("flag"), "answerable": "yes"},       # answerable not a boolean
        _row("doc", doc=3),                          # doc not a document id
    ]
    path = _write(tmp_path / "bad.jsonl", rows, tail="{not json\n")
    with pytest.raises(qa.QuestionSetError) as err:
        qa.load_questions(path)
    text = str(err.value)
    for expected in ("line 1: id missing or repeated (7)",
                     "line 3: id missing or repeated ('dup')",
                     "line 4: empty question",
                     "line 5: answerable without gold strings",
                     "line 6: answerable must be true or false",
                     "line 7: doc must be a document id",
                     "line 8: not JSON"):
        assert expected in text, (expected, text)


def test_halves_alternate_by_row_position() -> None:
    rows = [_row(f"q-{i:03d}") for i in range(7)]
    tune, report = qa.split_rows(rows, "tune"), qa.split_rows(rows, "report")
    assert [r["id"] for r in tune] == ["q-000", "q-002", "q-004", "q-006"]
    assert [r["id"] for r in report] == ["q-001", "q-003", "q-005"]
    assert qa.split_rows(rows, "both") == rows


def test_contains_gold_folds_width_case_and_spaces() -> None:
    assert qa.contains_gold("Use  SHUTIL.CopyTree to\n copy it", ["shutil.copytree to copy"])
    full_width = "\uff14\uff10\uff19\uff16"  # 4096 in full-width digits
    assert qa.contains_gold(f"the default is {full_width} bytes", ["4096"])
    assert qa.contains_gold("the default is 4096 bytes", [full_width])
    assert qa.contains_gold("PRAGMA\tjournal_mode = WAL", ["journal_mode = wal"])
    assert not qa.contains_gold("nothing here", ["4096"])
    assert not qa.contains_gold("anything", [])


def test_contains_gold_takes_whole_numbers_and_words_only() -> None:
    assert not qa.contains_gold("up to 100 databases", ["10"])
    assert qa.contains_gold("up to 10 databases (125 at most)", ["10"])
    assert not qa.contains_gold("use sorted()", ["sort"])
    assert not qa.contains_gold("statistics.median_low", ["median"])
    # an edge that is punctuation needs no boundary; a digit may touch a letter
    assert qa.contains_gold("Enum(value='Color')", ["Enum("])
    assert qa.contains_gold("'/El%20Ni%C3%B1o/'", ["%20"])


def test_a_gold_not_in_the_corpus_is_refused() -> None:
    texts = {"a": "The page size is 4096 bytes.", "b": "At most 125 attached databases."}
    rows = [_row("ok", ["4096"]), _row("off", [], answerable=False),
            _row("missing", ["8192", "4096"]), _row("partnum", ["12"]),
            _row("elsewhere", ["125"], doc="a"), _row("nodoc", ["4096"], doc="z")]
    with pytest.raises(qa.QuestionSetError) as err:
        qa.check_gold(rows, texts)
    text = str(err.value)
    assert text.startswith("4 question(s)"), text
    assert "missing: not in the corpus: ['8192']" in text
    assert "partnum: not in the corpus: ['12']" in text
    assert "elsewhere: no gold string in its document 'a'" in text
    assert "nodoc: no document 'z' in the corpus" in text
    assert "ok:" not in text and "off:" not in text
    qa.check_gold(rows[:2], texts)  # nothing missing: no error
