"""`ledgerwire_client.studio`: a Studio conversation over the HTTP/SSE routes.

A turn, the answers to its pauses, Stop, the canvas, and getting back into
a turn after a dropped stream or a server restart.

Owns: one conversation's streams and the state they add up to (status,
the open pause, the canvas, the last error with its retry mode), frames in
seq order with duplicates dropped, reconnecting through
`/api/studio/stream` with `Last-Event-ID`, re-posting the identical answer
once a dead segment's lease lapsed, and waiting out a 409 by its
`retry_after_seconds`.
Must never: deliver a frame twice or out of order, treat a dropped
connection as a Stop (or a Stop as a drop), retry a stopped turn, or loop
without a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Union

import httpx
from httpx_sse import EventSource, ServerSentEvent
from pydantic import TypeAdapter, ValidationError

from . import wire
from ._http import NO_KEEPALIVE, StudioError, StudioFailure, TokenSource, bearer, refusal, unreachable
from ._timeline import transcript

__all__ = [
    "StudioClient",
    "Conversation",
    "ConversationEvent",
    "FrameEvent",
    "NoteEvent",
    "NoticeEvent",
    "TranscriptEvent",
    "ConversationState",
    "FrameModel",
    "Outcome",
    "RetryAdvice",
    "StudioError",
    "StudioFailure",
    "SyncStudioClient",
    "SyncConversation",
    "parse_frame",
]

#: Any frame of the stream, as the generated models type it.
FrameModel = Union[
    wire.MessageDeltaFrame,
    wire.MessageCompleteFrame,
    wire.PlanProposedFrame,
    wire.PlanVersionedFrame,
    wire.PlanApprovedFrame,
    wire.ActivityStepFrame,
    wire.ComponentCreatedFrame,
    wire.ComponentRevisedFrame,
    wire.CompositionUpdatedFrame,
    wire.ElicitationRequestFrame,
    wire.SuggestionsFrame,
    wire.ErrorEventFrame,
    wire.DoneFrame,
]
PauseFrame = Union[wire.PlanProposedFrame, wire.ElicitationRequestFrame]
Status = Literal["idle", "streaming", "paused", "reconnecting", "failed"]
#: How a call ended: the turn finished, paused on a question, was stopped
#: by the user, ended on an error frame, was refused before streaming, or
#: could not be followed (the server did not come back).
Outcome = Literal["done", "paused", "stopped", "failed", "refused", "gone"]

#: Reconnects to one turn's stream before giving up.
MAX_RECONNECTS = 30
#: Longest wait between two reconnects, in seconds.
MAX_BACKOFF_S = 3.0
#: Times one turn's dead segment is resumed by re-posting its answer.
MAX_RECOVERIES = 6
#: Times one request waits out a live segment's lease (a 409 with `retry_after_seconds`).
MAX_LEASE_WAITS = 20
#: Longest single wait on a lease, in seconds.
MAX_LEASE_WAIT_S = 60.0
#: Silence (not even a heartbeat; they come every 5 s) before a stream counts as dropped, in seconds.
SILENCE_LIMIT_S = 30.0
#: Records one timeline page asks for (the server's most).
TIMELINE_PAGE_RECORDS = 1000
#: Timeline pages one read takes at most.
MAX_TIMELINE_PAGES = 200

ENDING = frozenset({"plan.proposed", "elicitation.request", "error", "done"})
_FRAME: TypeAdapter[wire.Frame] = TypeAdapter(wire.Frame)


def parse_frame(data: Any) -> FrameModel:
    """A frame's JSON (already decoded) as its typed model; raises
    pydantic's ValidationError when it is not a frame."""
    return _FRAME.validate_python(data).root


def _backoff(attempt: int) -> float:
    return float(min(MAX_BACKOFF_S, 0.25 * 2**attempt))


@dataclass(frozen=True)
class RetryAdvice:
    """What an error's retry mode asks of the caller, as data."""

    mode: str
    fix: str | None = None
    wait_s: float | None = None

    @staticmethod
    def of(error: StudioFailure) -> RetryAdvice:
        if error.retry == "correct_and_retry":
            return RetryAdvice(error.retry, fix=error.fix)
        if error.retry == "retry_after_delay":
            return RetryAdvice(error.retry, wait_s=max(0.0, error.retry_after_seconds or 0.0))
        return RetryAdvice(error.retry)


