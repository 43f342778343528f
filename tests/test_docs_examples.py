"""The user guide stays true: every ```python block of README.md and docs/ runs as written.

Each block runs in a fresh namespace, in a fresh working folder, against a small
collection ``notes`` that the fixture indexes with the real CLI
(``reactive-rag index ./notes --collection notes``, as the guide says) into a throwaway
``$REACTIVE_RAG_HOME``. A block with top-level ``await`` runs under ``asyncio.run``. A
block that needs something this machine may lack (a chat server, Ray, a network) is
marked on the line before its fence with ``<!-- docs-test: skip (the reason) -->`` and is
reported skipped with that reason. A block that prints a run's answer about Raft must
name Raft's designer (the run really answered).

Also: README.md stays under 10 KiB with its two quickstart commands, every page of
docs/ is in mkdocs.yml's nav (and every nav entry exists), timing figures stay on the
benchmarks page, and the concepts page lists exactly the registered event types and
the exported operators.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]

SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->\s*$")

# The small collection the examples ask about (the guide's own ./notes folder).
NOTES = {
    "raft.md": "# Raft\n\nRaft is a consensus algorithm. It was designed by Diego Ongaro and "
               "John Ousterhout at Stanford University.\n",
    "aspirin.md": "# Aspirin\n\nAspirin is a medication used to reduce pain, fever, or "
                  "inflammation. Aspirin was first isolated by Felix Hoffmann, a chemist at "
                  "Bayer, in 1897.\n",
    "tea.md": "# Tea\n\nTea is an aromatic beverage prepared by pouring hot water over cured "
              "leaves of Camellia sinensis.\n",
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    blocks = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                start = i
                body = []
                i += 1
                while lines[i].strip() != "```":
                    body.append(lines[i])
                    i += 1
                marker = SKIP.match(lines[start - 1].strip()) if start else None
                blocks.append(Block(page, start + 1, "\n".join(body) + "\n",
                                    marker.group("reason") if marker else None))
            i += 1
    return blocks


BLOCKS = _blocks()


@pytest.fixture(scope="module")
def notes_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``$REACTIVE_RAG_HOME`` holding the collection ``notes``, indexed by the CLI."""
    home = tmp_path_factory.mktemp("home")
    work = tmp_path_factory.mktemp("work")
    notes = work / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "reactive_rag", "index", "./notes", "--collection", "notes",
         "--quiet"],
        cwd=work, env=_env(home), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return home


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "REACTIVE_RAG_HOME": str(home)}


def _run(block: Block) -> str:
    """Run one block as a script; what it printed."""
    code = compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if code.co_flags & inspect.CO_COROUTINE:
            asyncio.run(eval(code, namespace))
        else:
            exec(code, namespace)
    return out.getvalue()


def test_there_are_examples_and_few_skips() -> None:
    assert len(BLOCKS) >= 10
    skipped = [b.name for b in BLOCKS if b.skip]
    assert len(skipped) <= len(BLOCKS) // 4, skipped


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_the_example_runs(block: Block, notes_home: Path, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    if block.skip:
        pytest.skip(block.skip)
    monkeypatch.setenv("REACTIVE_RAG_HOME", str(notes_home))
    monkeypatch.chdir(tmp_path)
    printed = _run(block)
    if "Raft" in block.code and ".answer" in block.code:
        assert "Ongaro" in printed, f"{block.name} printed:\n{printed}"


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    size = len(README.read_bytes())
    assert size < 10 * 1024, f"README.md is {size} bytes; keep it under 10 KiB"
    text = README.read_text(encoding="utf-8")
    quickstart = text[text.index("## Quickstart"):]
    quickstart = quickstart[:quickstart.index("\n## ", 1)]
    commands = [line.split("#")[0].strip() for line in quickstart.splitlines()
                if line.startswith("make ")]
    assert commands == ["make demo", "make test"]
    assert text.index("```python") < len(text) // 2, "the embedding example belongs near the top"


def _nav() -> list[str]:
    text = MKDOCS.read_text(encoding="utf-8")
    assert re.search(r"^theme:\n\s+name: material$", text, flags=re.M)
    nav = text[text.index("\nnav:\n"):]
    return re.findall(r"^\s+-\s+[^:\n]+:\s*(\S+\.md)\s*$", nav, flags=re.M)


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    listed = _nav()
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages
    assert len(set(listed)) == len(listed)


def test_timing_figures_stay_on_the_benchmarks_page() -> None:
    for page in PAGES:
        if page.name == "benchmarks.md":
            continue
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"under load \d", text), page
        assert not re.search(r"\bp(50|99)\b", text), page


def _table(text: str, header: str) -> list[list[str]]:
    """The cells (backticks stripped) of the markdown table whose header starts ``header``."""
    lines = text[text.index(header):].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([c.strip().strip("`") for c in line.split("|")[1:-1]])
    return rows


def test_the_concepts_page_lists_exactly_the_event_types() -> None:
    import reactive_rag.tasks  # noqa: F401  (registers the task.* events)
    from reactive_rag.events import EVENT_TYPES

    rows = _table((DOCS / "concepts.md").read_text(encoding="utf-8"), "| type | class |")
    listed = [r[0] for r in rows]
    assert listed == sorted(listed), "keep the table sorted by type"
    missing, extra = set(EVENT_TYPES) - set(listed), set(listed) - set(EVENT_TYPES)
    rows_to_add = "\n".join(f"| `{t}` | `{EVENT_TYPES[t].__name__}` | ... |"
                            for t in sorted(missing))
    assert not missing, f"docs/concepts.md lacks these event types; add rows:\n{rows_to_add}"
    assert not extra, f"docs/concepts.md lists event types no class registers: {sorted(extra)}"
    for type_, cls, _ in rows:
        assert EVENT_TYPES[type_].__name__ == cls, type_


def test_the_concepts_page_lists_exactly_the_exported_operators() -> None:
    import reactive_rag
    from streams import operators

    rows = _table((DOCS / "concepts.md").read_text(encoding="utf-8"), "| operator |")
    listed = {re.sub(r"\(.*", "", r[0]) for r in rows}
    assert listed == set(operators.__all__)
    assert listed <= set(reactive_rag.__all__)
