"""`ledgerwire_client.statewire` against the real server with the example
protocols (`serve --statewire-examples`): selection, context, documents and
their subscriptions, synced documents, held commands, both transports, a
refused token, the bounded retry of a refused offer, and commands answered
exactly once across a SIGKILLed host and a restarted program."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import TOKEN, Servers
from ledgerwire_client.statewire import (
    CommandRejected,
    FileSession,
    MemorySession,
    Offer,
    StatewireClient,
    StatewireStopped,
    VersionRange,
)

EXAMPLES = ("--statewire-examples",)
ACME = Offer("acme-chat", VersionRange("2026-09-13"))
HARNESS = Offer("harness-sdk", VersionRange("2026-12-01"))
WAIT_S = 30.0
FAST = {"backoff_s": (0.05, 0.5)}


def acme(base: str, thread: str, transport: str = "sse", **options: Any) -> StatewireClient:
    make = StatewireClient.websocket if transport == "websocket" else StatewireClient.sse
    options = {"token": TOKEN, "protocol": "acme-chat", "application_protocols": (ACME,), **FAST, **options}
    return make(f"{base}/threads/{thread}", **options)


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_context_commands_and_documents_over_both_transports(serve: Servers, transport: str) -> None:
    server = serve(*EXAMPLES)
    async with acme(server.base, "t1", transport, application_protocols=(HARNESS, ACME)) as client:
        assert client.selection is not None and client.selection.version == "2026-09-30"
        assert {p.name for p in client.selection.protocols} >= {"acme-chat", "harness-sdk", "harness-sdk/interest"}
        changed: list[list[int]] = []
        client.subscribe(changed.append)
        client.set_context("acme-chat", {"locale": "de"})
        assert await client.send("setTheme", "dark", protocol="acme-chat") == {"theme": "dark", "locale": "de"}
        assert client.document("acme-chat")["theme"] == "dark", "ops land before their answer"
        assert changed, "the subscription heard the change"
        assert client.document("harness-sdk")["conversation_id"] == "t1"
        with pytest.raises(ValueError):
            client.send("anything", protocol="acme-status")
        with pytest.raises(CommandRejected) as refused:
            await client.send("setTheme", 42, protocol="acme-chat")
        assert refused.value.code == "invalid-params"


async def test_a_synced_document_and_a_held_command_with_local_metadata(serve: Servers, tmp_path: Path) -> None:
    server = serve(*EXAMPLES)
    session = FileSession(tmp_path / "session.json")
    async with acme(server.base, "t2", session=session) as client:
        preferences = client.synced_document("acme-chat/preferences")
        await preferences.set({"locale": "fr"})
        await preferences.patch([{"op": "add", "path": ["density"], "value": "compact"}])
        assert client.document("acme-chat/preferences") == {"locale": "fr", "density": "compact"}
        held = client.send("bump", hold=True, local_meta={"why": "a test"})
        await asyncio.sleep(0)  # a flush runs: the held command stays queued
        assert held.seq is None
        stored = json.loads((tmp_path / "session.json").read_text())
        assert stored["format"] == 5
        assert stored["lanes"]["acme-chat"]["outbox"][0]["localMeta"] == {"why": "a test"}
        held.release()
        assert await asyncio.wait_for(held, WAIT_S) == 1
        assert held.seq == 1 and client.verdict("acme-chat", 1) == {"ok": 1}


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_a_refused_token_stops_the_client(serve: Servers, transport: str) -> None:
    server = serve(*EXAMPLES)
    client = acme(server.base, "t3", transport, token="not-the-token")
    with pytest.raises(StatewireStopped) as stopped:
        await asyncio.wait_for(client.connect(), WAIT_S)
    assert stopped.value.fin is not None and stopped.value.fin["code"] == "unauthorized"
    assert client.status == "failed"
    await client.close()


async def test_a_callable_token_is_asked_again_for_each_attach(serve: Servers) -> None:
    server = serve(*EXAMPLES)
    tokens: list[str] = []

    def token() -> str:
        tokens.append(TOKEN)
        return TOKEN

    async with acme(server.base, "t4", token=token) as client:
        assert await client.send("bump") == 1
        asked = len(tokens)
        server.restart()
        await client.until(lambda c: c.attaches == 2, WAIT_S)
        assert await client.send("bump") == 2
        assert len(tokens) > asked, "a reconnect asks for the token again"


async def test_an_unsupported_offer_is_retried_for_a_bounded_time_then_stops(serve: Servers) -> None:
    server = serve(*EXAMPLES)
    client = acme(server.base, "t5", retry_for_s=1.0, wire_version=VersionRange("2027-01-01"))
    with pytest.raises(StatewireStopped) as stopped:
        await asyncio.wait_for(client.connect(), WAIT_S)
    fin = stopped.value.fin
    assert fin is not None and fin["code"] == "unsupported-version" and fin["status"] == 406
    assert fin["payload"]["version"] == "2026-11-02", "the refusal names what the host serves"
    await client.close()


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_sigkill_mid_burst_answers_every_command_exactly_once(serve: Servers, tmp_path: Path, transport: str) -> None:
    server = serve(*EXAMPLES)
    burst = 120
    async with acme(server.base, "burst", transport, session=FileSession(tmp_path / "s.json")) as client:
        commands = []
        killed_at = None
        for index in range(burst):
            commands.append(client.send("bump"))
            await asyncio.sleep(0.002)  # one frame per command or a few: a real burst
            if killed_at is None and client.verdict("acme-chat", 10) is not None:
                server.kill()
                killed_at = index
        assert killed_at is not None and killed_at < burst - 1, "the host died mid-burst"
        assert sum(c.future.done() for c in commands) < burst
        server.start()
        results = await asyncio.wait_for(asyncio.gather(*(c.future for c in commands)), 60)
        assert sorted(results) == list(range(1, burst + 1)), "each bump ran exactly once"
        await client.until(lambda c: (c.document("acme-chat") or {}).get("counter") == burst, WAIT_S)
        assert client.attaches >= 2


async def test_commands_left_unanswered_by_one_program_are_answered_to_the_next(serve: Servers, tmp_path: Path) -> None:
    server = serve(*EXAMPLES)
    path = tmp_path / "session.json"
    server.kill()  # nothing to attach to: the commands stay queued
    first = acme(server.base, "restart", session=FileSession(path))
    connecting = asyncio.ensure_future(first.connect())
    pending = [first.invoke("acme-chat", "bump") for _ in range(3)]
    await asyncio.sleep(0.1)
    await first.close()
    connecting.cancel()
    assert all(not p.future.done() for p in pending)
    server.start()
    async with acme(server.base, "restart", session=FileSession(path)) as second:
        await second.until(lambda c: c.verdict("acme-chat", 3) is not None, WAIT_S)
        assert [second.verdict("acme-chat", s) for s in (1, 2, 3)] == [{"ok": 1}, {"ok": 2}, {"ok": 3}]
        assert second.document("acme-chat")["counter"] == 3


async def test_star_discovers_the_native_set_for_an_inspector(serve: Servers) -> None:
    server = serve(*EXAMPLES)
    async with acme(server.base, "star", application_protocols="*", protocol=None) as client:
        assert client.selection is not None
        native = {p.name: p.version for p in client.selection.protocols}
        assert native["harness-sdk"] == "2026-12-01" and native["acme-chat"] == "2026-09-13"
        assert native["acme-status"] == "2026-10-01"
        assert await client.invoke("acme-chat", "bump") == 1
