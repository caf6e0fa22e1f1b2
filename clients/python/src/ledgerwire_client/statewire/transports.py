"""The two ways a Statewire client reaches a thread: SSE (an attach on
`GET`/`POST /stream`, statements POSTed to `/frames` under the lease) and
WebSocket (the `statewire.v1` subprotocol on `/ws`).

Owns: carrying the negotiation fields, the client id and the bearer token
(asked again on every attach and request), and turning what arrives into
packets, in order, ending with `None`.
Must never: interpret a packet (the client does), or send the token to
another origin than the transport's URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol
from urllib.parse import quote

import httpx
from httpx_sse import EventSource
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException
from websockets.typing import Subprotocol

from .._http import NO_KEEPALIVE, TokenSource, bearer

__all__ = ["Transport", "Connection", "TransportError", "SseTransport", "WebSocketTransport", "SUBPROTOCOL"]

#: Silence on an SSE attach (the host sends a comment every 15 s) before it counts as dropped, in seconds.
STATEWIRE_SILENCE_S = 45.0
#: The WebSocket subprotocol.
SUBPROTOCOL = Subprotocol("statewire.v1")
#: Longest wait for an attach to open, in seconds.
OPEN_TIMEOUT_S = 10.0

Packet = dict[str, Any]


class TransportError(Exception):
    """A transport that could not open, or lost its connection."""


class Connection(Protocol):
    """One attach: its packets in order (ending at the first `None`), and statements out."""

    async def next_packet(self) -> Packet | None: ...

    async def send(self, frame: Packet) -> None: ...

    async def close(self) -> None: ...


class Transport(Protocol):
    kind: str
    url: str

    async def open(self, client_id: str, headers: dict[str, str], initial: Packet | None) -> Connection: ...


class _Queued:
    """Packets handed over from a reader task, ended by `None`."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Packet | None] = asyncio.Queue()
        self.error: str | None = None

    async def next_packet(self) -> Packet | None:
        return await self.queue.get()

    def end(self, error: str) -> None:
        if self.error is None:
            self.error = error
        self.queue.put_nowait(None)


class _SseConnection(_Queued):
    def __init__(self, transport: SseTransport) -> None:
        super().__init__()
        self.transport = transport
        self.lease = ""
        self.reader: asyncio.Task[None] | None = None

    async def send(self, frame: Packet) -> None:
        headers = {"Statewire-Lease": self.lease, **(await bearer(self.transport.token))}
        try:
            response = await self.transport.http.post(f"{self.transport.url}/frames", json=frame, headers=headers)
        except httpx.HTTPError as error:
            raise TransportError(f"a frame could not be sent ({error})") from error
        if response.status_code < 300:
            return
        body = _json(response)
        if isinstance(body, dict) and isinstance(body.get("fin"), dict):
            self.queue.put_nowait({"fin": body["fin"]})
        else:
            raise TransportError(f"a frame was answered {response.status_code}")

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader
        self.end("closed")


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


class SseTransport:
    """An SSE attach (`GET /stream`, or `POST /stream` with initial statements)."""

    kind = "sse"

    def __init__(self, url: str, *, token: TokenSource | None = None, silence_s: float = STATEWIRE_SILENCE_S) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(OPEN_TIMEOUT_S, read=silence_s), limits=NO_KEEPALIVE)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def open(self, client_id: str, headers: dict[str, str], initial: Packet | None) -> Connection:
        connection = _SseConnection(self)
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        all_headers = {**headers, "Statewire-Client-Id": client_id, **(await bearer(self.token))}
        connection.reader = asyncio.create_task(self._read(connection, all_headers, initial, opened))
        await opened
        return connection

    async def _read(
        self, connection: _SseConnection, headers: dict[str, str], initial: Packet | None, opened: asyncio.Future[None]
    ) -> None:
        method = "POST" if initial else "GET"
        try:
            async with self.http.stream(method, f"{self.url}/stream", headers=headers, json=initial) as response:
                if response.status_code != 200:
                    await response.aread()
                    body = _json(response)
                    if not (isinstance(body, dict) and isinstance(body.get("fin"), dict)):
                        raise TransportError(f"the attach answered {response.status_code}")
                    connection.queue.put_nowait({"fin": body["fin"]})
                    opened.set_result(None)
                    connection.end("refused")
                    return
                connection.lease = response.headers.get("Statewire-Lease", "")
                opened.set_result(None)
                async with contextlib.aclosing(EventSource(response).aiter_sse()) as events:
                    async for event in events:
                        if event.data:
                            connection.queue.put_nowait(json.loads(event.data))
            connection.end("the stream ended")
        except (httpx.HTTPError, TransportError, ValueError) as error:
            if not opened.done():
                opened.set_exception(TransportError(f"the attach could not reach the host ({error})"))
            connection.end(f"the stream dropped ({error})")


class _WebSocketConnection(_Queued):
    def __init__(self, socket: ClientConnection) -> None:
        super().__init__()
        self.socket = socket
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for message in self.socket:
                if isinstance(message, str):
                    self.queue.put_nowait(json.loads(message))
            self.end("the socket closed")
        except (WebSocketException, ValueError, OSError) as error:
            self.end(f"the socket dropped ({error})")

    async def send(self, frame: Packet) -> None:
        try:
            await self.socket.send(json.dumps(frame))
        except WebSocketException as error:
            raise TransportError(f"the socket is closed ({error})") from error

    async def close(self) -> None:
        await self.socket.close()
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.reader
        self.end("closed")


class WebSocketTransport:
    """A WebSocket attach (`/ws?client=…`, subprotocol `statewire.v1`)."""

    kind = "websocket"

    def __init__(self, url: str, *, token: TokenSource | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token

    async def aclose(self) -> None:
        return None

    async def open(self, client_id: str, headers: dict[str, str], initial: Packet | None) -> Connection:
        target = f"{self.url}/ws?client={quote(client_id)}"
        target = "ws" + target[4:] if target.startswith("http") else target
        auth = await bearer(self.token)
        try:
            socket = await connect(
                target, subprotocols=[SUBPROTOCOL], additional_headers=auth, open_timeout=OPEN_TIMEOUT_S
            )
        except (WebSocketException, OSError, TimeoutError) as error:
            raise TransportError(f"the socket could not open ({error})") from error
        await socket.send(json.dumps({"headers": headers, **(initial or {})}))
        return _WebSocketConnection(socket)


async def packets(connection: Connection) -> AsyncIterator[Packet]:
    """A connection's packets until its end."""
    while (packet := await connection.next_packet()) is not None:
        yield packet
