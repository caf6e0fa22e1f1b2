"""Statepatch (docs/statewire.md, "Statepatch"): JSON Patch (RFC 6902) with
each pointer split into its steps, applied through `jsonpatch`.

Owns: turning a step list into a JSON Pointer and applying a whole list
or nothing. Must never: change its input in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonpatch  # type: ignore[import-untyped,unused-ignore]  # typed only in some releases

__all__ = ["apply", "pointer", "PatchError"]


class PatchError(ValueError):
    """Operations that are malformed or do not apply; nothing changed."""


def pointer(path: Sequence[str | int]) -> str:
    """`["a", 0]` as `/a/0` (`~` and `/` escaped, RFC 6901)."""
    return "".join("/" + str(step).replace("~", "~0").replace("/", "~1") for step in path)


def apply(document: Any, ops: Sequence[dict[str, Any]]) -> Any:
    """`document` after `ops` (a new value)."""
    steps = []
    for op in ops:
        if op.get("op") not in ("add", "remove", "replace") or not isinstance(op.get("path"), list):
            raise PatchError(f"not a Statepatch operation: {op!r}")
        step = {"op": op["op"], "path": pointer(op["path"])}
        if op["op"] != "remove":
            if "value" not in op:
                raise PatchError(f"{op['op']} needs a value")
            step["value"] = op["value"]
        steps.append(step)
    try:
        return jsonpatch.apply_patch(document, steps, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        raise PatchError(str(error)) from error
