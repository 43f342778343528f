"""``reactive-rag summarize DOC``: starts the stored summary task and follows it to its end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from reactive_rag.cli._main import main
from reactive_rag.store import SqliteRunStore, TaskStatus

GUIDE = "\n\n".join(
    f"Section {i}. The deployment of release {i} starts the containers, mounts the "
    f"volumes and checks the health endpoint before traffic moves over. Operators "
    f"roll back release {i} when the error rate rises above the agreed limit."
    for i in range(12))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("guides")
    (folder / "deployment.md").write_text(f"# Deployment guide\n\n{GUIDE}\n")
    (folder / "tea.md").write_text("# Tea\n\nGreen tea is steeped in hot water.\n")
    root = tmp_path_factory.mktemp("root")
    assert main(["index", str(folder), "--collection", "guides", "--root", str(root)]) == 0
    return root


def test_summarize_prints_the_summary_and_keeps_the_task_in_the_store(
        indexed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "runs.db"
    capsys.readouterr()
    code = main(["summarize", "deployment.md", "--root", str(indexed), "--store", str(store),
                 "--sentences", "3"])
    captured = capsys.readouterr()

    assert code == 0, captured.err
    lines = [line for line in captured.out.splitlines() if line.startswith("- ")]
    assert len(lines) == 3 and all("[deployment.md#" in line for line in lines)
    assert "chunk 1/" in captured.err  # followed: progress per chunk

    async def stored() -> list[TaskStatus]:
        async with SqliteRunStore(store) as s:
            ids = [line.split()[1].rstrip(":") for line in captured.err.splitlines()
                   if line.startswith("task ") and "summarising" in line]
            return [(await s.get_task(i)).status for i in ids]

    assert asyncio.run(stored()) == [TaskStatus.DONE]


def test_summarize_json_is_the_task_as_the_api_shows_it(
        indexed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["summarize", "deployment.md", "-c", "guides", "--root", str(indexed),
                 "--store", str(tmp_path / "runs.db"), "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out)

    assert code == 0
    assert out["status"] == "done" and out["doc_id"] == "deployment.md"
    assert out["collection"] == "guides" and out["links"]["self"] == f"/v1/tasks/{out['task_id']}"
    assert out["result"]["text"] and out["result"]["chunks"] >= 2


def test_summarize_an_unknown_document_says_so_and_starts_nothing(
        indexed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "runs.db"
    capsys.readouterr()
    code = main(["summarize", "security.md", "--root", str(indexed), "--store", str(store)])
    err = capsys.readouterr().err

    assert code == 2 and "security.md" in err and "no indexed collection" in err
    code = main(["summarize", "security.md", "-c", "guides", "--root", str(indexed),
                 "--store", str(store)])
    assert code == 2 and "no document 'security.md'" in capsys.readouterr().err

    async def unfinished() -> int:
        async with SqliteRunStore(store) as s:
            return len(await s.list_unfinished_tasks())

    assert asyncio.run(unfinished()) == 0
