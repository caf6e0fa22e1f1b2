/**
 * @typedef {import('./negotiation.js').VersionRange} VersionRange
 * @typedef {import('./negotiation.js').ProtocolOffer} ProtocolOffer
 * @typedef {{wire: VersionRange, protocol: VersionRange | null}} CommandContract
 *   the offers a command was produced under (`protocol` null under `*`)
 * @typedef {{seq: number, method: string, params: unknown[], contract: CommandContract | null, localMeta?: unknown}} StoredCommand
 * @typedef {{id: string, method: string, params: unknown[], contract: CommandContract | null, localMeta?: unknown, hold?: boolean}} OutboxCommand
 * @typedef {{ok?: unknown, err?: {code: string, message?: string, data?: unknown}}} Verdict
 * @typedef {{
 *   nextSeq: number,
 *   commands: StoredCommand[],
 *   outbox?: OutboxCommand[],
 *   removed?: number[],
 *   verdicts?: Record<string, Verdict>,
 *   inbox?: {watermark: number, cursor: number},
 * }} Lane
 * @typedef {{format: 5, clientId: string, lanes: Record<string, Lane>}} SessionRecord
 * @typedef {{format: 5, wireVersion: VersionRange, applicationProtocols: ProtocolOffer[] | '*'}} CurrentContracts
 * @typedef {(record: SessionRecord, current: CurrentContracts) => SessionRecord | null} Migrate
 * @typedef {{load(): unknown, save(record: SessionRecord): void, clear?(): void, migrate?: Migrate}} SessionStorage
 * @typedef {{load(identity: string[]): {version: string, value: unknown} | null, save(identity: string[], entry: {version: string, value: unknown}): void}} DocumentsStorage
 */
/** A fresh client id: 32 hex digits. */
export function mintClientId(): string;
/** An empty record for a new client identity. @returns {SessionRecord} */
export function newSession(): SessionRecord;
/**
 * Any stored record, formats 1 to 5, as format 5; null when it is not a
 * session record at all.
 *   1: `{clientId, protocol, nextSeq, commands: [{seq, method, params}]}`, one lane
 *   2: `{format: 2, clientId, lanes: {[protocol]: {nextSeq, commands}}}`
 *   3: commands carry `contract: {wire, protocol}`
 *   4: lanes carry `outbox` (commands not yet given a seq)
 *   5: lanes carry `removed`, `verdicts` and `inbox`
 * @param {any} stored
 * @returns {SessionRecord | null}
 */
export function upgradeSession(stored: any): SessionRecord | null;
/**
 * Whether a stored command can be sent under the current offers: its
 * recorded wire range meets the current one and its protocol range the
 * current offer of its protocol.
 * @param {CommandContract | null} contract @param {string} protocol @param {CurrentContracts} current
 */
export function compatible(contract: CommandContract | null, protocol: string, current: CurrentContracts): boolean;
/**
 * The session to start from: the stored record upgraded to format 5 and,
 * when some stored command no longer fits the current offers, passed to
 * `migrate(record, current)`. A null from `migrate` discards the record
 * and starts a new client identity; entries still incompatible after it
 * (or with no `migrate`) are discarded locally: their seqs go to
 * `removed`, relinquishing their replay, not cancelling them.
 * @param {unknown} stored @param {CurrentContracts} current @param {Migrate} [migrate]
 * @returns {{record: SessionRecord, outcome: 'new' | 'loaded' | 'migrated' | 'discarded'}}
 */
