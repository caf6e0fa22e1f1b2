/**
 * @typedef {import('./negotiation.js').VersionRange} VersionRange
 * @typedef {import('./negotiation.js').ProtocolOffer} ProtocolOffer
 * @typedef {import('./negotiation.js').Selection} Selection
 * @typedef {import('./session.js').SessionRecord} SessionRecord
 * @typedef {import('./session.js').SessionStorage} SessionStorage
 * @typedef {import('./session.js').DocumentsStorage} DocumentsStorage
 * @typedef {import('./session.js').Lane} Lane
 * @typedef {import('./session.js').OutboxCommand} OutboxCommand
 * @typedef {import('./session.js').StoredCommand} StoredCommand
 * @typedef {import('./transports.js').Transport} Transport
 * @typedef {import('./transports.js').Packet} Packet
 * @typedef {import('./transports.js').ClientFrame} ClientFrame
 * @typedef {import('./transports.js').TransportConnection} TransportConnection
 * @typedef {{doc: number, protocol: string, key?: string[], main: boolean, value: any, meta?: any}} MountedDocument
 * @typedef {'idle' | 'connecting' | 'connected' | 'reconnecting' | 'closed' | 'failed'} ClientStatus
 * @typedef {{name: string, version: string, record?: 'ephemeral', watermark: number, cursor: number, nextSeq: number, pending: number, queued: number}} LaneView
 * @typedef {{status: ClientStatus, selection: Selection | null, fin: any, error: string | null, clientId: string | null, lanes: LaneView[], attaches: number}} ClientSnapshot
 * @typedef {{
 *   protocol?: string,
 *   applicationProtocols: ProtocolOffer[] | '*',
 *   wireVersion?: VersionRange,
 *   transport: Transport,
 *   keyPrefixes?: Record<string, string[]>,
 *   storage?: {session?: SessionStorage, documents?: DocumentsStorage, namespace?: string},
 *   retryForMs?: number,
 *   backoff?: {initialMs: number, maxMs: number},
 *   attacher?: string,
 * }} ClientOptions
 */
