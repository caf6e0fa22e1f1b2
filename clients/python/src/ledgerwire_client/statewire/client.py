"""StatewireClient: attach to a thread over a transport, keep its documents,
and send commands that run exactly once across reconnects, restarts of
the program and restarts of the host.

Owns: the attach loop (backoff, which `fin` is final, the 10-minute retry
of `unsupported-version`/`unsupported-protocol`), the selection, one lane
per protocol (outbox, seq minted at flush, replay in seq order after every
hello), answers matched by (protocol, seq), the document table (ops applied
before the answers they come with), lease context, synced documents, and
the session and document storage.
Must never: send on a protocol outside the selection, mint a seq that would
leave a gap, renumber a command the host may have admitted, or reconnect
after a final `fin`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._http import TokenSource
from . import statepatch
from .protocol import (
    Offer,
    Offers,
    Selection,
    SelectionError,
    VersionRange,
    cursor_field,
    protocol_field,
    validate_selection,
    version_field,
)
from .session import (
    MAX_VERDICTS,
    CurrentContracts,
    DocumentsStorage,
    MemorySession,
    Record,
    SessionStorage,
    new_session,
    restore_session,
)
from .transports import Connection, SseTransport, Transport, TransportError, WebSocketTransport

__all__ = [
    "StatewireClient",
    "PendingCommand",
    "CommandRejected",
    "StatewireStopped",
    "MountedDocument",
    "WIRE_VERSION",
    "RETRY_FOR_S",
]

#: The wire range this client's one implementation speaks (the spec: the
#: Python client offers 2026-09-30, whose re-sent seqs re-emit their answers).
WIRE_VERSION = VersionRange("2026-09-30")
#: How long `unsupported-version`/`unsupported-protocol` refusals are retried, in seconds.
RETRY_FOR_S = 600.0
#: Reconnect backoff: first and longest wait, in seconds.
BACKOFF_S = (0.25, 5.0)
#: Commands one lane may hold unanswered.
MAX_OUTBOX_COMMANDS = 4096

_RETRIED_REFUSALS = frozenset({"unsupported-version", "unsupported-protocol"})
Status = Literal["idle", "connecting", "connected", "reconnecting", "closed", "failed"]


class CommandRejected(Exception):
    """A command the host answered with `err`."""

    def __init__(self, protocol: str, seq: int, err: dict[str, Any]) -> None:
        self.protocol = protocol
        self.seq = seq
        self.code = str(err.get("code"))
        self.data: Any = err.get("data")
        message = err.get("message")
        super().__init__(f"{protocol} #{seq} was refused: {self.code}" + (f": {message}" if message else ""))


class StatewireStopped(Exception):
    """The client stopped for good: a final `fin`, an invalid hello, or `close()`."""

    def __init__(self, message: str, fin: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.fin = fin


@dataclass
class MountedDocument:
    doc: int
    protocol: str
    value: Any
    key: tuple[str, ...] | None = None
    main: bool = False
    meta: Any = None


class PendingCommand:
    """One invoked command: await it for the answer's `ok` (CommandRejected on
    `err`); `seq` once minted; `release()` a held one."""

    def __init__(self, client: StatewireClient, protocol: str, entry: dict[str, Any]) -> None:
        self.client = client
        self.protocol = protocol
        self.entry = entry
        self.seq: int | None = None
        self.local_meta: Any = entry.get("localMeta")
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def __await__(self) -> Generator[Any, None, Any]:
        return self.future.__await__()

    def release(self) -> None:
        """Sends a held command (it gets its seq at this flush)."""
        self.entry.pop("hold", None)
        self.client._persist()
        self.client._schedule_flush()

    def discard(self) -> bool:
        """Drops a command not yet given a seq; False once it has one."""
        if self.seq is not None:
            return False
        self.client._drop_queued(self.protocol, self.entry["id"])
        self._settle(exception=StatewireStopped("discarded before it was sent"))
        return True

    def _settle(self, result: Any = None, exception: BaseException | None = None) -> None:
        if self.future.done():
            return
        if exception is not None:
            self.future.set_exception(exception)
            self.future.exception()  # retrieved: an unawaited rejection is not an error
        else:
            self.future.set_result(result)


@dataclass
class _AttachEnd:
    hello: bool
    fin: dict[str, Any] | None = None
    error: str | None = None
    invalid: str | None = None


class StatewireClient:
    """A Statewire thread: `async with StatewireClient.sse(url, …) as client`."""

    def __init__(
        self,
        transport: Transport,
        *,
        application_protocols: Offers,
        protocol: str | None = None,
        wire_version: VersionRange = WIRE_VERSION,
        key_prefixes: dict[str, Sequence[str]] | None = None,
        session: SessionStorage | None = None,
        documents: DocumentsStorage | None = None,
        namespace: str = "",
        retry_for_s: float | None = None,
        backoff_s: tuple[float, float] = BACKOFF_S,
        attacher: str | None = None,
    ) -> None:
        if application_protocols != "*":
            application_protocols = tuple(application_protocols)
        # A bad offer raises here, not on the wire.
        version_field(wire_version)
        protocol_field(application_protocols)
        self.transport = transport
        self.application_protocols: Offers = application_protocols
        self.protocol = protocol or (application_protocols[0].name if application_protocols != "*" else None)
        self.wire_version = wire_version
        self.key_prefixes = {k: tuple(v) for k, v in (key_prefixes or {}).items()}
        self.session_storage: SessionStorage = session if session is not None else MemorySession()
        self.documents_storage = documents
        self.namespace = namespace
        self.retry_for_s = RETRY_FOR_S if retry_for_s is None else retry_for_s
        self.backoff_s = backoff_s
        self.attacher = attacher or f"py{secrets.token_hex(8)}"
        self.status: Status = "idle"
        self.selection: Selection | None = None
        self.fin: dict[str, Any] | None = None
        self.error: str | None = None
        self.session_outcome: str | None = None
        self.attaches = 0
        self._record: Record | None = None
        self._ephemeral: dict[str, dict[str, Any]] = {}
        self._table: dict[int, MountedDocument] = {}
        self._context: dict[str, dict[str, Any]] = {}
        self._synced: dict[str, Any] = {}
        self._handles: dict[Any, PendingCommand] = {}
        self._connection: Connection | None = None
        self._sender: asyncio.Task[None] | None = None
        self._outgoing: asyncio.Queue[dict[str, Any]] | None = None
        self._closed = False
        self._flush_scheduled = False
        self._listeners: list[Callable[[list[int]], None]] = []
        self._changed = asyncio.Event()
        self._run_task: asyncio.Task[None] | None = None
        self._selected: asyncio.Future[Selection] | None = None
        self._wake = asyncio.Event()

    # ---- constructors ------------------------------------------------

    @classmethod
    def sse(cls, url: str, *, token: TokenSource | None = None, **options: Any) -> StatewireClient:
        """A client attaching over SSE to `url` (`…/threads/<id>`)."""
        return cls(SseTransport(url, token=token), **options)

    @classmethod
    def websocket(cls, url: str, *, token: TokenSource | None = None, **options: Any) -> StatewireClient:
        """A client attaching over WebSocket to `url` (`http(s)://…/threads/<id>` or `ws(s)://…`)."""
        return cls(WebSocketTransport(url, token=token), **options)

    async def __aenter__(self) -> StatewireClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- the session -------------------------------------------------

    def current(self) -> CurrentContracts:
        return CurrentContracts(self.wire_version, self.application_protocols)

    def session(self) -> Record:
        """The session record, loaded (and upgraded or migrated) on first use."""
        if self._record is not None:
            return self._record
        store = self.session_storage
        record, outcome = restore_session(store.load(), self.current(), getattr(store, "migrate", None))
        self._record = record
        self.session_outcome = outcome
        if outcome == "discarded":
            store.clear()
        self._persist()
        return record

    @property
    def client_id(self) -> str:
        return str(self.session()["clientId"])

    def _persist(self) -> None:
        if self._record is not None:
            self.session_storage.save(self._record)
        self._changed.set()

    def _lane(self, name: str) -> dict[str, Any]:
        lanes: dict[str, dict[str, Any]] = self.session()["lanes"]
        if name not in lanes:
            lanes[name] = {
                "nextSeq": 1, "commands": [], "outbox": [], "removed": [], "verdicts": {},
                "inbox": {"watermark": 0, "cursor": 0},
            }
        return lanes[name]

    def verdict(self, protocol: str, seq: int) -> dict[str, Any] | None:
        """The answer a lane kept for `seq` (after a restart, the result of a command sent before it)."""
        lane = self.session()["lanes"].get(protocol)
        found = lane["verdicts"].get(str(seq)) if lane else None
        return found if isinstance(found, dict) else None

    def reset_session(self) -> None:
        """Starts a new client identity (the old one's commands are not cancelled)."""
        self._record = new_session()
        self._persist()

    # ---- attaching ---------------------------------------------------

    async def connect(self) -> Selection:
        """Attaches, and keeps attaching after drops until `close()` or a final
        `fin`. Returns the first selection; raises StatewireStopped when the
        client stops before one."""
        if self._selected is None:
            self._closed = False
            self._selected = asyncio.get_running_loop().create_future()
            self._run_task = asyncio.create_task(self._run())
        return await asyncio.shield(self._selected)

    async def close(self) -> None:
        """Detaches for good; stored commands stay stored."""
        self._closed = True
        self._wake.set()
        if self._run_task is not None:
            self._run_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._run_task
        if self.status != "failed":
            self.status = "closed"
        if self._selected is not None and not self._selected.done():
            self._selected.set_exception(StatewireStopped("closed"))
            self._selected.exception()
        aclose = getattr(self.transport, "aclose", None)
        if aclose is not None:
            await aclose()

    async def _run(self) -> None:
        attempt = 0
        refused_since: float | None = None
        while not self._closed:
            self.status = "connecting" if self.attaches == 0 else "reconnecting"
            self._changed.set()
            ended = await self._attach_once()
            if self._closed:
                return
            if ended.hello:
                attempt, refused_since = 0, None
            fin = ended.fin
            if ended.invalid:
                return self._stop(f"the hello was not valid: {ended.invalid}", None)
            if fin and fin.get("code") in _RETRIED_REFUSALS:
                refused_since = refused_since or time.monotonic()
                if time.monotonic() - refused_since >= self.retry_for_s:
                    return self._stop(f"the host kept refusing the offers ({fin.get('code')})", fin)
            elif fin and fin.get("reason") in ("protocol-error", "unauthorized"):
                message = f": {fin['message']}" if fin.get("message") else ""
                return self._stop(f"the host ended the attach: {fin.get('code')}{message}", fin)
            self.fin, self.error = fin, ended.error
            wait = min(self.backoff_s[1], self.backoff_s[0] * 2**attempt)
            attempt += 1
            self._changed.set()
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _stop(self, message: str, fin: dict[str, Any] | None) -> None:
        self.fin, self.error, self._closed = fin, message, True
        self.status = "failed"
        self._changed.set()
        error = StatewireStopped(message, fin)
        if self._selected is not None and not self._selected.done():
            self._selected.set_exception(error)
            self._selected.exception()
        for handle in list(self._handles.values()):
            handle._settle(exception=error)

    def _offer_headers(self) -> dict[str, str]:
        headers = {
            "Statewire-Version": version_field(self.wire_version),
            "Statewire-Protocol": protocol_field(self.application_protocols),
            "Statewire-Attacher": self.attacher,
        }
        cursors = {name: lane["inbox"]["cursor"] for name, lane in self.session()["lanes"].items()}
        cursor = cursor_field(cursors)
        if cursor is not None:
            headers["Statewire-Cursor"] = cursor
        return headers

    def _initial_frame(self) -> dict[str, Any] | None:
        """The initial statements: lease context, and each synced document's value."""
        frame: dict[str, Any] = {}
        if self._context:
            frame["ctx"] = [{"protocol": p, **entry} for p, entry in self._context.items()]
        if self._synced:
            frame["cmd"] = [
                {"seq": 1, "protocol": p, "method": "set", "params": [value]} for p, value in self._synced.items()
            ]
        return frame or None

    async def _attach_once(self) -> _AttachEnd:
        record = self.session()
        initial = self._initial_frame()
        try:
            connection = await self.transport.open(record["clientId"], self._offer_headers(), initial)
        except TransportError as error:
            return _AttachEnd(hello=False, error=str(error))
        hello = False
        try:
            while (packet := await connection.next_packet()) is not None:
                if not hello:
                    if isinstance(packet.get("fin"), dict):
                        return _AttachEnd(hello=False, fin=packet["fin"])
                    try:
                        selection = validate_selection(packet.get("syn"), self.wire_version, self.application_protocols)
                    except SelectionError as error:
                        return _AttachEnd(hello=False, invalid=str(error))
                    hello = True
                    self._start_sending(connection)
                    self._hello(selection, packet, initial)
                    continue
                try:
                    self._apply_packet(packet)
                except (statepatch.PatchError, KeyError, ValueError, TypeError) as error:
                    return _AttachEnd(hello=True, error=f"a packet could not be applied: {error}")
                if isinstance(packet.get("fin"), dict):
                    return _AttachEnd(hello=True, fin=packet["fin"])
            return _AttachEnd(hello=hello, error=getattr(connection, "error", None) or "the attach ended")
        finally:
            self._stop_sending()
            await connection.close()

    def _start_sending(self, connection: Connection) -> None:
        """One writer per attach, so frames go out in the order they were made."""
        self._connection = connection
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._outgoing = queue

        async def write() -> None:
            while True:
                frame = await queue.get()
                try:
                    await connection.send(frame)
                except TransportError:
                    # The frame is lost: end this attach, so the next hello
                    # sends every unanswered command again.
                    await connection.close()
                    return

        self._sender = asyncio.create_task(write())

    def _stop_sending(self) -> None:
        self._connection, self._outgoing = None, None
        if self._sender is not None:
            self._sender.cancel()
            self._sender = None

    def _send(self, frame: dict[str, Any]) -> None:
        if self._outgoing is not None:
            self._outgoing.put_nowait(frame)

    def _hello(self, selection: Selection, packet: dict[str, Any], initial: dict[str, Any] | None) -> None:
        """A valid hello: lanes reconciled with their watermarks, the snapshot
        and its answers, then every unanswered command sent again in seq
        order and the outbox flushed."""
        self.attaches += 1
        self.selection, self.fin, self.error = selection, None, None
        record = self.session()
        for name, lane in self._ephemeral.items():  # Ephemeral lanes end with their attach.
            for command in lane["commands"]:
                handle = self._handles.pop((name, command["seq"]), None)
                if handle is not None:
                    handle._settle(exception=StatewireStopped(f"the attach ended before {name} answered"))
        self._ephemeral.clear()
        for selected in selection.protocols:
            if selected.record == "ephemeral":
                sent = sum(1 for c in (initial or {}).get("cmd", []) if c["protocol"] == selected.name)
                outbox = record["lanes"].pop(selected.name, {}).get("outbox", [])
                self._ephemeral[selected.name] = {"nextSeq": sent + 1, "commands": [], "outbox": outbox}
            else:
                self._reconcile(selected.name, self._lane(selected.name), selected.seq)
        self._table.clear()
        self._apply_packet(packet)
        self.status = "connected"
        self._persist()
        if self._selected is not None and not self._selected.done():
            self._selected.set_result(selection)
        resend = [
            {"seq": c["seq"], "protocol": p.name, "method": c["method"], "params": c["params"]}
            for p in selection.protocols
            if p.record != "ephemeral"
            for c in record["lanes"].get(p.name, {}).get("commands", [])
        ]
        if resend:
            self._send({"cmd": resend})
        self._flush()

    def _reconcile(self, name: str, lane: dict[str, Any], watermark: int) -> None:
        """Commands the app discarded above the watermark were never admitted,
        so the ones after them move down to keep seqs contiguous."""
        if any(seq > watermark for seq in lane["removed"]):
            following = watermark + 1
            for command in lane["commands"]:
                if command["seq"] <= watermark:
                    continue
                handle = self._handles.pop((name, command["seq"]), None)
                if handle is not None:
                    self._handles[(name, following)] = handle
                    handle.seq = following
                command["seq"] = following
                following += 1
        lane["removed"] = []
        lane["inbox"] = {"watermark": watermark, "cursor": min(lane["inbox"]["cursor"], watermark)}
        lane["nextSeq"] = max([watermark, *(c["seq"] for c in lane["commands"])]) + 1

    # ---- packets -----------------------------------------------------

    def _apply_packet(self, packet: dict[str, Any]) -> None:
        """Documents first (listeners are told), then answers, then durability."""
        ops = packet.get("ops")
        if isinstance(ops, list) and ops:
            docs = sorted({self._apply_op(op) for op in ops})
            self._cache_documents(docs)
            for listener in list(self._listeners):
                listener(docs)
        lanes_changed = False
        for answer in packet.get("ans") or []:
            lanes_changed = self._settle(answer) or lanes_changed
        for dur in packet.get("dur") or []:
            lane = (self._record or {}).get("lanes", {}).get(dur.get("protocol"))
            if lane is not None and dur.get("seq", 0) > lane["inbox"]["watermark"]:
                lane["inbox"]["watermark"] = dur["seq"]
                lanes_changed = True
        if lanes_changed:
            self._persist()
        self._changed.set()

    def _apply_op(self, op: dict[str, Any]) -> int:
        doc = int(op.get("doc", 0))
        if op["op"] == "mount":
            key = op.get("key")
            self._table[doc] = MountedDocument(
                doc, op["protocol"], op.get("value"), tuple(key) if key is not None else None,
                bool(op.get("main")), op.get("meta"),
            )
            return doc
        entry = self._table.get(doc)
        if entry is None:
            raise KeyError(f"document {doc} is not mounted")
        if op["op"] == "unmount":
            del self._table[doc]
            return doc
        step = {"op": op["op"], "path": op["path"]}
        if op["op"] != "remove":
            step["value"] = op.get("value")
        entry.value = statepatch.apply(entry.value, [step])
        return doc

    def _cache_documents(self, docs: list[int]) -> None:
        if self.documents_storage is None:
            return
        for doc in docs:
            entry = self._table.get(doc)
            if entry is None or not entry.key or entry.key[0] == ".":
                continue
            chosen = self.selection.get(entry.protocol) if self.selection else None
            identity = [self.namespace, entry.protocol, *entry.key]
            self.documents_storage.save(identity, {"version": chosen.version if chosen else "", "value": entry.value})

    def _settle(self, answer: dict[str, Any]) -> bool:
        """An answer to a command this client tracks (others are ignored);
        whether a durable lane changed."""
        protocol, seq = answer.get("protocol"), answer.get("seq")
        durable = (self._record or {}).get("lanes", {}).get(protocol)
        lane = durable if durable is not None else self._ephemeral.get(str(protocol))
        if lane is None:
            return False
        index = next((i for i, c in enumerate(lane["commands"]) if c["seq"] == seq), None)
        if index is None:
            return False
        del lane["commands"][index]
        handle = self._handles.pop((protocol, seq), None)
        err = answer.get("err")
        verdict = {"err": err} if err else {"ok": answer.get("ok")}
        if durable is not None:
            inbox = durable["inbox"]
            durable["inbox"] = {"watermark": max(inbox["watermark"], seq), "cursor": max(inbox["cursor"], seq)}
            verdicts = {**durable["verdicts"], str(seq): verdict}
            kept = sorted(verdicts, key=int, reverse=True)[:MAX_VERDICTS]
            durable["verdicts"] = {k: verdicts[k] for k in kept}
        if handle is not None:
            if err:
                handle._settle(exception=CommandRejected(str(protocol), int(seq or 0), err))
            else:
                handle._settle(answer.get("ok"))
        return durable is not None

    # ---- documents ---------------------------------------------------

    def document(self, protocol: str, key: Sequence[str] | None = None, prefix: Sequence[str] | None = None) -> Any:
        """A mounted document's value: `protocol`'s main document, or the one at
        `key` (a leading "." resolves against `prefix`, else the protocol's key
        prefix). Falls back to the document cache; None when unknown."""
        if key is None:
            return next((e.value for e in self._table.values() if e.protocol == protocol and e.main), None)
        key = tuple(key)
        base = tuple(prefix) if prefix is not None else self.key_prefixes.get(protocol)
        resolved = (*base, *key[1:]) if key and key[0] == "." and base is not None else key
        for entry in self._table.values():
            if entry.protocol == protocol and entry.key in (resolved, key):
                return entry.value
        if self.documents_storage is not None and not (resolved and resolved[0] == "."):
            cached = self.documents_storage.load([self.namespace, protocol, *resolved])
            return cached.get("value") if cached else None
        return None

    def documents(self) -> list[MountedDocument]:
        """The mounted table."""
        return list(self._table.values())

    def subscribe(self, listener: Callable[[list[int]], None]) -> Callable[[], None]:
        """Called with the changed document ids after each packet that changed
        documents; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def until(self, predicate: Callable[[StatewireClient], bool], timeout: float = 30.0) -> None:
        """Waits until `predicate(client)` holds (checked after every change);
        raises TimeoutError after `timeout` seconds."""

        async def wait() -> None:
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(wait(), timeout)
        except asyncio.TimeoutError as error:
            raise TimeoutError(f"the condition did not hold within {timeout} s") from error

    # ---- commands ----------------------------------------------------

    def _allowed(self, protocol: str) -> bool:
        if self.selection is not None:
            return protocol in self.selection
        return self.application_protocols == "*" or any(o.covers(protocol) for o in self.application_protocols)

    def _offer(self, protocol: str) -> Offer | None:
        if self.application_protocols == "*":
            return None
        return next((o for o in self.application_protocols if o.covers(protocol)), None)

    def invoke(
        self, protocol: str, method: str, params: Sequence[Any] = (), *, hold: bool = False, local_meta: Any = None
    ) -> PendingCommand:
        """Queues a command in `protocol`'s lane; the next flush mints its seq
        and sends it. `hold` keeps it queued until `release()`; `local_meta`
        is stored beside it and never sent. Raises for a protocol outside the
        selection."""
        if self.status == "failed":
            raise StatewireStopped(self.error or "the client stopped", self.fin)
        if not self._allowed(protocol):
            raise ValueError(f"{protocol} is not selected on this client")
        eph = self._ephemeral.get(protocol)
        lane = eph if eph is not None else self._lane(protocol)
        if len(lane["commands"]) + len(lane["outbox"]) >= MAX_OUTBOX_COMMANDS:
            raise RuntimeError(f"the {protocol} lane holds {MAX_OUTBOX_COMMANDS} unanswered commands")
        offer = self._offer(protocol)
        entry: dict[str, Any] = {
            "id": secrets.token_hex(8),
            "method": method,
            "params": list(params),
            "contract": {"wire": self.wire_version.as_json(), "protocol": offer.range.as_json() if offer else None},
        }
        if local_meta is not None:
            entry["localMeta"] = local_meta
        if hold:
            entry["hold"] = True
        lane["outbox"].append(entry)
        handle = PendingCommand(self, protocol, entry)
        self._handles[entry["id"]] = handle
        self._persist()
        if not hold:
            self._schedule_flush()
        return handle

    def send(
        self, method: str, *params: Any, protocol: str | None = None, hold: bool = False, local_meta: Any = None
    ) -> PendingCommand:
        """`invoke` in the spec's Python shape: `await client.send("setTheme",
        "dark", protocol="acme-chat")`; `protocol` defaults to the client's."""
        target = protocol or self.protocol
        if target is None:
            raise ValueError("name the protocol: this client has no default protocol")
        return self.invoke(target, method, params, hold=hold, local_meta=local_meta)

    def _drop_queued(self, protocol: str, entry_id: str) -> None:
        eph = self._ephemeral.get(protocol)
        lane = eph if eph is not None else (self._record or {}).get("lanes", {}).get(protocol)
        if lane is not None:
            lane["outbox"] = [e for e in lane["outbox"] if e["id"] != entry_id]
        self._handles.pop(entry_id, None)
        self._persist()

    def _schedule_flush(self) -> None:
        if self._flush_scheduled:
            return
        self._flush_scheduled = True

        def run() -> None:
            self._flush_scheduled = False
            self._flush()

        asyncio.get_running_loop().call_soon(run)

    def _flush(self) -> None:
        """Gives every queued, unheld command its seq and sends them in one frame."""
        if self.status != "connected" or self.selection is None:
            return
        cmd = []
        for selected in self.selection.protocols:
            eph = self._ephemeral.get(selected.name)
            lane = eph if eph is not None else (self._record or {}).get("lanes", {}).get(selected.name)
            if lane is None:
                continue
            held = []
            for entry in lane["outbox"]:
                if entry.get("hold"):
                    held.append(entry)
                    continue
                seq = lane["nextSeq"]
                lane["nextSeq"] = seq + 1
                stored = {k: entry[k] for k in ("method", "params", "contract", "localMeta") if k in entry}
                lane["commands"].append({"seq": seq, **stored})
                handle = self._handles.pop(entry["id"], None)
                if handle is not None:
                    handle.seq = seq
                    self._handles[(selected.name, seq)] = handle
                cmd.append({"seq": seq, "protocol": selected.name, "method": entry["method"], "params": entry["params"]})
            lane["outbox"] = held
        if cmd:
            self._persist()
            self._send({"cmd": cmd})

    def set_context(self, protocol: str, value: Any, meta: dict[str, Any] | None = None) -> None:
        """This attach's context for `protocol`: sent now, and again on every attach."""
        if self.selection is not None and not self._allowed(protocol):
            raise ValueError(f"{protocol} is not selected on this client")
        entry: dict[str, Any] = {"value": copy.deepcopy(value)}
        if meta is not None:
            entry["meta"] = meta
        self._context[protocol] = entry
        if self.status == "connected":
            self._send({"ctx": [{"protocol": protocol, **entry}]})

    def synced_document(self, protocol: str) -> SyncedDocument:
        """A client-owned document on an ephemeral protocol (`set`, `patch`),
        its value sent again on every attach."""
        return SyncedDocument(self, protocol)


class SyncedDocument:
    def __init__(self, client: StatewireClient, protocol: str) -> None:
        self.client = client
        self.protocol = protocol

    @property
    def value(self) -> Any:
        """The document as the host last mounted it (or as last set here)."""
        mounted = self.client.document(self.protocol)
        return mounted if mounted is not None else self.client._synced.get(self.protocol)

    async def set(self, value: Any) -> Any:
        self.client._synced[self.protocol] = copy.deepcopy(value)
        if self.client.status != "connected":
            return None
        return await self.client.invoke(self.protocol, "set", [value])

    async def patch(self, ops: list[dict[str, Any]]) -> Any:
        if self.protocol not in self.client._synced:
            raise ValueError("set the document before patching it")
        self.client._synced[self.protocol] = statepatch.apply(self.client._synced[self.protocol], ops)
        if self.client.status != "connected":
            return None
        return await self.client.invoke(self.protocol, "patch", [ops])