@dataclass(frozen=True)
class ConversationState:
    """A conversation as last seen; a new object after every change."""

    conversation_id: str
    status: Status = "idle"
    pause: PauseFrame | None = None
    canvas: wire.CompositionManifest | None = None
    error: StudioFailure | None = None
    retry: RetryAdvice | None = None
    stopped: bool = False
    last_seq: int = 0
    note: str | None = None
    busy: bool = False


@dataclass(frozen=True)
class FrameEvent:
    frame: FrameModel
    #: True for frames read back from the log by `restore()`.
    replay: bool = False
    type: Literal["frame"] = "frame"


@dataclass(frozen=True)
class TranscriptEvent:
    """A turn asked, a segment started or an answer given, read back by `restore()`."""

    kind: Literal["turn", "segment", "answer"]
    payload: dict[str, Any]
    type: Literal["transcript"] = "transcript"


@dataclass(frozen=True)
class NoteEvent:
    text: str
    type: Literal["note"] = "note"


@dataclass(frozen=True)
class NoticeEvent:
    kind: Literal["refused", "unreachable", "lost", "gave-up"]
    error: StudioFailure
    type: Literal["notice"] = "notice"


ConversationEvent = Union[FrameEvent, TranscriptEvent, NoteEvent, NoticeEvent]
Listener = Callable[[ConversationEvent], None]


class StudioClient:
    """One server, one token: `async with StudioClient(url, token=…) as studio`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: TokenSource,
        silence_s: float = SILENCE_LIMIT_S,
        wait_out_busy: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.silence_s = silence_s
        self.wait_out_busy = wait_out_busy
        timeout = httpx.Timeout(10.0, read=silence_s)
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport, limits=NO_KEEPALIVE)

    async def __aenter__(self) -> StudioClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    def conversation(self, conversation_id: str) -> Conversation:
        """A client for `conversation_id` (mint one per conversation and keep it)."""
        return Conversation(self, conversation_id)

    async def headers(self) -> dict[str, str]:
        return {**(await bearer(self.token)), "Content-Type": "application/json"}

    async def post(self, path: str, body: Any) -> Any:
        """POSTs JSON and reads the JSON answer (204: None); raises StudioError."""
        try:
            response = await self.http.post(path, json=body, headers=await self.headers())
        except httpx.HTTPError as error:
            raise StudioError(unreachable(f"The server could not be reached ({error}).")) from error
        if response.status_code >= 300:
            raise StudioError(await refusal(response))
        return None if response.status_code == 204 else response.json()

    async def get(self, path: str) -> Any:
        try:
            response = await self.http.get(path, headers=await self.headers())
        except httpx.HTTPError as error:
            raise StudioError(unreachable(f"The server could not be reached ({error}).")) from error
        if response.status_code >= 300:
            raise StudioError(await refusal(response))
        return response.json()

    async def cancel(self, conversation_id: str) -> None:
        """Stops the conversation's live segment (the Stop button); always 204."""
        await self.post("/api/studio/cancel", {"kind": "turn.cancel", "conversation_id": conversation_id})

    async def mutate(self, body: dict[str, Any]) -> wire.CompositionManifest:
        """Applies canvas operations; a stale `expected_revision` raises `edit_conflict`."""
        answer = await self.post("/api/studio/composition", {**body, "kind": "composition.mutate"})
        return wire.CompositionManifest.model_validate(answer)

    async def timeline(self, conversation_id: str, *, raw: bool = False) -> tuple[list[dict[str, Any]], bool]:
        """Every record of the conversation, page by page (at most
        MAX_TIMELINE_PAGES), and whether the read is complete."""
        records: list[dict[str, Any]] = []
        start: int | None = 0
        for _ in range(MAX_TIMELINE_PAGES):
            query = f"from={start}&limit={TIMELINE_PAGE_RECORDS}" + ("&raw=true" if raw else "")
            page = await self.get(f"/api/studio/conversations/{conversation_id}/timeline?{query}")
            records.extend(page.get("records") or [])
            start = page.get("next")
            if start is None:
                return records, True
        return records, False

    async def check(self, conversation_id: str) -> Any:
        """Every recorded segment run through the server's agent again."""
        return await self.get(f"/api/studio/conversations/{conversation_id}/check")

    async def composition(self, conversation_id: str) -> wire.CompositionManifest | None:
        """The canvas as it stands (None before the first card)."""
        body = await self.get(f"/api/studio/conversations/{conversation_id}/composition")
        manifest = body.get("composition") if isinstance(body, dict) else None
        return None if manifest is None else wire.CompositionManifest.model_validate(manifest)


