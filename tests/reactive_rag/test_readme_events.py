"""The README's "Events and operators" section stays true: its lists are the code's, and
its example runs as written."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

import reactive_rag.tasks  # noqa: F401  (registers the task.* events the README lists too)
from streams import EVENT_TYPES, operators

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("### Events and operators")
    end = text.index("\n## ", start)
    return text[start:end]


def _table_rows(section: str, header: str) -> list[str]:
    """First cells (without backticks) of the markdown table under ``header``."""
    lines = section[section.index(header):].splitlines()[2:]  # past the header and rule
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip().strip("`"))
    return rows


def test_the_event_types_listed_are_exactly_the_registered_ones() -> None:
    listed = _table_rows(_section(), "| type | class |")
    assert listed == sorted(listed), "keep the table sorted by type"
    missing, extra = set(EVENT_TYPES) - set(listed), set(listed) - set(EVENT_TYPES)
    expected = "\n".join(f"| `{t}` | `{EVENT_TYPES[t].__name__}` | ... |" for t in sorted(missing))
    assert not missing, f"README lacks these event types; add rows:\n{expected}"
    assert not extra, f"README lists event types no class registers: {sorted(extra)}"


def test_the_class_named_for_each_type_is_its_class() -> None:
    for line in _section().splitlines():
        cells = [c.strip().strip("`") for c in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0] in EVENT_TYPES:
            assert EVENT_TYPES[cells[0]].__name__ == cells[1], line


def test_the_operators_listed_are_exactly_the_exported_ones() -> None:
    listed = {re.sub(r"\(.*", "", row) for row in _table_rows(_section(), "| operator |")}
    assert listed == set(operators.__all__)


def test_the_example_runs_and_prints_what_it_says(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its mkdtemp() lands here
    blocks = re.findall(r"```python\n(.*?)```", _section(), flags=re.S)
    assert len(blocks) == 1
    code = blocks[0]
    assert "of_type(" in code and "async for event in handle" in code
    exec(compile(code, "README.md:events-example", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "searching: " in out  # the operator's subscriber saw the searches
    assert "answered" in out and "Ongaro" in out  # the loop reached run.finished
