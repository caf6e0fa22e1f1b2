"""A conversation read back from the server's log (the timeline route) as
its transcript and where its latest turn stands, for a reload.

Owns: reading `studio.*` records into turns, segments, frames and answers.
Must never: guess what the log does not say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ENDING = frozenset({"plan.proposed", "elicitation.request", "error", "done"})


@dataclass
class Latest:
    """Where the conversation's latest turn stands."""

    turn: int
    request: dict[str, Any]
    last_seq: int = 0
    last_frame: dict[str, Any] | None = None
    answered: set[str] = field(default_factory=set)
    answer: dict[str, Any] | None = None
    state: Literal["streaming", "paused", "idle"] = "streaming"


@dataclass(frozen=True)
class Entry:
    """One transcript event: a turn asked, a segment started, a frame sent, an answer."""

    type: Literal["turn", "segment", "frame", "answer"]
    payload: dict[str, Any]


def transcript(records: list[dict[str, Any]]) -> tuple[list[Entry], Latest | None]:
    entries: list[Entry] = []
    latest: Latest | None = None
    for record in records:
        p = record.get("payload") or {}
        kind = record.get("kind")
        if kind == "studio.turn_requested":
            latest = Latest(turn=p.get("turn", 0), request=p.get("request") or {})
            entries.append(Entry("turn", p))
        elif kind == "studio.segment_claimed":
            entries.append(Entry("segment", p))
        elif kind == "studio.frame_sent":
            if latest is not None and p.get("turn") == latest.turn:
                latest.last_seq = max(latest.last_seq, int(p.get("seq", 0)))
                latest.last_frame = p.get("frame")
            entries.append(Entry("frame", p))
        elif kind == "studio.interrupt_answered":
            if latest is not None and p.get("turn") == latest.turn:
                latest.answered.add(str(p.get("interrupt_id")))
                # The log keeps the answer as accepted, without its `kind`.
                latest.answer = {"kind": "interrupt.response", **(p.get("response") or {})}
            entries.append(Entry("answer", p))
    if latest is None:
        return entries, None
    last = latest.last_frame
    if last is not None and last.get("event") in ENDING:
        if last["event"] in ("done", "error"):
            latest.state = "idle"
        else:
            latest.state = "streaming" if last.get("interrupt_id") in latest.answered else "paused"
    # Every segment after a turn's first starts from an answer, so the
    # latest answer started the latest segment.
    return entries, latest