export function restoreSession(stored: unknown, current: CurrentContracts, migrate?: Migrate): {
    record: SessionRecord;
    outcome: "new" | "loaded" | "migrated" | "discarded";
};
/** The storage format this client writes. */
export const SESSION_FORMAT: 5;
/** Answers a lane keeps for a reloaded app to read (`verdicts`), newest first. */
export const MAX_VERDICTS: 64;
/** A session kept in memory (tests, server rendering, or a page that forgets on reload). */
export class MemorySession {
    /** @param {{initial?: unknown, migrate?: Migrate}} [options] */
    constructor({ initial, migrate }?: {
        initial?: unknown;
        migrate?: Migrate;
    });
    /** @type {unknown} */
    stored: unknown;
    migrate: Migrate | undefined;
    load(): any;
    /** @param {SessionRecord} record */
    save(record: SessionRecord): void;
    clear(): void;
}
/**
 * A session in the browser's localStorage, one record per principal and
 * thread. Use the signed-in account's stable principal, and mount a new
 * one when the account changes.
 */
export class LocalStorageSession {
    /** @param {{principal: string, threadId: string, migrate?: Migrate, storage?: Storage, prefix?: string}} options */
    constructor({ principal, threadId, migrate, storage, prefix }: {
        principal: string;
        threadId: string;
        migrate?: Migrate;
        storage?: Storage;
        prefix?: string;
    });
    key: string;
    migrate: Migrate | undefined;
    storage: Storage | undefined;
    load(): any;
    /** @param {SessionRecord} record */
    save(record: SessionRecord): void;
    clear(): void;
}
/** A document cache in memory, keyed by `[namespace, protocol, ...key]`. */
export class MemoryDocuments {
    /** @type {Map<string, {version: string, value: unknown}>} */
    entries: Map<string, {
        version: string;
        value: unknown;
    }>;
    /** @param {string[]} identity */
    load(identity: string[]): {
        version: string;
        value: unknown;
    } | null;
    /** @param {string[]} identity @param {{version: string, value: unknown}} entry */
    save(identity: string[], entry: {
        version: string;
        value: unknown;
    }): void;
}
/** A document cache in localStorage. */
export class LocalStorageDocuments {
    /** @param {{storage?: Storage, prefix?: string}} [options] */
    constructor({ storage, prefix }?: {
        storage?: Storage;
        prefix?: string;
    });
    storage: Storage | undefined;
    prefix: string;
    /** @param {string[]} identity */
    load(identity: string[]): any;
    /** @param {string[]} identity @param {{version: string, value: unknown}} entry */
    save(identity: string[], entry: {
        version: string;
        value: unknown;
    }): void;
}
export type VersionRange = import("./negotiation.js").VersionRange;
export type ProtocolOffer = import("./negotiation.js").ProtocolOffer;
/**
 * the offers a command was produced under (`protocol` null under `*`)
 */
export type CommandContract = {
    wire: VersionRange;
    protocol: VersionRange | null;
};
export type StoredCommand = {
    seq: number;
    method: string;
    params: unknown[];
    contract: CommandContract | null;
    localMeta?: unknown;
};
export type OutboxCommand = {
    id: string;
    method: string;
    params: unknown[];
    contract: CommandContract | null;
    localMeta?: unknown;
    hold?: boolean;
};
export type Verdict = {
    ok?: unknown;
    err?: {
        code: string;
        message?: string;
        data?: unknown;
    };
};
export type Lane = {
    nextSeq: number;
    commands: StoredCommand[];
    outbox?: OutboxCommand[];
    removed?: number[];
    verdicts?: Record<string, Verdict>;
    inbox?: {
        watermark: number;
        cursor: number;
    };
};
export type SessionRecord = {
    format: 5;
    clientId: string;
    lanes: Record<string, Lane>;
};
export type CurrentContracts = {
    format: 5;
    wireVersion: VersionRange;
    applicationProtocols: ProtocolOffer[] | "*";
};
export type Migrate = (record: SessionRecord, current: CurrentContracts) => SessionRecord | null;
export type SessionStorage = {
    load(): unknown;
    save(record: SessionRecord): void;
    clear?(): void;
    migrate?: Migrate;
};
export type DocumentsStorage = {
    load(identity: string[]): {
        version: string;
        value: unknown;
    } | null;
    save(identity: string[], entry: {
        version: string;
        value: unknown;
    }): void;
};
