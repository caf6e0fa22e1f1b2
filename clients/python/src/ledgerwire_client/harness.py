"""`ledgerwire_client.harness`: a Studio conversation as a `harness-sdk`
Statewire thread: its main and message documents, typed, and its four
commands (`turn`, `answer`, `cancel`, `mutate`) as methods.

Owns: the harness-sdk offer, the thread's key prefix and the interest
document. Must never: build a Studio body differently from the routes
(bodies go as given; the host fills in `kind` and `conversation_id`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ._http import TokenSource
from .statewire import Offer, StatewireClient, VersionRange
from .statewire.session import DocumentsStorage, SessionStorage

__all__ = [
    "HARNESS_PROTOCOL",
    "HARNESS_VERSION",
    "INTEREST_PROTOCOL",
    "HarnessClient",
    "HarnessMain",
    "HarnessMessage",
    "RequestMessage",
    "AnswerMessage",
    "ReplyMessage",
]

HARNESS_PROTOCOL = "harness-sdk"
HARNESS_VERSION = "2026-12-01"
INTEREST_PROTOCOL = "harness-sdk/interest"
#: The namespace of message keys: `[conversation_id, "main", message_id]`.
MESSAGE_NAMESPACE = "main"

HarnessStatus = Literal["idle", "streaming", "paused_plan", "paused_questions", "cancelled", "failed"]


class _Document(BaseModel):
    # Documents may gain members: keep what is not named here.
    model_config = ConfigDict(extra="allow")


class HarnessTurn(_Document):
    turn: int
    status: str
    messages: list[str]


class HarnessPause(_Document):
    kind: Literal["plan", "questions"]
    interrupt_id: str
    message_id: str
    frame: dict[str, Any]


class HarnessMain(_Document):
    """The main document (`main: true`)."""

    conversation_id: str
    status: HarnessStatus
    turn: int
    pause: HarnessPause | None = None
    canvas: dict[str, Any] | None = None
    turns: list[HarnessTurn] = Field(default_factory=list)
    turns_omitted: int = 0


class RequestMessage(_Document):
    id: str
    turn: int
    role: Literal["user"]
    kind: Literal["request"]
    text: str
    request: dict[str, Any]


class AnswerMessage(_Document):
    id: str
    turn: int
    role: Literal["user"]
    kind: Literal["answer"]
    interrupt_id: str
    decision: str
    response: dict[str, Any]


class ReplyMessage(_Document):
    id: str
    turn: int
    role: Literal["assistant"]
    kind: Literal["reply"]
    segment: int
    status: str
    text: str = ""
    complete: bool = False
    plan: dict[str, Any] | None = None
    plan_versions: list[Any] = Field(default_factory=list)
    approved: dict[str, Any] | None = None
    questions: dict[str, Any] | list[Any] | None = None
    steps: list[dict[str, Any]] = Field(default_factory=list)
    cards: list[dict[str, Any]] = Field(default_factory=list)
    error: dict[str, Any] | None = None
    done: dict[str, Any] | None = None


HarnessMessage = Annotated[Union[RequestMessage, AnswerMessage, ReplyMessage], Field(discriminator="kind")]
_MESSAGE: TypeAdapter[HarnessMessage] = TypeAdapter(HarnessMessage)


class HarnessClient:
    """A conversation as a harness-sdk thread:
    `async with HarnessClient(base_url, conversation_id, token=…) as harness`."""

    def __init__(
        self,
        base_url: str,
        conversation_id: str,
        *,
        token: TokenSource | None = None,
        transport: Literal["sse", "websocket"] = "sse",
        session: SessionStorage | None = None,
        documents: DocumentsStorage | None = None,
        **options: Any,
    ) -> None:
        self.conversation_id = conversation_id
        url = f"{base_url.rstrip('/')}/threads/{quote(conversation_id, safe='')}"
        make = StatewireClient.websocket if transport == "websocket" else StatewireClient.sse
        self.statewire = make(
            url,
            token=token,
            protocol=HARNESS_PROTOCOL,
            application_protocols=(Offer(HARNESS_PROTOCOL, VersionRange(HARNESS_VERSION)),),
            key_prefixes={HARNESS_PROTOCOL: [conversation_id]},
            session=session,
            documents=documents,
            **options,
        )
        self.interest = self.statewire.synced_document(INTEREST_PROTOCOL)

    async def __aenter__(self) -> HarnessClient:
        await self.statewire.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.statewire.close()

    async def connect(self) -> None:
        await self.statewire.connect()

    async def close(self) -> None:
        await self.statewire.close()

    @property
    def main(self) -> HarnessMain | None:
        """The main document, typed; None before the hello."""
        value = self.statewire.document(HARNESS_PROTOCOL)
        return None if value is None else HarnessMain.model_validate(value)

    def message(self, message_id: str) -> HarnessMessage | None:
        """A message document (`t1-user`, `t1-seg1`, …), typed; None when not mounted."""
        value = self.statewire.document(HARNESS_PROTOCOL, (".", MESSAGE_NAMESPACE, message_id))
        return None if value is None else _MESSAGE.validate_python(value)

    def messages(self) -> list[HarnessMessage]:
        """The mounted messages, in the turns' order."""
        main = self.main
        ids = [m for turn in (main.turns if main else []) for m in turn.messages]
        return [found for found in map(self.message, ids) if found is not None]

    async def turn(self, body: dict[str, Any]) -> dict[str, Any]:
        """`turn` with a turn.request body: `{turn, segment, first_seq, request, reply}`."""
        answer: dict[str, Any] = await self.statewire.invoke(HARNESS_PROTOCOL, "turn", [body])
        return answer

    async def ask(self, message: str) -> dict[str, Any]:
        return await self.turn({"message": message})

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """`answer` with an interrupt.response body."""
        answer: dict[str, Any] = await self.statewire.invoke(HARNESS_PROTOCOL, "answer", [body])
        return answer

    async def approve(self, interrupt_id: str) -> dict[str, Any]:
        return await self.answer({"interrupt_id": interrupt_id, "decision": "approve"})

    async def cancel(self) -> dict[str, Any]:
        answer: dict[str, Any] = await self.statewire.invoke(HARNESS_PROTOCOL, "cancel", [{}])
        return answer

    async def mutate(self, body: dict[str, Any]) -> dict[str, Any]:
        """`mutate` with a composition.mutate body: `{composition}`."""
        answer: dict[str, Any] = await self.statewire.invoke(HARNESS_PROTOCOL, "mutate", [body])
        return answer

    async def set_interest(self, latest: int | None = None, messages: list[str] | None = None) -> Any:
        """Which messages this attach mounts: the newest `latest` and the named ones."""
        interest: dict[str, Any] = {}
        if latest is not None:
            interest["latest"] = latest
        if messages is not None:
            interest["messages"] = messages
        return await self.interest.set(interest)