class _Frames:
    """Live frames of one conversation, queued from the moment `frames()` is called."""

    def __init__(self, conversation: Conversation) -> None:
        self.queue: asyncio.Queue[FrameModel | None] = asyncio.Queue()
        self.conversation = conversation
        self.off = conversation.on(self._take)
        conversation._closers.add(self._end)

    def _take(self, event: ConversationEvent) -> None:
        if isinstance(event, FrameEvent) and not event.replay:
            self.queue.put_nowait(event.frame)

    def _end(self) -> None:
        self.queue.put_nowait(None)

    def __aiter__(self) -> _Frames:
        return self

    async def __anext__(self) -> FrameModel:
        frame = await self.queue.get()
        if frame is None:
            self.close()
            raise StopAsyncIteration
        return frame

    def close(self) -> None:
        self.off()
        self.conversation._closers.discard(self._end)

    async def aclose(self) -> None:
        """Stops queueing (for `contextlib.aclosing`, or after a `break`)."""
        self.close()


_Stream = Literal["ended", "closed", "dropped", "dead"]


class Conversation:
    """One conversation: its calls, state and events. `close()` it when you leave it."""

    def __init__(self, client: StudioClient, conversation_id: str) -> None:
        self.client = client
        self.conversation_id = conversation_id
        self.state = ConversationState(conversation_id)
        self._listeners: list[Listener] = []
        self._subscribers: list[Callable[[], None]] = []
        self._closers: set[Callable[[], None]] = set()
        self._busy = False
        self._closed = False
        self._answer: dict[str, Any] | None = None
        self._stop_requested = False
        self._last_pause: PauseFrame | None = None

    async def __aenter__(self) -> Conversation:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- observing ---------------------------------------------------

    def on(self, listener: Listener) -> Callable[[], None]:
        """Every event (frames, notes, notices); returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Called after every state change; returns the unsubscribe."""
        self._subscribers.append(listener)
        return lambda: self._subscribers.remove(listener) if listener in self._subscribers else None

    def frames(self) -> _Frames:
        """The live frames from now on, each once, in seq order, until `close()`
        (or the iterator's own `aclose()`)."""
        return _Frames(self)

    def close(self) -> None:
        """Ends every `frames()` iterator; later events are dropped."""
        self._closed = True
        for end in list(self._closers):
            end()
        self._listeners.clear()
        self._subscribers.clear()

    def _set(self, **changes: Any) -> None:
        if "error" in changes:
            error = changes["error"]
            changes["retry"] = RetryAdvice.of(error) if error is not None else None
        self.state = dataclasses.replace(self.state, **changes)
        for listener in list(self._subscribers):
            listener()

    def _emit(self, event: ConversationEvent) -> None:
        if self._closed:
            return
        for listener in list(self._listeners):
            listener(event)

    def _note(self, text: str) -> None:
        self._set(note=text or None)
        self._emit(NoteEvent(text))

    # ---- calls -------------------------------------------------------

    async def _exclusive(self, work: Callable[[], Any]) -> Outcome:
        if self._busy:
            raise RuntimeError("a call is already in flight on this conversation: wait for it, or stop() it")
        self._busy = True
        self._set(busy=True)
        try:
            outcome: Outcome = await work()
            return outcome
        except asyncio.CancelledError:
            # Nothing streams any more: say what is true, not "streaming".
            self._set(status="paused" if self.state.pause is not None else "idle", note=None)
            raise
        finally:
            self._busy = False
            self._set(busy=False)

    async def ask(self, message: str | dict[str, Any]) -> Outcome:
        """Asks a new turn: `message`, or a turn.request body's members."""
        members = {"message": message} if isinstance(message, str) else dict(message)
        body = {**members, "kind": "turn.request", "conversation_id": self.conversation_id}

        async def work() -> Outcome:
            self._answer = None
            self._stop_requested = False
            self._set(last_seq=0, pause=None, error=None, stopped=False, status="streaming", note=None)
            return await self._open("/api/studio/turn", body)

        return await self._exclusive(work)

    async def respond(self, response: dict[str, Any]) -> Outcome:
        """Answers the open pause with an interrupt.response body's members."""
        body = {**response, "kind": "interrupt.response", "conversation_id": self.conversation_id}

        async def work() -> Outcome:
            self._answer = body
            self._stop_requested = False
            self._set(pause=None, error=None, stopped=False, status="streaming", note=None)
            return await self._open("/api/studio/interrupt", body)

        return await self._exclusive(work)

    def _pause_id(self) -> str:
        pause = self.state.pause
        if pause is None:
            raise RuntimeError("no pause is open on this conversation")
        return pause.interrupt_id.root

    async def approve(self) -> Outcome:
        return await self.respond({"interrupt_id": self._pause_id(), "decision": "approve"})

    async def amend(self, text: str) -> Outcome:
        return await self.respond({"interrupt_id": self._pause_id(), "decision": "amend", "payload": text})

    async def switch_choice(self, choice_id: str, option_id: str) -> Outcome:
        """Picks another option of one of the plan's choices (ledgerwire's switch)."""
        switch = {"choice_id": choice_id, "option_id": option_id}
        return await self.respond({"interrupt_id": self._pause_id(), "decision": "amend", "switch": switch})

    async def reject(self) -> Outcome:
        return await self.respond({"interrupt_id": self._pause_id(), "decision": "reject"})

    async def answer_questions(self, answers: dict[str, dict[str, Any]]) -> Outcome:
        """Answers a clarifying pause, one answer per question id."""
        return await self.respond({"interrupt_id": self._pause_id(), "decision": "answer", "answers": answers})

    async def skip(self) -> Outcome:
        """Dismisses a skippable clarifying pause."""
        return await self.respond({"interrupt_id": self._pause_id(), "decision": "skip"})

    async def resume(self) -> Outcome:
        """Follows the latest turn again (after `gone`): reconnects and, if its
        segment died, re-posts the answer that started it."""
        return await self._exclusive(self._recover)

    async def stop(self) -> None:
        """Stop: the server ends the live segment; the call in flight then ends
        as `stopped` (or `paused`, for a plan switch)."""
        self._stop_requested = True
        try:
            await self.client.cancel(self.conversation_id)
        except BaseException:
            self._stop_requested = False
            raise

    async def mutate(self, ops: list[dict[str, Any]]) -> wire.CompositionManifest:
        """Applies canvas operations against the revision last seen; on
        `edit_conflict` the canvas is read again before the error is raised."""
        canvas = self.state.canvas
        body: dict[str, Any] = {
            "conversation_id": self.conversation_id,
            "expected_revision": canvas.revision if canvas else 0,
            "ops": ops,
        }
        if canvas is not None:
            body["composition_id"] = canvas.composition_id.root
        try:
            manifest = await self.client.mutate(body)
        except StudioError as error:
            if error.code == "edit_conflict":
                try:
                    await self.refresh_canvas()
                except StudioError:
                    pass
            raise
        self._set(canvas=manifest)
        return manifest

    async def refresh_canvas(self) -> wire.CompositionManifest | None:
        manifest = await self.client.composition(self.conversation_id)
        self._set(canvas=manifest)
        return manifest

    async def restore(self) -> Literal["new", "restored", "failed"]:
        """Reads the conversation back from the log (a restarted program, or
        another client on the same conversation): every turn, segment,
        frame and answer as replayed events, the canvas as it stands, and,
        when the latest turn is still streaming, follows it (resuming its
        segment if it died). `new` when the server holds no such conversation."""
        result: list[Literal["new", "restored", "failed"]] = ["restored"]

        async def work() -> Outcome:
            try:
                records, _complete = await self.client.timeline(self.conversation_id)
            except StudioError as error:
                result[0] = "new" if error.code == "not_found" else "failed"
                if result[0] == "failed":
                    self._emit(NoticeEvent("unreachable", error.failure))
                return "done"
            entries, latest = transcript(records)
            for entry in entries:
                if entry.type != "frame":
                    self._emit(TranscriptEvent(entry.type, entry.payload))
                    continue
                try:
                    frame = parse_frame(entry.payload.get("frame"))
                except ValidationError:
                    continue
                self._apply(frame, replay=True)
            try:
                self._set(canvas=await self.client.composition(self.conversation_id))
            except StudioError:
                pass
            if latest is None:
                return "done"
            self._answer = latest.answer
            pause = parse_frame(latest.last_frame) if latest.state == "paused" else None
            if isinstance(pause, (wire.PlanProposedFrame, wire.ElicitationRequestFrame)):
                self._last_pause = pause
            self._set(last_seq=latest.last_seq, pause=pause, status="paused" if pause else self.state.status)
            if latest.state != "streaming":
                return "done"
            return await self._recover()

        await self._exclusive(work)
        return result[0]

    # ---- streams -----------------------------------------------------

    async def _stream(
        self, path: str, body: Any, headers: dict[str, str] | None, reconnect: bool
    ) -> StudioFailure | _Stream:
        """Posts and reads the stream it opens: how it ended, or the refusal.
        Raises StudioError (status 0) when no answer came."""
        all_headers = {**(await self.client.headers()), **(headers or {})}
        try:
            async with self.client.http.stream("POST", path, json=body, headers=all_headers) as response:
                if response.status_code != 200:
                    return await refusal(response)
                return await self._consume(EventSource(response), reconnect)
        except httpx.HTTPError as error:
            if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
                raise StudioError(unreachable(f"The server could not be reached ({error}).")) from error
            return "dropped"

    async def _open(self, path: str, body: dict[str, Any]) -> Outcome:
        for wait in range(MAX_LEASE_WAITS + 1):
            try:
                result = await self._stream(path, body, None, reconnect=False)
            except StudioError as error:
                # No answer at all. An answer is recorded before its stream
                # starts, so following the turn and re-posting it is safe.
                if body["kind"] == "interrupt.response":
                    return await self._recover()
                return self._fail(error.failure, "unreachable")
            if isinstance(result, StudioFailure):
                busy = result.status == 409 and result.code == "transient_unavailable"
                if self.client.wait_out_busy and busy and wait < MAX_LEASE_WAITS:
                    await self._wait_lease(result)
                    continue
                if body["kind"] == "interrupt.response":
                    self._set(pause=self._last_pause, status="paused" if self._last_pause else "failed")
                return self._fail(result, "refused")
            if result == "ended":
                return self._outcome()
            return await self._recover()
        raise AssertionError("unreachable")

    def _fail(self, failure: StudioFailure, kind: Literal["refused", "unreachable", "lost", "gave-up"]) -> Outcome:
        paused = self.state.pause is not None
        self._set(error=failure, status="paused" if paused else "failed", note=None)
        self._emit(NoticeEvent(kind, failure))
        return "refused" if kind == "refused" else "gone" if kind == "gave-up" else "failed"

    async def _wait_lease(self, failure: StudioFailure) -> None:
        seconds = max(1.0, float(failure.retry_after_seconds or 1))
        self._note(f"The conversation is busy; trying again in {seconds:.0f} s.")
        await asyncio.sleep(min(MAX_LEASE_WAIT_S, seconds))

    def _outcome(self) -> Outcome:
        if self.state.status == "paused":
            return "paused"
        if self.state.status == "failed":
            return "failed"
        return "stopped" if self.state.stopped else "done"

    def _apply(self, frame: FrameModel, replay: bool = False) -> None:
        changes: dict[str, Any] = {}
        if frame.seq > self.state.last_seq:
            changes["last_seq"] = frame.seq
        if isinstance(frame, (wire.PlanProposedFrame, wire.ElicitationRequestFrame)):
            self._last_pause = frame
            changes.update(status="paused", pause=frame, note=None)
        elif isinstance(frame, wire.ErrorEventFrame):
            if frame.error.code.value == "cancelled":
                changes.update(status="idle", stopped=True, error=None, pause=None, note=None)
            else:
                failure = StudioFailure.from_wire(frame.error.model_dump(mode="json", exclude_none=True), 200)
                changes.update(status="failed", error=failure, pause=None, note=None)
        elif isinstance(frame, wire.DoneFrame):
            changes.update(status="idle", pause=None, error=None, note=None)
            if frame.composition is not None:
                changes["canvas"] = frame.composition
        else:
            if self.state.status != "streaming":
                changes.update(status="streaming", note=None)
            if isinstance(frame, wire.CompositionUpdatedFrame):
                changes["canvas"] = frame.composition
        self._set(**changes)
        self._emit(FrameEvent(frame, replay))

    async def _consume(self, source: EventSource, reconnect: bool) -> _Stream:
        """Reads frames until a closing frame (`ended`), the body's end
        without one (`closed`) or a drop (`dropped`, raised by httpx and
        caught by `_stream`). On a reconnect, a closing frame already
        delivered ends it as `ended`, and an error saying the segment
        stopped ends it as `dead`."""
        async with contextlib.aclosing(source.aiter_sse()) as events:
            return await self._read(events, reconnect)

    async def _read(self, events: AsyncIterator[ServerSentEvent], reconnect: bool) -> _Stream:
        async for event in events:
            if not event.data:
                continue
            try:
                frame = parse_frame(event.json())
            except (ValueError, ValidationError):
                continue
            if frame.seq <= self.state.last_seq:
                if reconnect and frame.event in ENDING:
                    if self.state.status == "reconnecting":
                        self._settle_from(frame)
                    return "ended"
                continue
            if reconnect and _stopped_segment(frame):
                self._set(last_seq=frame.seq)
                return "dead"
            self._apply(frame)
            if frame.event in ENDING:
                return "ended"
        return "closed"

    def _settle_from(self, frame: FrameModel) -> None:
        """A closing frame seen again on a reconnect: the state it stands for."""
        if isinstance(frame, wire.DoneFrame):
            self._set(status="idle", note=None)
        elif isinstance(frame, wire.ErrorEventFrame):
            if frame.error.code.value == "cancelled":
                self._set(status="idle", stopped=True, note=None)
            else:
                failure = StudioFailure.from_wire(frame.error.model_dump(mode="json", exclude_none=True), 200)
                self._set(status="failed", error=failure, note=None)
        elif isinstance(frame, (wire.PlanProposedFrame, wire.ElicitationRequestFrame)):
            self._set(status="paused", pause=frame, note=None)

    async def _recover(self) -> Outcome:
        for _ in range(MAX_RECOVERIES):
            followed = await self._follow()
            if followed == "ended":
                return self._outcome()
            if followed == "gone":
                return "gone"
            if self._stop_requested:
                self._set(status="idle", stopped=True, note=None)
                return "stopped"
            if self._answer is None:
                return self._fail(
                    StudioFailure(
                        code="transient_unavailable",
                        retry="refresh_then_retry",
                        status=0,
                        detail="This answer stopped before it finished (its connection was lost while the "
                        "question was being read), and nothing can resume it. Ask the question again.",
                    ),
                    "lost",
                )
            if await self._retry_answer() == "done":
                return self._outcome()
        return self._fail(
            StudioFailure(
                code="transient_unavailable",
                retry="refresh_then_retry",
                status=0,
                detail=f"The answer could not be resumed after {MAX_RECOVERIES} tries.",
            ),
            "gave-up",
        )

    async def _follow(self) -> Literal["ended", "dead", "gone"]:
        """Reconnects through `/api/studio/stream` after the last seq."""
        for attempt in range(MAX_RECONNECTS):
            self._set(status="reconnecting")
            self._note("Reconnecting…" if attempt == 0 else f"Reconnecting (attempt {attempt + 1})…")
            last = self.state.last_seq
            body = {"conversation_id": self.conversation_id, "after_seq": last}
            try:
                result = await self._stream("/api/studio/stream", body, {"Last-Event-ID": str(last)}, reconnect=True)
            except StudioError:
                await asyncio.sleep(_backoff(attempt))
                continue
            if isinstance(result, StudioFailure):
                if result.code == "transient_unavailable" and attempt + 1 < MAX_RECONNECTS:
                    await asyncio.sleep(min(MAX_BACKOFF_S, float(result.retry_after_seconds or 1)))
                    continue
                self._fail(result, "gave-up")
                return "gone"
            if result == "ended":
                return "ended"
            if result in ("closed", "dead"):
                return "dead"
            await asyncio.sleep(_backoff(attempt))
        self._fail(unreachable("The server has not come back, so the answer could not be followed."), "gave-up")
        return "gone"

    async def _retry_answer(self) -> Literal["done", "again"]:
        """Re-posts the answer that started the dead segment, waiting out its lease."""
        for attempt in range(MAX_LEASE_WAITS):
            self._note("Resuming the answer where it stopped…")
            self._set(status="streaming")
            try:
                result = await self._stream("/api/studio/interrupt", self._answer, None, reconnect=False)
            except StudioError:
                await asyncio.sleep(_backoff(attempt))
                continue
            if not isinstance(result, StudioFailure):
                return "done" if result == "ended" else "again"
            if result.code == "transient_unavailable" and result.retry == "retry_after_delay":
                seconds = max(1.0, float(result.retry_after_seconds or 1))
                self._note(f"The stopped attempt still holds the conversation; resuming in {seconds:.0f} s.")
                await asyncio.sleep(min(MAX_LEASE_WAIT_S, seconds))
                continue
            if result.code == "edit_conflict":
                return "again"  # The answer was carried out and the turn moved on.
            self._fail(result, "refused")
            return "done"
        self._fail(unreachable("The conversation stayed busy, so the answer could not be resumed."), "gave-up")
        return "done"


