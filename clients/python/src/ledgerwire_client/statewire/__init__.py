"""`ledgerwire_client.statewire`: the Statewire client API the specification
gives for Python.

    async with StatewireClient.sse(url, token=…, protocol="harness-sdk",
                                   application_protocols=(Offer(…), …)) as client:
        client.set_context("acme-chat", {"locale": "de"})
        await client.send("setTheme", "dark", protocol="acme-chat")
"""

from .client import (
    RETRY_FOR_S,
    WIRE_VERSION,
    CommandRejected,
    MountedDocument,
    PendingCommand,
    StatewireClient,
    StatewireStopped,
    SyncedDocument,
)
from .protocol import Offer, Selection, SelectedProtocol, SelectionError, VersionRange
from .session import (
    SESSION_FORMAT,
    CurrentContracts,
    FileDocuments,
    FileSession,
    MemoryDocuments,
    MemorySession,
    restore_session,
    upgrade_session,
)
from .transports import SseTransport, TransportError, WebSocketTransport

__all__ = [
    "RETRY_FOR_S",
    "SESSION_FORMAT",
    "WIRE_VERSION",
    "CommandRejected",
    "CurrentContracts",
    "FileDocuments",
    "FileSession",
    "MemoryDocuments",
    "MemorySession",
    "MountedDocument",
    "Offer",
    "PendingCommand",
    "Selection",
    "SelectedProtocol",
    "SelectionError",
    "SseTransport",
    "StatewireClient",
    "StatewireStopped",
    "SyncedDocument",
    "TransportError",
    "VersionRange",
    "WebSocketTransport",
    "restore_session",
    "upgrade_session",
]
