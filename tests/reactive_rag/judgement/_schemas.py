"""A check of the JSON schemas the model judges send: valid under OpenAI's strict mode."""

from __future__ import annotations

from typing import Any


def strict_problems(schema: Any, path: str = "$") -> list[str]:
    """Where ``schema`` breaks OpenAI strict mode (objects closed, every property required)."""
    problems: list[str] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            props = list(schema.get("properties", {}))
            if schema.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties is not false")
            if sorted(schema.get("required", [])) != sorted(props):
                problems.append(f"{path}: required {schema.get('required')} != {props}")
        for key, sub in schema.items():
            problems += strict_problems(sub, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            problems += strict_problems(sub, f"{path}[{i}]")
    return problems
