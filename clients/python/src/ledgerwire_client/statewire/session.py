"""What a Statewire client keeps between runs: its client id and, per
durable lane, the commands not yet answered, in storage format 5 (formats
1 to 4 are upgraded on load). The record is plain JSON in the same shape
the TypeScript client stores, so either can read the other's.

Owns: the record's shape, upgrading older formats, checking stored
commands against the current offers and the `migrate(record, current)`
policy, and the storage resources (`MemorySession`, `FileSession`,
`MemoryDocuments`, `FileDocuments`).
Must never: renumber a command the server may have admitted, or leave a
half-written file behind (files are replaced whole).
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from .protocol import Offers, VersionRange

__all__ = [
    "SESSION_FORMAT",
    "MAX_VERDICTS",
    "CurrentContracts",
    "Migrate",
    "SessionStorage",
    "DocumentsStorage",
    "MemorySession",
    "FileSession",
    "MemoryDocuments",
    "FileDocuments",
    "upgrade_session",
    "restore_session",
    "new_session",
]

#: The storage format this client writes.
SESSION_FORMAT = 5
#: Answers a lane keeps for a restarted program to read (`verdicts`), newest first.
MAX_VERDICTS = 64

#: A session record: `{"format": 5, "clientId", "lanes": {protocol: lane}}`.
Record = dict[str, Any]


@dataclass(frozen=True)
class CurrentContracts:
    """What this client offers now; `migrate` checks stored commands against it."""

    wire_version: VersionRange
    application_protocols: Offers
    format: int = SESSION_FORMAT

    def compatible(self, contract: Any, protocol: str) -> bool:
        """Whether a stored command's recorded contract meets the current offers."""
        if not isinstance(contract, dict):
            return False
        try:
            if not VersionRange.from_json(contract.get("wire")).overlaps(self.wire_version):
                return False
            recorded = contract.get("protocol")
            if self.application_protocols == "*" or recorded is None:
                return True
            offer = next((o for o in self.application_protocols if o.covers(protocol)), None)
            return offer is not None and VersionRange.from_json(recorded).overlaps(offer.range)
        except ValueError:
            return False


#: Rewrites a record whose stored commands no longer fit `current`, or
#: returns None to discard the session and start a new client identity.
Migrate = Callable[[Record, CurrentContracts], "Record | None"]


class SessionStorage(Protocol):
    """Where a client keeps its session record."""

    migrate: Migrate | None

    def load(self) -> Any: ...

    def save(self, record: Record) -> None: ...

    def clear(self) -> None: ...


class DocumentsStorage(Protocol):
    """A cache of keyed documents under `[namespace, protocol, *absolute_key]`."""

    def load(self, identity: list[str]) -> dict[str, Any] | None: ...

    def save(self, identity: list[str], entry: dict[str, Any]) -> None: ...


def mint_client_id() -> str:
    """A fresh client id: 32 hex digits."""
    return secrets.token_hex(16)


def new_session() -> Record:
    return {"format": SESSION_FORMAT, "clientId": mint_client_id(), "lanes": {}}


