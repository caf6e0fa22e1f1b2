"""`ledgerwire_client.harness`: a Studio conversation as a harness-sdk
thread, against the real server playing a scenario."""

from __future__ import annotations

from pathlib import Path

from conftest import SCENARIOS, TOKEN, Servers, conversation_id
from ledgerwire_client.harness import HarnessClient, ReplyMessage, RequestMessage
from ledgerwire_client.statewire import CommandRejected, FileSession

import pytest


async def test_a_turn_paused_answered_and_read_as_typed_documents(serve: Servers, tmp_path: Path) -> None:
    server = serve("--agent", "scenario", "--scenarios", str(SCENARIOS))
    session = FileSession(tmp_path / "harness.json")
    async with HarnessClient(server.base, conversation_id("harness"), token=TOKEN, session=session) as harness:
        assert harness.main is not None and harness.main.status == "idle"
        started = await harness.ask("scenario three-questions")
        assert set(started) >= {"turn", "segment", "request", "reply"}
        await harness.statewire.until(lambda c: (harness.main and harness.main.status) == "paused_questions")
        main = harness.main
        assert main is not None and main.pause is not None and main.pause.kind == "questions"
        request = harness.message(started["request"])
        assert isinstance(request, RequestMessage) and request.text == "scenario three-questions"
        questions = main.pause.frame["questions"]
        answers = {
            q["id"]: {"kind": "option", "option_id": q["options"][0]["id"]} if q.get("options") else {"kind": "skipped"}
            for q in questions
        }
        body = {"interrupt_id": main.pause.interrupt_id, "decision": "answer", "answers": answers}
        resumed = await harness.answer(body)
        await harness.statewire.until(lambda c: (harness.main and harness.main.status) == "idle")
        reply = harness.message(resumed["reply"])
        assert isinstance(reply, ReplyMessage) and reply.kind == "reply"
        assert [m.id for m in harness.messages()][:2] == [started["request"], started["reply"]]
        await harness.set_interest(latest=1)
        with pytest.raises(CommandRejected) as refused:
            await harness.answer({"interrupt_id": "nope", "decision": "approve"})
        assert refused.value.code in ("not_found", "binding_invalid", "edit_conflict")
        assert isinstance(refused.value.data, dict) and "status" in refused.value.data


async def test_the_websocket_transport_carries_the_same_thread(serve: Servers) -> None:
    server = serve("--agent", "scenario", "--scenarios", str(SCENARIOS))
    async with HarnessClient(server.base, conversation_id("ws"), token=TOKEN, transport="websocket") as harness:
        started = await harness.ask("scenario three-questions")
        await harness.statewire.until(lambda c: (harness.main and harness.main.status) == "paused_questions")
        assert harness.message(started["request"]) is not None


async def test_cancel_and_mutate_are_the_studio_requests(serve: Servers) -> None:
    server = serve("--agent", "scenario", "--scenarios", str(SCENARIOS))
    async with HarnessClient(server.base, conversation_id("commands"), token=TOKEN) as harness:
        assert await harness.cancel() == {"cancelled": False}, "no segment was live"
        await harness.ask("scenario long-tool-call")
        await harness.statewire.until(lambda c: (harness.main and harness.main.status) == "streaming")
        stopped = await harness.cancel()
        assert stopped["cancelled"] is True
        await harness.statewire.until(lambda c: (harness.main and harness.main.status) == "cancelled")
        with pytest.raises(CommandRejected) as refused:
            await harness.mutate({"expected_revision": 99, "ops": [{"op": "pin", "component_id": "nope"}]})
        assert refused.value.code in ("not_found", "edit_conflict", "binding_invalid")