/** The wire range this client's one implementation speaks. */
export const WIRE_VERSION: Readonly<{
    version: "2026-11-02";
    minVersion: "2026-11-01";
}>;
/** How long `unsupported-version`/`unsupported-protocol` refusals are retried, in ms. */
export const RETRY_FOR_MS: number;
/** Reconnect backoff: first and longest wait, in ms. */
export const BACKOFF: Readonly<{
    initialMs: 250;
    maxMs: 5000;
}>;
/** Commands one lane may hold unanswered. */
export const MAX_OUTBOX_COMMANDS: 4096;
/** A command the host answered with `err`. */
export class CommandRejected extends Error {
    /** @param {string} protocol @param {number} seq @param {{code: string, message?: string, data?: any}} err */
    constructor(protocol: string, seq: number, err: {
        code: string;
        message?: string;
        data?: any;
    });
    protocol: string;
    seq: number;
    code: string;
    data: any;
}
/** The client stopped for good: a final `fin`, an invalid hello, or `close()`. */
export class StatewireStopped extends Error {
    /** @param {string} message @param {any} [fin] */
    constructor(message: string, fin?: any);
    fin: any;
}
/** One invoked command: its seq once minted, its result, and hold controls. */
export class PendingCommand {
    /** @param {StatewireClient} client @param {string} protocol @param {OutboxCommand} entry */
    constructor(client: StatewireClient, protocol: string, entry: OutboxCommand);
    client: StatewireClient;
    protocol: string;
    entry: import("./session.js").OutboxCommand;
    /** @type {number | null} */
    seq: number | null;
    localMeta: unknown;
    /** @type {(value: unknown) => void} */
    resolve: (value: unknown) => void;
    /** @type {(error: Error) => void} */
    reject: (error: Error) => void;
    /** Resolves with the answer's `ok`; rejects with CommandRejected. */
    result: Promise<any>;
    /** Sends a held command (it gets its seq at this flush). */
    release(): void;
    /** Drops a command not yet given a seq; false once it has one. */
    discard(): boolean;
}
export class StatewireClient {
    /** @param {ClientOptions} options */
    constructor({ protocol, applicationProtocols, wireVersion, transport, keyPrefixes, storage, retryForMs, backoff, attacher }: ClientOptions);
    protocol: string | undefined;
    applicationProtocols: import("./negotiation.js").ProtocolOffer[] | "*";
    wireVersion: import("./negotiation.js").VersionRange;
    transport: import("./transports.js").Transport;
    keyPrefixes: Record<string, string[]>;
    storage: {
        session?: SessionStorage;
        documents?: DocumentsStorage;
        namespace?: string;
    };
    retryForMs: number;
    backoffMs: {
        initialMs: number;
        maxMs: number;
    };
    attacher: string;
    /** @type {ClientStatus} */
    status: ClientStatus;
    /** @type {Selection | null} */
    selection: Selection | null;
    /** @type {any} */
    fin: any;
    /** @type {string | null} */
    error: string | null;
    /** @type {SessionRecord | null} */
    record: SessionRecord | null;
    /** Ephemeral lanes of the live attach. @type {Map<string, {nextSeq: number, commands: StoredCommand[], outbox: OutboxCommand[]}>} */
    ephemeral: Map<string, {
        nextSeq: number;
        commands: StoredCommand[];
        outbox: OutboxCommand[];
    }>;
    /** @type {Map<number, MountedDocument>} */
    table: Map<number, MountedDocument>;
    /** @type {Map<string, {value: any, meta?: any}>} */
    context: Map<string, {
        value: any;
        meta?: any;
    }>;
    /** @type {Map<string, any>} */
    synced: Map<string, any>;
    /** @type {Map<string, PendingCommand>} by outbox id, then by `protocol seq` */
    handles: Map<string, PendingCommand>;
    /** @type {TransportConnection | null} */
    connection: TransportConnection | null;
    attaches: number;
    closed: boolean;
    flushScheduled: boolean;
    /** @type {Set<() => void>} */
    subscribers: Set<() => void>;
    /** @type {Set<(change: {docs: number[]}) => void>} */
    documentListeners: Set<(change: {
        docs: number[];
    }) => void>;
    /** @type {Set<(direction: 'in' | 'out', packet: any) => void>} */
    packetListeners: Set<(direction: "in" | "out", packet: any) => void>;
    /** @type {ClientSnapshot | null} */
    snapshot: ClientSnapshot | null;
    /** @type {Promise<Selection> | null} */
    connecting: Promise<Selection> | null;
    wake: () => void;
    /** Client state listeners (`useSyncExternalStore`). @param {() => void} listener */
    subscribe(listener: () => void): () => void;
    /** @returns {ClientSnapshot} */
    getSnapshot(): ClientSnapshot;
    documents: {
        /**
         * A mounted document's value: `protocol`'s main document, or the one
         * at `key` (a leading "." resolves against `prefix`, or the
         * protocol's key prefix). Falls back to the document cache.
         * @param {string} protocolName @param {string[]} [key] @param {string[]} [prefix]
         */
        get(protocolName: string, key?: string[], prefix?: string[]): any;
        /** The mounted table. @returns {MountedDocument[]} */
        list(): MountedDocument[];
        /** Called after each packet that changed documents. @param {(change: {docs: number[]}) => void} listener */
        subscribe(listener: (change: {
            docs: number[];
        }) => void): () => void;
    };
    /** Every packet in and frame out, for an inspector. @param {(direction: 'in' | 'out', packet: any) => void} listener */
    onPacket(listener: (direction: "in" | "out", packet: any) => void): () => void;
    changed(): void;
    /** @param {ClientStatus} status */
    setStatus(status: ClientStatus): void;
    /** The session record, loaded (and upgraded or migrated) on first use. */
    session(): import("./session.js").SessionRecord;
    sessionOutcome: "new" | "loaded" | "migrated" | "discarded" | undefined;
    persist(): void;
    /** @param {string} name @returns {Lane} */
    lane(name: string): Lane;
    /** The answer a lane kept for `seq` (after a reload, the result of a command sent before it). @param {string} protocol @param {number} seq */
    verdict(protocol: string, seq: number): import("./session.js").Verdict | null;
    /**
     * Attaches, and keeps attaching after drops until `close()` or a final
     * `fin`. Resolves with the first selection; rejects when the client
     * stops before one.
     * @returns {Promise<Selection>}
     */
    connect(): Promise<Selection>;
    onSelected: ((value: import("./negotiation.js").Selection | PromiseLike<import("./negotiation.js").Selection>) => void) | undefined;
    onStopped: ((reason?: any) => void) | undefined;
    /** Detaches for good; stored commands stay stored. */
    close(): void;
    run(): Promise<void>;
    /** @param {string} message @param {any} fin */
    stop(message: string, fin: any): void;
    /** The negotiation fields of an attach. */
    offerHeaders(): Record<string, string>;
    /** The initial statements: lease context, and each synced document's value (ephemeral lanes start at 1). */
    initialFrame(): import("./transports.js").ClientFrame | null;
    /**
     * One attach, from open to its end.
     * @returns {Promise<{hello: boolean, fin?: any, error?: string, invalid?: string, unavailable?: string}>}
     */
    attachOnce(): Promise<{
        hello: boolean;
        fin?: any;
        error?: string;
        invalid?: string;
        unavailable?: string;
    }>;
    /**
     * A valid hello: the selection, the lanes reconciled with their
     * watermarks, the snapshot, its answers, then every unanswered command
     * sent again in seq order and the outbox flushed.
     * @param {Selection} selection @param {Packet} packet @param {ClientFrame | null} initial
     */
    hello(selection: Selection, packet: Packet, initial: ClientFrame | null): void;
    /**
     * A durable lane after a hello with watermark `watermark`: commands the
     * app discarded above it are gone for good (nothing above a watermark
     * was admitted), so the ones after them move down to keep seqs
     * contiguous; and the next seq follows the highest one in use.
     * @param {string} name @param {Lane} lane @param {number} watermark
     */
    reconcile(name: string, lane: Lane, watermark: number): void;
    /** @param {ClientFrame} frame */
    send(frame: ClientFrame): void;
    /**
     * A packet's members in their order: documents first (listeners are
     * told), then answers, then durability.
     * @param {Packet} packet
     */
    applyPacket(packet: Packet): void;
    /** @param {any} op @returns {number} the document it changed */
    applyOp(op: any): number;
    /** Keyed documents into the document cache. @param {Set<number>} docs */
    cacheDocuments(docs: Set<number>): void;
    /**
     * An answer to a command this client tracks; others are ignored.
     * @param {any} answer @returns {boolean} whether a durable lane changed
     */
    settle(answer: any): boolean;
    /** @param {string[]} key @param {string[] | undefined} prefix */
    resolveKey(key: string[], prefix: string[] | undefined): string[];
    /** @param {string} protocol @param {string[]} [key] @param {string[]} [prefix] */
    readDocument(protocol: string, key?: string[], prefix?: string[]): any;
    /** Whether commands may go to `protocol` now. @param {string} protocol */
    allowed(protocol: string): boolean;
    /**
     * Queues a command in `protocol`'s lane; the next flush gives it its
     * seq and sends it. `hold` keeps it queued until `release()`;
     * `localMeta` is stored beside it and never sent. Throws for a
     * protocol outside the selection.
     * @param {string} protocol @param {string} method @param {unknown[]} [params]
     * @param {{hold?: boolean, localMeta?: unknown}} [options]
     */
    invoke(protocol: string, method: string, params?: unknown[], { hold, localMeta }?: {
        hold?: boolean;
        localMeta?: unknown;
    }): PendingCommand;
    /** @param {string} protocol @param {string} id */
    dropQueued(protocol: string, id: string): void;
    scheduleFlush(): void;
    /** Gives every queued, unheld command its seq and sends them, in one frame. */
    flush(): void;
    /**
     * This attach's context for `protocol` (sent now, and again on every attach).
     * @param {string} protocol @param {unknown} value @param {unknown} [meta]
     */
    setContext(protocol: string, value: unknown, meta?: unknown): void;
    /**
     * A client-owned document on an ephemeral protocol: `set` replaces it,
     * `patch` changes it; its value is sent again on every attach.
     * @param {string} protocol
     */
    syncedDocument(protocol: string): {
        protocol: string;
        /** The document as the host last mounted it (or as last set here). */
        readonly value: any;
        /** @param {unknown} value */
        set(value: unknown): Promise<any>;
        /** @param {Array<{op: string, path: Array<string | number>, value?: unknown}>} ops */
        patch(ops: Array<{
            op: string;
            path: Array<string | number>;
            value?: unknown;
        }>): Promise<any>;
    };
    /** Starts a new client identity: forgets the stored session (its commands are not cancelled). */
    resetSession(): void;
}
export type VersionRange = import("./negotiation.js").VersionRange;
export type ProtocolOffer = import("./negotiation.js").ProtocolOffer;
export type Selection = import("./negotiation.js").Selection;
export type SessionRecord = import("./session.js").SessionRecord;
export type SessionStorage = import("./session.js").SessionStorage;
export type DocumentsStorage = import("./session.js").DocumentsStorage;
export type Lane = import("./session.js").Lane;
export type OutboxCommand = import("./session.js").OutboxCommand;
export type StoredCommand = import("./session.js").StoredCommand;
export type Transport = import("./transports.js").Transport;
export type Packet = import("./transports.js").Packet;
export type ClientFrame = import("./transports.js").ClientFrame;
export type TransportConnection = import("./transports.js").TransportConnection;
export type MountedDocument = {
    doc: number;
    protocol: string;
    key?: string[];
    main: boolean;
    value: any;
    meta?: any;
};
export type ClientStatus = "idle" | "connecting" | "connected" | "reconnecting" | "closed" | "failed";
export type LaneView = {
    name: string;
    version: string;
    record?: "ephemeral";
    watermark: number;
    cursor: number;
    nextSeq: number;
    pending: number;
    queued: number;
};
export type ClientSnapshot = {
    status: ClientStatus;
    selection: Selection | null;
    fin: any;
    error: string | null;
    clientId: string | null;
    lanes: LaneView[];
    attaches: number;
};
export type ClientOptions = {
    protocol?: string;
    applicationProtocols: ProtocolOffer[] | "*";
    wireVersion?: VersionRange;
    transport: Transport;
    keyPrefixes?: Record<string, string[]>;
    storage?: {
        session?: SessionStorage;
        documents?: DocumentsStorage;
        namespace?: string;
    };
    retryForMs?: number;
    backoff?: {
        initialMs: number;
        maxMs: number;
    };
    attacher?: string;
};