def _lanes(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    lanes = record.get("lanes")
    return {str(k): dict(v) for k, v in lanes.items() if isinstance(v, dict)} if isinstance(lanes, dict) else {}


def _command(command: Any) -> dict[str, Any] | None:
    if not isinstance(command, dict) or not isinstance(command.get("seq"), int) or not command.get("method"):
        return None
    out = {
        "seq": int(command["seq"]),
        "method": str(command["method"]),
        "params": list(command.get("params") or []),
        "contract": command.get("contract"),
    }
    if "localMeta" in command:
        out["localMeta"] = command["localMeta"]
    return out


def upgrade_session(stored: Any) -> Record | None:
    """Any stored record, formats 1 to 5, as format 5; None when it is not one.

    1: `{clientId, protocol, nextSeq, commands: [{seq, method, params}]}`, one lane;
    2: `{format: 2, clientId, lanes: {protocol: {nextSeq, commands}}}`;
    3: commands carry `contract: {wire, protocol}`; 4: lanes carry `outbox`;
    5: lanes carry `removed`, `verdicts` and `inbox`.
    """
    if not isinstance(stored, dict) or not isinstance(stored.get("clientId"), str):
        return None
    record: dict[str, Any] = copy.deepcopy(stored)
    if record.get("format") is None:
        protocol = record.get("protocol")
        lanes = {}
        if isinstance(protocol, str):
            lanes[protocol] = {"nextSeq": record.get("nextSeq", 1), "commands": record.get("commands") or []}
        record = {"format": 2, "clientId": record["clientId"], "lanes": lanes}
    if record.get("format") == 2:
        lanes = _lanes(record)
        for lane in lanes.values():
            lane["commands"] = [{**c, "contract": None} for c in lane.get("commands") or [] if isinstance(c, dict)]
        record = {**record, "format": 3, "lanes": lanes}
    if record.get("format") == 3:
        record = {**record, "format": 4, "lanes": {n: {**lane, "outbox": []} for n, lane in _lanes(record).items()}}
    if record.get("format") == 4:
        fresh = {"removed": [], "verdicts": {}, "inbox": {"watermark": 0, "cursor": 0}}
        record = {**record, "format": 5, "lanes": {n: {**lane, **fresh} for n, lane in _lanes(record).items()}}
    if record.get("format") != SESSION_FORMAT:
        return None
    lanes = {}
    for name, lane in _lanes(record).items():
        commands = [c for c in map(_command, lane.get("commands") or []) if c is not None]
        stored_inbox = lane.get("inbox")
        inbox: dict[str, Any] = stored_inbox if isinstance(stored_inbox, dict) else {}
        lanes[name] = {
            "nextSeq": int(lane.get("nextSeq") or 1),
            "commands": sorted(commands, key=lambda c: int(c["seq"])),
            "outbox": list(lane.get("outbox") or []),
            "removed": [int(s) for s in lane.get("removed") or []],
            "verdicts": dict(lane.get("verdicts") or {}),
            "inbox": {"watermark": int(inbox.get("watermark", 0)), "cursor": int(inbox.get("cursor", 0))},
        }
    return {"format": SESSION_FORMAT, "clientId": record["clientId"], "lanes": lanes}


def _incompatible(record: Record, current: CurrentContracts) -> int:
    return sum(
        not current.compatible(command.get("contract"), name)
        for name, lane in record["lanes"].items()
        for command in [*lane["commands"], *lane["outbox"]]
    )


Outcome = Literal["new", "loaded", "migrated", "discarded"]


def restore_session(stored: Any, current: CurrentContracts, migrate: Migrate | None) -> tuple[Record, Outcome]:
    """The session to start from: the stored record upgraded to format 5 and,
    when a stored command no longer fits the current offers, passed to
    `migrate(record, current)`. None from `migrate` discards the record (a
    new client identity); entries still incompatible after it (or with no
    `migrate`) are dropped locally: their seqs go to `removed`, giving up
    their replay, not cancelling them."""
    record = upgrade_session(stored)
    if record is None:
        return new_session(), "new"
    outcome: Outcome = "loaded"
    if migrate is not None and _incompatible(record, current) > 0:
        migrated = migrate(copy.deepcopy(record), current)
        if migrated is None:
            return new_session(), "discarded"
        record = upgrade_session(migrated) or new_session()
        outcome = "migrated"
    for name, lane in record["lanes"].items():
        keep = [c for c in lane["commands"] if current.compatible(c.get("contract"), name)]
        dropped = [c["seq"] for c in lane["commands"] if not current.compatible(c.get("contract"), name)]
        lane["commands"] = keep
        lane["removed"] = [*lane["removed"], *dropped]
        lane["outbox"] = [c for c in lane["outbox"] if current.compatible(c.get("contract"), name)]
    return record, outcome


class MemorySession:
    """A session kept in memory (tests, or a program that forgets when it exits)."""

    def __init__(self, initial: Any = None, *, migrate: Migrate | None = None) -> None:
        self.stored: Any = copy.deepcopy(initial)
        self.migrate = migrate

    def load(self) -> Any:
        return copy.deepcopy(self.stored)

    def save(self, record: Record) -> None:
        self.stored = json.loads(json.dumps(record))

    def clear(self) -> None:
        self.stored = None


def _write_whole(path: Path, text: str) -> None:
    """Replaces `path` with `text` atomically and durably."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileSession:
    """A session in a JSON file, replaced whole on every save. Keep one file
    per principal and thread."""

    def __init__(self, path: str | os.PathLike[str], *, migrate: Migrate | None = None) -> None:
        self.path = Path(path)
        self.migrate = migrate

    def load(self) -> Any:
        try:
            return json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def save(self, record: Record) -> None:
        _write_whole(self.path, json.dumps(record))

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


class MemoryDocuments:
    """A document cache in memory, keyed by `[namespace, protocol, *key]`."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    def load(self, identity: list[str]) -> dict[str, Any] | None:
        return self.entries.get(json.dumps(identity))

    def save(self, identity: list[str], entry: dict[str, Any]) -> None:
        self.entries[json.dumps(identity)] = entry


class FileDocuments:
    """A document cache in one JSON file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _all(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
            return data if isinstance(data, dict) else {}
        except (FileNotFoundError, ValueError):
            return {}

    def load(self, identity: list[str]) -> dict[str, Any] | None:
        entry = self._all().get(json.dumps(identity))
        return entry if isinstance(entry, dict) else None

    def save(self, identity: list[str], entry: dict[str, Any]) -> None:
        entries = self._all()
        entries[json.dumps(identity)] = entry
        _write_whole(self.path, json.dumps(entries))
