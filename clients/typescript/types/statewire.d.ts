export { StatewireClient, PendingCommand, CommandRejected, StatewireStopped, WIRE_VERSION, RETRY_FOR_MS, BACKOFF, MAX_OUTBOX_COMMANDS } from "./statewire/client.js";
export { StatewireHttp, StatewireWebSocket, TransportError, TransportUnavailable, SUBPROTOCOL, STATEWIRE_SILENCE_MS } from "./statewire/transports.js";
export { SESSION_FORMAT, MAX_VERDICTS, MemorySession, LocalStorageSession, MemoryDocuments, LocalStorageDocuments, upgradeSession, restoreSession, compatible, newSession, mintClientId } from "./statewire/session.js";
export { applyPatch, PatchError, MAX_PATCH_OPERATIONS, MAX_PATH_DEPTH } from "./statewire/statepatch.js";
export { versionField, protocolField, readVersionField, readProtocolField, validateSelection, inRange, overlaps, isVersion } from "./statewire/negotiation.js";
