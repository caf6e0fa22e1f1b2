"""`ledgerwire_client.studio` against the real server playing the
scenarios of `serve --agent scenario`: every retry mode as data, pauses,
Stop, a cut stream, a silent stream, a server that exits mid-turn, a
refused token, a cancelled call, and the synchronous facade."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from conftest import SCENARIOS, TOKEN, Servers, conversation_id
from ledgerwire_client import wire
from ledgerwire_client.studio import (
    Conversation,
    FrameEvent,
    FrameModel,
    NoteEvent,
    StudioClient,
    StudioError,
    SyncStudioClient,
)

SCENARIO = ("--agent", "scenario", "--scenarios", str(SCENARIOS))
#: A short silence limit, so a stalled stream counts as dropped quickly.
SILENCE_S = 3.0
WAIT_S = 30.0


def client(base: str, token: str = TOKEN) -> StudioClient:
    return StudioClient(base, token=token, silence_s=SILENCE_S)


def record(chat: Conversation) -> list[FrameModel]:
    frames: list[FrameModel] = []
    chat.on(lambda event: frames.append(event.frame) if isinstance(event, FrameEvent) else None)
    return frames


def notes(chat: Conversation) -> list[str]:
    texts: list[str] = []
    chat.on(lambda event: texts.append(event.text) if isinstance(event, NoteEvent) else None)
    return texts


def ordered(frames: list[FrameModel]) -> None:
    seqs = [frame.seq for frame in frames]
    assert seqs == sorted(set(seqs)), f"each frame once, in seq order: {seqs}"


async def frame_where(chat: Conversation, test: Callable[[FrameModel], bool]) -> FrameModel:
    found: asyncio.Future[FrameModel] = asyncio.get_running_loop().create_future()

    def look(event: object) -> None:
        if isinstance(event, FrameEvent) and test(event.frame) and not found.done():
            found.set_result(event.frame)

    off = chat.on(look)
    try:
        return await asyncio.wait_for(found, WAIT_S)
    finally:
        off()


@pytest.mark.parametrize(
    "name,mode",
    [
        ("fatal-correct-and-retry", "correct_and_retry"),
        ("fatal-refresh-then-retry", "refresh_then_retry"),
        ("fatal-retry-after-delay", "retry_after_delay"),
        ("fatal-do-not-retry", "do_not_retry"),
    ],
)
async def test_a_fatal_error_and_its_retry_mode_are_data(serve: Servers, name: str, mode: str) -> None:
    server = serve(*SCENARIO)
    async with client(server.base) as studio:
        chat = studio.conversation(conversation_id(name))
        frames = record(chat)
        assert await chat.ask(f"scenario {name}") == "failed"
        state = chat.state
        assert state.status == "failed" and not state.stopped
        assert state.error is not None and state.error.retry == mode
        assert state.retry is not None and state.retry.mode == mode
        if mode == "correct_and_retry":
            assert state.retry.fix, "fix comes with correct_and_retry"
        if mode == "retry_after_delay":
            assert (state.retry.wait_s or 0) > 0, "a wait comes with retry_after_delay"
        assert frames[-1].event == "error"
        assert not any(f.event == "done" for f in frames)
        ordered(frames)


async def test_a_plan_pause_then_approval_delivers_every_frame_once_through_the_iterator(serve: Servers) -> None:
    server = serve(*SCENARIO)
    async with client(server.base) as studio, studio.conversation(conversation_id("iter")) as chat:
        frames = chat.frames()
        assert await chat.ask("scenario cut-stream") == "paused"
        assert isinstance(chat.state.pause, wire.PlanProposedFrame)
        texts = notes(chat)
        assert await chat.approve() == "done"
        assert any(t.startswith("Reconnecting") for t in texts), f"the cut stream was followed: {texts}"
        assert not chat.state.stopped, "a dropped stream is not a Stop"
        chat.close()
        seen = [frame async for frame in frames]
        partial = chat.frames()
        await partial.aclose()
        assert not chat._listeners, "a closed iterator stops listening"
    ordered(seen)
    assert [f.event for f in seen].count("done") == 1 and seen[-1].event == "done"
    assert seen[0].event == "message.delta" and any(f.event == "plan.proposed" for f in seen)


async def test_three_questions_are_answered_by_question_id(serve: Servers) -> None:
    server = serve(*SCENARIO)
    async with client(server.base) as studio:
        chat = studio.conversation(conversation_id("questions"))
        frames = record(chat)
        assert await chat.ask("scenario three-questions") == "paused"
        pause = chat.state.pause
        assert isinstance(pause, wire.ElicitationRequestFrame) and len(pause.questions) == 3
        answers = {
            q.id.root: {"kind": "option", "option_id": q.options[0].id.root} if q.options else {"kind": "skipped"}
            for q in pause.questions
        }
        assert await chat.answer_questions(answers) == "done"
        assert chat.state.pause is None
        ordered(frames)


async def test_a_silent_stream_counts_as_dropped_and_the_turn_is_followed_to_its_end(serve: Servers) -> None:
    server = serve(*SCENARIO)
    async with client(server.base) as studio:
        chat = studio.conversation(conversation_id("stall"))
        frames = record(chat)
        assert await chat.ask("scenario stall-stream") == "paused"
        statuses: set[str] = set()
        chat.subscribe(lambda: statuses.add(chat.state.status))
        assert await chat.approve() == "done"
        assert "reconnecting" in statuses, statuses
        assert [f.event for f in frames].count("done") == 1
        ordered(frames)


async def test_stop_ends_the_turn_as_stopped_not_failed(serve: Servers) -> None:
    server = serve(*SCENARIO)
    async with client(server.base) as studio:
        chat = studio.conversation(conversation_id("stop"))
        frames = record(chat)
        asked = asyncio.create_task(chat.ask("scenario long-tool-call"))
        await frame_where(chat, lambda f: f.event == "activity.step")
        await chat.stop()
        assert await asyncio.wait_for(asked, WAIT_S) == "stopped"
        assert chat.state.status == "idle" and chat.state.stopped and chat.state.error is None
        last = frames[-1]
        assert isinstance(last, wire.ErrorEventFrame) and last.error.code.value == "cancelled"


async def test_a_cancelled_call_leaves_the_status_at_what_is_true(serve: Servers) -> None:
    server = serve(*SCENARIO)
    async with client(server.base) as studio:
        chat = studio.conversation(conversation_id("cancelled"))
        asked = asyncio.create_task(chat.ask("scenario long-tool-call"))
        await frame_where(chat, lambda f: f.event == "activity.step")
        asked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asked
        assert chat.state.status == "idle" and not chat.state.busy


async def test_a_server_that_exits_mid_turn_is_followed_and_the_answer_reposted(serve: Servers) -> None:
    server = serve(*SCENARIO, "--lease-ttl", "2000", "--heartbeat", "200")
    async with client(server.base) as studio:
        chat = studio.conversation(conversation_id("exit"))
        frames = record(chat)
        assert await chat.ask("scenario server-exit") == "paused"
        texts = notes(chat)
        approving = asyncio.create_task(chat.approve())
        assert server.process is not None
        code = await asyncio.wait_for(asyncio.to_thread(server.process.wait), WAIT_S)
        assert code == 70, "the scenario made the server exit"
        server.start()
        assert await asyncio.wait_for(approving, 60) == "done"
        assert any(t.startswith("Reconnecting") for t in texts), texts
        assert [f.event for f in frames].count("done") == 1
        ordered(frames)
        resumed = next(f for f in frames if f.event == "message.complete")
        assert resumed.seq >= 1000, "the resumed segment starts past the dead one's seqs"


async def test_a_refused_token_is_an_error_as_data_and_a_callable_token_is_asked_per_request(serve: Servers) -> None:
    server = serve(*SCENARIO)
    async with client(server.base, token="not-the-token") as studio:
        chat = studio.conversation(conversation_id("token"))
        assert await chat.ask("scenario three-questions") == "refused"
        assert chat.state.error is not None
        assert (chat.state.error.code, chat.state.error.status) == ("unauthorized", 401)
    asked: list[int] = []

    async def token() -> str:
        asked.append(1)
        return TOKEN if len(asked) > 1 else "stale-token"

    async with StudioClient(server.base, token=token) as studio:
        chat = studio.conversation(conversation_id("refresh"))
        assert await chat.ask("scenario three-questions") == "refused"
        assert await chat.ask("scenario three-questions") == "paused", "the refreshed token was used next"
        assert len(asked) == 2


async def test_a_refused_mutation_raises_studio_error_with_the_failure(serve: Servers) -> None:
    server = serve(*SCENARIO)
    async with client(server.base) as studio:
        chat = studio.conversation(conversation_id("canvas"))
        with pytest.raises(StudioError) as refused:
            await chat.mutate([{"op": "pin", "component_id": "nope"}])
        assert refused.value.failure.status in (404, 409, 422)


def test_the_sync_facade_runs_a_turn_in_a_script(serve: Servers) -> None:
    server = serve(*SCENARIO)
    with SyncStudioClient(server.base, token=TOKEN) as studio:
        chat = studio.conversation(conversation_id("sync"))
        assert chat.ask("scenario three-questions") == "paused"
        assert chat.state.pause is not None and chat.state.pause.event == "elicitation.request"
        assert chat.reject() == "refused", "reject answers a plan, not questions: refused, and paused still"
        assert chat.state.status == "paused" and chat.state.error is not None
        assert chat.state.error.code == "binding_invalid"
        first_turn = len(chat.frames)
        assert chat.ask("scenario step-fails-then-succeeds") == "done"
        assert chat.state.status == "idle"
        assert chat.frames[-1].event == "done"
        ordered(chat.frames[first_turn:])
        again = studio.conversation(chat.conversation.conversation_id)
        assert again.restore() == "restored" and again.state.status == "idle"


async def test_a_new_client_restores_a_conversation_mid_turn_and_follows_it_to_its_end(serve: Servers) -> None:
    server = serve(*SCENARIO, "--keep-on-disconnect")
    cid = conversation_id("reload")
    async with client(server.base) as studio:
        first = studio.conversation(cid)
        assert await first.ask("scenario cut-stream") == "paused"
        approving = asyncio.create_task(first.approve())
        await frame_where(first, lambda f: f.event == "activity.step")
        approving.cancel()  # the program goes away mid-turn
        with pytest.raises(asyncio.CancelledError):
            await approving
        first.close()

        second = studio.conversation(cid)
        replayed: list[FrameModel] = []
        live: list[FrameModel] = []
        second.on(lambda e: (replayed if e.replay else live).append(e.frame) if isinstance(e, FrameEvent) else None)
        assert await second.restore() == "restored"
        assert any(f.event == "plan.proposed" for f in replayed), "the log was replayed"
        every = replayed + live
        assert [f.event for f in every].count("done") == 1, "the turn finished once"
        ordered(every)
        assert second.state.status == "idle"
        assert await studio.conversation(conversation_id("unknown")).restore() == "new"
