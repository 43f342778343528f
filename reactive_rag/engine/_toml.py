"""Reading a TOML config file with the one error message every loader gives."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["read_toml"]


def read_toml(path: str | os.PathLike[str], error: type[Exception]) -> dict[str, Any]:
    """The parsed file; an unreadable or malformed one raises ``error`` saying which."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise error(f"cannot read config {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise error(f"config {path} is not valid TOML: {exc}") from exc
