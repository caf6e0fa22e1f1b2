"""Session storage format 5: records of formats 1 to 4 load upgraded, a
stored command whose contract no longer fits goes to `migrate(record,
current)`, and `None` from it starts a new client identity. The last
three against the real server: what was stored is (or is not) sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import TOKEN, Servers
from ledgerwire_client.statewire import (
    CurrentContracts,
    FileSession,
    MemorySession,
    Offer,
    StatewireClient,
    VersionRange,
    upgrade_session,
)
from ledgerwire_client.statewire.session import restore_session

ACME = Offer("acme-chat", VersionRange("2026-09-13"))
WIRE = {"version": "2026-09-30", "minVersion": "2026-09-30"}
CONTRACT = {"wire": WIRE, "protocol": {"version": "2026-09-13", "minVersion": "2026-09-13"}}
BUMP = {"seq": 1, "method": "bump", "params": []}

FORMATS: dict[int, dict[str, Any]] = {
    1: {"clientId": "c-one", "protocol": "acme-chat", "nextSeq": 2, "commands": [BUMP]},
    2: {"format": 2, "clientId": "c-two", "lanes": {"acme-chat": {"nextSeq": 2, "commands": [BUMP]}}},
    3: {"format": 3, "clientId": "c-three", "lanes": {"acme-chat": {"nextSeq": 2, "commands": [{**BUMP, "contract": CONTRACT}]}}},
    4: {
        "format": 4,
        "clientId": "c-four",
        "lanes": {"acme-chat": {"nextSeq": 2, "commands": [{**BUMP, "contract": CONTRACT}], "outbox": []}},
    },
}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_older_format_upgrades_to_five(version: int) -> None:
    record = upgrade_session(FORMATS[version])
    assert record is not None and record["format"] == 5
    lane = record["lanes"]["acme-chat"]
    assert lane["nextSeq"] == 2 and [c["seq"] for c in lane["commands"]] == [1]
    assert lane["outbox"] == [] and lane["removed"] == [] and lane["verdicts"] == {}
    assert lane["inbox"] == {"watermark": 0, "cursor": 0}
    assert lane["commands"][0]["contract"] == (CONTRACT if version >= 3 else None)


def test_a_record_of_no_known_format_starts_a_new_session() -> None:
    current = CurrentContracts(VersionRange("2026-09-30"), (ACME,))
    record, outcome = restore_session({"format": 9, "clientId": "x", "lanes": {}}, current, None)
    assert outcome == "new" and record["clientId"] != "x" and record["format"] == 5


def test_without_migrate_an_incompatible_command_is_dropped_locally() -> None:
    current = CurrentContracts(VersionRange("2026-09-30"), (ACME,))
    record, outcome = restore_session(FORMATS[1], current, None)
    assert outcome == "loaded" and record["clientId"] == "c-one"
    assert record["lanes"]["acme-chat"]["commands"] == [] and record["lanes"]["acme-chat"]["removed"] == [1]


def client(base: str, session: Any) -> StatewireClient:
    return StatewireClient.sse(
        f"{base}/threads/stored", token=TOKEN, application_protocols=(ACME,), session=session, backoff_s=(0.05, 0.5)
    )


async def test_a_format_one_session_is_migrated_and_its_command_runs(serve: Servers, tmp_path: Path) -> None:
    server = serve("--statewire-examples")
    path = tmp_path / "session.json"
    path.write_text(json.dumps(FORMATS[1]))
    seen: list[CurrentContracts] = []

    def migrate(record: dict[str, Any], current: CurrentContracts) -> dict[str, Any]:
        seen.append(current)
        for lane in record["lanes"].values():
            for command in lane["commands"]:
                command["contract"] = CONTRACT
        return record

    async with client(server.base, FileSession(path, migrate=migrate)) as c:
        assert c.session_outcome == "migrated" and c.client_id == "c-one"
        assert seen and seen[0].wire_version == VersionRange("2026-09-30")
        await c.until(lambda c: c.verdict("acme-chat", 1) is not None)
        assert c.verdict("acme-chat", 1) == {"ok": 1}
        assert await c.send("bump") == 2, "the next seq follows the stored one"
    stored = json.loads(path.read_text())
    assert stored["format"] == 5 and stored["clientId"] == "c-one"


async def test_migrate_returning_none_starts_a_new_identity_and_sends_nothing_stored(serve: Servers) -> None:
    server = serve("--statewire-examples")
    session = MemorySession(FORMATS[2], migrate=lambda record, current: None)
    async with client(server.base, session) as c:
        assert c.session_outcome == "discarded" and c.client_id != "c-two"
        assert await c.send("bump") == 1, "the stored bump was never sent"
        assert c.document("acme-chat")["counter"] == 1
    assert session.stored["clientId"] == c.client_id


async def test_a_format_four_session_resumes_its_client_and_lane(serve: Servers) -> None:
    server = serve("--statewire-examples")
    session = MemorySession(FORMATS[4])
    async with client(server.base, session) as c:
        assert c.session_outcome == "loaded" and c.client_id == "c-four"
        await c.until(lambda c: c.verdict("acme-chat", 1) is not None)
        assert c.verdict("acme-chat", 1) == {"ok": 1}