def _stopped_segment(frame: FrameModel) -> bool:
    """A reconnect's closing error saying its segment stopped without a closing frame."""
    return (
        isinstance(frame, wire.ErrorEventFrame)
        and frame.error.code.value == "transient_unavailable"
        and frame.error.retry.value in ("retry_after_delay", "refresh_then_retry")
    )


# ---- the synchronous facade ---------------------------------------------


class SyncStudioClient:
    """The same client for scripts and notebooks: every call blocks.

    It runs its own event loop on a thread; `close()` it (or use `with`).
    """

    def __init__(self, base_url: str, *, token: TokenSource, silence_s: float = SILENCE_LIMIT_S) -> None:
        import threading

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ledgerwire-studio", daemon=True)
        self._thread.start()

        async def make() -> StudioClient:
            return StudioClient(base_url, token=token, silence_s=silence_s)

        self.client: StudioClient = self._run(make())

    def _run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def __enter__(self) -> SyncStudioClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self.client.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def conversation(self, conversation_id: str) -> SyncConversation:
        return SyncConversation(self, self.client.conversation(conversation_id))


class SyncConversation:
    """A conversation whose calls block; `frames` holds every live frame seen."""

    def __init__(self, owner: SyncStudioClient, conversation: Conversation) -> None:
        self._owner = owner
        self.conversation = conversation
        self.frames: list[FrameModel] = []
        conversation.on(lambda event: self.frames.append(event.frame) if isinstance(event, FrameEvent) else None)

    @property
    def state(self) -> ConversationState:
        return self.conversation.state

    def ask(self, message: str | dict[str, Any]) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.ask(message))
        return outcome

    def respond(self, response: dict[str, Any]) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.respond(response))
        return outcome

    def approve(self) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.approve())
        return outcome

    def answer_questions(self, answers: dict[str, dict[str, Any]]) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.answer_questions(answers))
        return outcome

    def amend(self, text: str) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.amend(text))
        return outcome

    def switch_choice(self, choice_id: str, option_id: str) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.switch_choice(choice_id, option_id))
        return outcome

    def reject(self) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.reject())
        return outcome

    def skip(self) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.skip())
        return outcome

    def resume(self) -> Outcome:
        outcome: Outcome = self._owner._run(self.conversation.resume())
        return outcome

    def restore(self) -> str:
        result: str = self._owner._run(self.conversation.restore())
        return result

    def stop(self) -> None:
        self._owner._run(self.conversation.stop())

    def mutate(self, ops: list[dict[str, Any]]) -> wire.CompositionManifest:
        manifest: wire.CompositionManifest = self._owner._run(self.conversation.mutate(ops))
        return manifest

