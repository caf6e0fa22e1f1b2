// session.js — what a Statewire client keeps between page loads: its
// client id and, per durable lane, the commands not yet answered, in
// storage format 5 (formats 1 to 4 are upgraded on load).
// Owns: the record's shape, upgrading older formats, checking stored
// commands against the current offers and the `migrate` policy, and the
// storage resources (`MemorySession`, `LocalStorageSession`,
// `MemoryDocuments`, `LocalStorageDocuments`).
// Must never: touch localStorage before a load or save asks for it (so
// importing or constructing under server rendering is safe), or renumber
// a command the server may have admitted.

import { overlaps } from './negotiation.js';

/** The storage format this client writes. */
export const SESSION_FORMAT = 5;
/** Answers a lane keeps for a reloaded app to read (`verdicts`), newest first. */
export const MAX_VERDICTS = 64;

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
export function mintClientId() {
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** An empty record for a new client identity. @returns {SessionRecord} */
export function newSession() {
  return { format: SESSION_FORMAT, clientId: mintClientId(), lanes: {} };
}

/** @param {any} command @returns {StoredCommand} */
function plainCommand(command) {
  return { seq: Number(command.seq), method: String(command.method), params: Array.isArray(command.params) ? command.params : [], contract: command.contract ?? null, ...(command.localMeta === undefined ? {} : { localMeta: command.localMeta }) };
}

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
export function upgradeSession(stored) {
  if (!stored || typeof stored !== 'object' || typeof stored.clientId !== 'string') return null;
  let record = stored;
  if (record.format === undefined) {
    record = { format: 2, clientId: record.clientId, lanes: typeof record.protocol === 'string' ? { [record.protocol]: { nextSeq: record.nextSeq ?? 1, commands: record.commands ?? [] } } : {} };
  }
  if (record.format === 2) {
    record = { ...record, format: 3, lanes: Object.fromEntries(Object.entries(record.lanes ?? {}).map(([name, lane]) => [name, { ...lane, commands: (lane.commands ?? []).map((c) => ({ ...c, contract: null })) }])) };
  }
  if (record.format === 3) record = { ...record, format: 4, lanes: Object.fromEntries(Object.entries(record.lanes ?? {}).map(([name, lane]) => [name, { ...lane, outbox: [] }])) };
  if (record.format === 4) record = { ...record, format: 5, lanes: Object.fromEntries(Object.entries(record.lanes ?? {}).map(([name, lane]) => [name, { ...lane, removed: [], verdicts: {}, inbox: { watermark: 0, cursor: 0 } }])) };
  if (record.format !== SESSION_FORMAT) return null;
  /** @type {Record<string, Lane>} */
  const lanes = {};
  for (const [name, lane] of Object.entries(record.lanes ?? {})) {
    /** @type {any} */
    const l = lane;
    lanes[name] = {
      nextSeq: Number(l.nextSeq ?? 1),
      commands: (l.commands ?? []).map(plainCommand).sort((a, b) => a.seq - b.seq),
      outbox: l.outbox ?? [],
      removed: l.removed ?? [],
      verdicts: l.verdicts ?? {},
      inbox: { watermark: Number(l.inbox?.watermark ?? 0), cursor: Number(l.inbox?.cursor ?? 0) },
    };
  }
  return { format: SESSION_FORMAT, clientId: record.clientId, lanes };
}

/**
 * Whether a stored command can be sent under the current offers: its
 * recorded wire range meets the current one and its protocol range the
 * current offer of its protocol.
 * @param {CommandContract | null} contract @param {string} protocol @param {CurrentContracts} current
 */
export function compatible(contract, protocol, current) {
  if (!contract) return false;
  if (!overlaps(contract.wire, current.wireVersion)) return false;
  if (current.applicationProtocols === '*' || !contract.protocol) return true;
  const offer = current.applicationProtocols.find((o) => o.name === protocol);
  return offer ? overlaps(contract.protocol, offer) : false;
}

/** @param {SessionRecord} record @param {CurrentContracts} current */
function incompatibleCount(record, current) {
  let count = 0;
  for (const [name, lane] of Object.entries(record.lanes)) {
    for (const command of [...lane.commands, ...(lane.outbox ?? [])]) if (!compatible(command.contract, name, current)) count += 1;
  }
  return count;
}

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
export function restoreSession(stored, current, migrate) {
  let record = upgradeSession(stored);
  if (!record) return { record: newSession(), outcome: 'new' };
  let outcome = /** @type {'loaded' | 'migrated'} */ ('loaded');
  if (incompatibleCount(record, current) > 0 && migrate) {
    const migrated = migrate(record, current);
    if (migrated === null) return { record: newSession(), outcome: 'discarded' };
    record = upgradeSession(migrated) ?? newSession();
    outcome = 'migrated';
  }
  for (const [name, lane] of Object.entries(record.lanes)) {
    const keep = lane.commands.filter((c) => compatible(c.contract, name, current));
    const dropped = lane.commands.filter((c) => !compatible(c.contract, name, current)).map((c) => c.seq);
    lane.commands = keep;
    lane.removed = [...(lane.removed ?? []), ...dropped];
    lane.outbox = (lane.outbox ?? []).filter((c) => compatible(c.contract, name, current));
  }
  return { record, outcome };
}

/** A session kept in memory (tests, server rendering, or a page that forgets on reload). */
export class MemorySession {
  /** @param {{initial?: unknown, migrate?: Migrate}} [options] */
  constructor({ initial = null, migrate } = {}) {
    /** @type {unknown} */
    this.stored = initial;
    this.migrate = migrate;
  }

  load() { return this.stored === null ? null : JSON.parse(JSON.stringify(this.stored)); }

  /** @param {SessionRecord} record */
  save(record) { this.stored = JSON.parse(JSON.stringify(record)); }

  clear() { this.stored = null; }
}

/** @param {Storage | undefined} storage */
function local(storage) {
  const store = storage ?? globalThis.localStorage;
  if (!store) throw new Error('no localStorage here: pass `storage`, or use MemorySession');
  return store;
}

/**
 * A session in the browser's localStorage, one record per principal and
 * thread. Use the signed-in account's stable principal, and mount a new
 * one when the account changes.
 */
export class LocalStorageSession {
  /** @param {{principal: string, threadId: string, migrate?: Migrate, storage?: Storage, prefix?: string}} options */
  constructor({ principal, threadId, migrate, storage, prefix = 'ledgerwire.statewire' }) {
    this.key = `${prefix}.${principal}.${threadId}`;
    this.migrate = migrate;
    this.storage = storage;
  }

  load() {
    try {
      const text = local(this.storage).getItem(this.key);
      return text === null ? null : JSON.parse(text);
    } catch {
      return null;
    }
  }

  /** @param {SessionRecord} record */
  save(record) {
    try {
      local(this.storage).setItem(this.key, JSON.stringify(record));
    } catch {
      // Storage full or refused: the client goes on and only forgets.
    }
  }

  clear() {
    try { local(this.storage).removeItem(this.key); } catch { /* nothing kept */ }
  }
}

/** A document cache in memory, keyed by `[namespace, protocol, ...key]`. */
export class MemoryDocuments {
  constructor() {
    /** @type {Map<string, {version: string, value: unknown}>} */
    this.entries = new Map();
  }

  /** @param {string[]} identity */
  load(identity) { return this.entries.get(JSON.stringify(identity)) ?? null; }

  /** @param {string[]} identity @param {{version: string, value: unknown}} entry */
  save(identity, entry) { this.entries.set(JSON.stringify(identity), entry); }
}

/** A document cache in localStorage. */
export class LocalStorageDocuments {
  /** @param {{storage?: Storage, prefix?: string}} [options] */
  constructor({ storage, prefix = 'ledgerwire.documents' } = {}) {
    this.storage = storage;
    this.prefix = prefix;
  }

  /** @param {string[]} identity */
  load(identity) {
    try {
      const text = local(this.storage).getItem(`${this.prefix}.${JSON.stringify(identity)}`);
      return text === null ? null : JSON.parse(text);
    } catch {
      return null;
    }
  }

  /** @param {string[]} identity @param {{version: string, value: unknown}} entry */
  save(identity, entry) {
    try { local(this.storage).setItem(`${this.prefix}.${JSON.stringify(identity)}`, JSON.stringify(entry)); } catch { /* forgets */ }
  }
}
