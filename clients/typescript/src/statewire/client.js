// client.js — StatewireClient: attach to a thread over a transport,
// keep its documents, and send commands that run exactly once across
// reconnects, reloads and host restarts.
// Owns: the attach loop (backoff, which `fin` is final, the 10-minute
// retry of `unsupported-version`/`unsupported-protocol`), the selection,
// one lane per protocol (outbox, seq minted at flush, replay in seq order
// after every hello), answers matched by (protocol, seq), the document
// table (ops applied before the answers they come with), lease context,
// synced documents, and the session and document storage.
// Must never: send on a protocol outside the selection, mint a seq that
// would leave a gap, renumber a command the host may have admitted, or
// reconnect after a final `fin`.

import { Token, serializeList } from 'structured-headers';
import { protocolField, validateSelection, versionField } from './negotiation.js';
import { TransportUnavailable } from './transports.js';
import { applyPatch } from './statepatch.js';
import { MAX_VERDICTS, newSession, restoreSession } from './session.js';

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
export const WIRE_VERSION = Object.freeze({ version: '2026-11-02', minVersion: '2026-11-01' });
/** How long `unsupported-version`/`unsupported-protocol` refusals are retried, in ms. */
export const RETRY_FOR_MS = 10 * 60_000;
/** Reconnect backoff: first and longest wait, in ms. */
export const BACKOFF = Object.freeze({ initialMs: 250, maxMs: 5_000 });
/** Commands one lane may hold unanswered. */
export const MAX_OUTBOX_COMMANDS = 4096;

const RETRIED_REFUSALS = new Set(['unsupported-version', 'unsupported-protocol']);

/** A command the host answered with `err`. */
export class CommandRejected extends Error {
  /** @param {string} protocol @param {number} seq @param {{code: string, message?: string, data?: any}} err */
  constructor(protocol, seq, err) {
    super(`${protocol} #${seq} was refused: ${err.code}${err.message ? `: ${err.message}` : ''}`);
    this.name = 'CommandRejected';
    this.protocol = protocol;
    this.seq = seq;
    this.code = err.code;
    this.data = err.data;
  }
}

/** The client stopped for good: a final `fin`, an invalid hello, or `close()`. */
export class StatewireStopped extends Error {
  /** @param {string} message @param {any} [fin] */
  constructor(message, fin) {
    super(message);
    this.name = 'StatewireStopped';
    this.fin = fin ?? null;
  }
}

/** One invoked command: its seq once minted, its result, and hold controls. */
export class PendingCommand {
  /** @param {StatewireClient} client @param {string} protocol @param {OutboxCommand} entry */
  constructor(client, protocol, entry) {
    this.client = client;
    this.protocol = protocol;
    this.entry = entry;
    /** @type {number | null} */
    this.seq = null;
    this.localMeta = entry.localMeta;
    /** @type {(value: unknown) => void} */
    this.resolve = () => {};
    /** @type {(error: Error) => void} */
    this.reject = () => {};
    /** Resolves with the answer's `ok`; rejects with CommandRejected. */
    this.result = new Promise((resolve, reject) => { this.resolve = resolve; this.reject = reject; });
    this.result.catch(() => {});
  }

  /** Sends a held command (it gets its seq at this flush). */
  release() {
    this.entry.hold = false;
    this.client.persist();
    this.client.scheduleFlush();
  }

  /** Drops a command not yet given a seq; false once it has one. */
  discard() {
    if (this.seq !== null) return false;
    this.client.dropQueued(this.protocol, this.entry.id);
    this.reject(new StatewireStopped('discarded before it was sent'));
    return true;
  }
}

/** @param {string[] | undefined} a @param {string[] | undefined} b */
const sameKey = (a, b) => Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((part, i) => part === b[i]);

let attacherCounter = 0;

export class StatewireClient {
  /** @param {ClientOptions} options */
  constructor({ protocol, applicationProtocols, wireVersion = WIRE_VERSION, transport, keyPrefixes = {}, storage = {}, retryForMs = RETRY_FOR_MS, backoff = BACKOFF, attacher }) {
    if (!transport) throw new TypeError('a transport is required: StatewireHttp({url}) or StatewireWebSocket({url})');
    this.protocol = protocol ?? (applicationProtocols === '*' ? undefined : applicationProtocols[0]?.name);
    this.applicationProtocols = applicationProtocols;
    this.wireVersion = wireVersion;
    this.transport = transport;
    this.keyPrefixes = keyPrefixes;
    this.storage = storage;
    this.retryForMs = retryForMs;
    this.backoffMs = backoff;
    attacherCounter += 1;
    this.attacher = attacher ?? `a${Date.now().toString(36)}${attacherCounter}${Math.random().toString(36).slice(2, 8)}`;
    // Check the offers now: a bad range throws here, not on the wire.
    versionField(wireVersion);
    protocolField(applicationProtocols);
    /** @type {ClientStatus} */
    this.status = 'idle';
    /** @type {Selection | null} */
    this.selection = null;
    /** @type {any} */
    this.fin = null;
    /** @type {string | null} */
    this.error = null;
    /** @type {SessionRecord | null} */
    this.record = null;
    /** Ephemeral lanes of the live attach. @type {Map<string, {nextSeq: number, commands: StoredCommand[], outbox: OutboxCommand[]}>} */
    this.ephemeral = new Map();
    /** @type {Map<number, MountedDocument>} */
    this.table = new Map();
    /** @type {Map<string, {value: any, meta?: any}>} */
    this.context = new Map();
    /** @type {Map<string, any>} */
    this.synced = new Map();
    /** @type {Map<string, PendingCommand>} by outbox id, then by `protocol seq` */
    this.handles = new Map();
    /** @type {TransportConnection | null} */
    this.connection = null;
    this.attaches = 0;
    this.closed = false;
    this.flushScheduled = false;
    /** @type {Set<() => void>} */
    this.subscribers = new Set();
    /** @type {Set<(change: {docs: number[]}) => void>} */
    this.documentListeners = new Set();
    /** @type {Set<(direction: 'in' | 'out', packet: any) => void>} */
    this.packetListeners = new Set();
    /** @type {ClientSnapshot | null} */
    this.snapshot = null;
    /** @type {Promise<Selection> | null} */
    this.connecting = null;
    this.wake = () => {};
    this.subscribe = this.subscribe.bind(this);
    this.getSnapshot = this.getSnapshot.bind(this);
    const client = this;
    this.documents = {
      /**
       * A mounted document's value: `protocol`'s main document, or the one
       * at `key` (a leading "." resolves against `prefix`, or the
       * protocol's key prefix). Falls back to the document cache.
       * @param {string} protocolName @param {string[]} [key] @param {string[]} [prefix]
       */
      get(protocolName, key, prefix) { return client.readDocument(protocolName, key, prefix); },
      /** The mounted table. @returns {MountedDocument[]} */
      list() { return [...client.table.values()]; },
      /** Called after each packet that changed documents. @param {(change: {docs: number[]}) => void} listener */
      subscribe(listener) {
        client.documentListeners.add(listener);
        return () => { client.documentListeners.delete(listener); };
      },
    };
  }

  // ---- observing -------------------------------------------------------

  /** Client state listeners (`useSyncExternalStore`). @param {() => void} listener */
  subscribe(listener) {
    this.subscribers.add(listener);
    return () => { this.subscribers.delete(listener); };
  }

  /** @returns {ClientSnapshot} */
  getSnapshot() {
    if (this.snapshot) return this.snapshot;
    /** @type {LaneView[]} */
    const lanes = [];
    for (const selected of this.selection?.protocols ?? []) {
      const durable = this.record?.lanes[selected.name];
      const eph = this.ephemeral.get(selected.name);
      lanes.push({
        name: selected.name, version: selected.version, ...(selected.record ? { record: selected.record } : {}),
        watermark: durable?.inbox?.watermark ?? 0, cursor: durable?.inbox?.cursor ?? 0,
        nextSeq: durable?.nextSeq ?? eph?.nextSeq ?? 1,
        pending: (durable?.commands.length ?? 0) + (eph?.commands.length ?? 0),
        queued: (durable?.outbox?.length ?? 0) + (eph?.outbox.length ?? 0),
      });
    }
    this.snapshot = { status: this.status, selection: this.selection, fin: this.fin, error: this.error, clientId: this.record?.clientId ?? null, lanes, attaches: this.attaches };
    return this.snapshot;
  }

  /** Every packet in and frame out, for an inspector. @param {(direction: 'in' | 'out', packet: any) => void} listener */
  onPacket(listener) {
    this.packetListeners.add(listener);
    return () => { this.packetListeners.delete(listener); };
  }

  changed() {
    this.snapshot = null;
    for (const listener of [...this.subscribers]) listener();
  }

  /** @param {ClientStatus} status */
  setStatus(status) {
    if (this.status === status) return;
    this.status = status;
    this.changed();
  }

  // ---- the session -----------------------------------------------------

  /** The session record, loaded (and upgraded or migrated) on first use. */
  session() {
    if (this.record) return this.record;
    const store = this.storage.session;
    const current = { format: /** @type {5} */ (5), wireVersion: this.wireVersion, applicationProtocols: this.applicationProtocols };
    const { record, outcome } = restoreSession(store ? store.load() : null, current, store?.migrate);
    this.record = record;
    this.sessionOutcome = outcome;
    if (outcome === 'discarded') store?.clear?.();
    this.persist();
    return record;
  }

  persist() {
    if (this.record) this.storage.session?.save(this.record);
    this.changed();
  }

  /** @param {string} name @returns {Lane} */
  lane(name) {
    const lanes = this.session().lanes;
    lanes[name] ??= { nextSeq: 1, commands: [], outbox: [], removed: [], verdicts: {}, inbox: { watermark: 0, cursor: 0 } };
    return lanes[name];
  }

  /** The answer a lane kept for `seq` (after a reload, the result of a command sent before it). @param {string} protocol @param {number} seq */
  verdict(protocol, seq) {
    return this.session().lanes[protocol]?.verdicts?.[String(seq)] ?? null;
  }

  // ---- attaching -------------------------------------------------------

  /**
   * Attaches, and keeps attaching after drops until `close()` or a final
   * `fin`. Resolves with the first selection; rejects when the client
   * stops before one.
   * @returns {Promise<Selection>}
   */
  connect() {
    if (this.connecting) return this.connecting;
    this.closed = false;
    this.connecting = new Promise((resolve, reject) => {
      this.onSelected = resolve;
      this.onStopped = reject;
    });
    this.connecting.catch(() => {});
    this.run();
    return this.connecting;
  }

  /** Detaches for good; stored commands stay stored. */
  close() {
    this.closed = true;
    this.connection?.close();
    this.connection = null;
    this.wake();
    this.setStatus('closed');
    this.onStopped?.(new StatewireStopped('closed'));
  }

  async run() {
    let attempt = 0;
    /** @type {number | null} */
    let refusedSince = null;
    while (!this.closed) {
      this.setStatus(this.attaches === 0 ? 'connecting' : 'reconnecting');
      const ended = await this.attachOnce();
      if (this.closed) return;
      if (ended.hello) { attempt = 0; refusedSince = null; }
      const fin = ended.fin;
      if (ended.invalid) return this.stop(`the hello was not valid: ${ended.invalid}`, null);
      if (ended.unavailable) return this.stop(ended.unavailable, null);
      if (fin && RETRIED_REFUSALS.has(fin.code)) {
        refusedSince ??= Date.now();
        if (Date.now() - refusedSince >= this.retryForMs) return this.stop(`the host kept refusing the offers (${fin.code})`, fin);
      } else if (fin && (fin.reason === 'protocol-error' || fin.reason === 'unauthorized')) {
        return this.stop(`the host ended the attach: ${fin.code}${fin.message ? `: ${fin.message}` : ''}`, fin);
      }
      this.fin = fin ?? null;
      this.error = ended.error ?? null;
      const wait = Math.min(this.backoffMs.maxMs, this.backoffMs.initialMs * 2 ** attempt);
      attempt += 1;
      this.changed();
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.wake = () => { clearTimeout(timer); resolve(undefined); };
      });
    }
  }

  /** @param {string} message @param {any} fin */
  stop(message, fin) {
    this.fin = fin;
    this.error = message;
    this.closed = true;
    this.setStatus('failed');
    const error = new StatewireStopped(message, fin);
    this.onStopped?.(error);
    for (const handle of this.handles.values()) handle.reject(error);
  }

  /** The negotiation fields of an attach. */
  offerHeaders() {
    /** @type {Record<string, string>} */
    const headers = {
      'Statewire-Version': versionField(this.wireVersion),
      'Statewire-Protocol': protocolField(this.applicationProtocols),
      'Statewire-Attacher': this.attacher,
    };
    const cursor = Object.entries(this.session().lanes)
      .filter(([, lane]) => (lane.inbox?.cursor ?? 0) > 0)
      .map(([name, lane]) => /** @type {[Token, Map<string, number>]} */ ([new Token(name), new Map([['seq', lane.inbox?.cursor ?? 0]])]));
    if (cursor.length > 0) headers['Statewire-Cursor'] = serializeList(cursor);
    return headers;
  }

  /** The initial statements: lease context, and each synced document's value (ephemeral lanes start at 1). */
  initialFrame() {
    /** @type {ClientFrame} */
    const frame = {};
    if (this.context.size > 0) frame.ctx = [...this.context].map(([protocol, entry]) => ({ protocol, value: entry.value, ...(entry.meta === undefined ? {} : { meta: entry.meta }) }));
    const sets = [...this.synced].map(([protocol, value]) => ({ seq: 1, protocol, method: 'set', params: [value] }));
    if (sets.length > 0) frame.cmd = sets;
    return frame.ctx || frame.cmd ? frame : null;
  }

  /**
   * One attach, from open to its end.
   * @returns {Promise<{hello: boolean, fin?: any, error?: string, invalid?: string, unavailable?: string}>}
   */
  attachOnce() {
    const record = this.session();
    const initial = this.initialFrame();
    return new Promise((resolve) => {
      let hello = false;
      let over = false;
      /** @type {TransportConnection | null} */
      let connection = null;
      /** @param {{fin?: any, error?: string, invalid?: string, unavailable?: string}} how */
      const end = (how) => {
        if (over) return;
        over = true;
        connection?.close();
        if (this.connection === connection) this.connection = null;
        resolve({ hello, ...how });
      };
      /** @param {Packet} packet */
      const onPacket = (packet) => {
        if (over) return;
        for (const listener of this.packetListeners) listener('in', packet);
        if (!hello) {
          if (packet.fin) { end({ fin: packet.fin }); return; }
          let selection;
          try {
            selection = validateSelection(packet.syn, this.wireVersion, this.applicationProtocols);
          } catch (error) {
            end({ invalid: error instanceof Error ? error.message : String(error) });
            return;
          }
          hello = true;
          ready.then((open) => {
            if (over) return;
            connection = open;
            this.connection = open;
            this.hello(selection, packet, initial);
          });
          return;
        }
        try {
          this.applyPacket(packet);
        } catch (error) {
          end({ error: `a packet could not be applied: ${error instanceof Error ? error.message : error}` });
          return;
        }
        if (packet.fin) end({ fin: packet.fin });
      };
      const ready = this.transport.open({
        clientId: record.clientId, headers: this.offerHeaders(), initial, onPacket,
        onClose: (reason) => end({ error: reason instanceof Error ? reason.message : String(reason) }),
      });
      ready.then((open) => {
        if (over) open.close();
        else connection = open;
      }, (error) => {
        // A transport that cannot exist here will not on a retry either.
        if (error instanceof TransportUnavailable) end({ unavailable: error.message });
        else end({ error: error instanceof Error ? error.message : String(error) });
      });
      this.wake = () => end({ error: 'closed' });
    });
  }

  /**
   * A valid hello: the selection, the lanes reconciled with their
   * watermarks, the snapshot, its answers, then every unanswered command
   * sent again in seq order and the outbox flushed.
   * @param {Selection} selection @param {Packet} packet @param {ClientFrame | null} initial
   */
  hello(selection, packet, initial) {
    this.attaches += 1;
    this.selection = selection;
    this.fin = null;
    this.error = null;
    const record = this.session();
    // Ephemeral lanes end with their attach: what they still owed is lost.
    for (const [name, lane] of this.ephemeral) {
      for (const command of lane.commands) {
        this.handles.get(`${name} ${command.seq}`)?.reject(new StatewireStopped(`the attach ended before ${name} answered #${command.seq}`));
        this.handles.delete(`${name} ${command.seq}`);
      }
    }
    this.ephemeral.clear();
    for (const selected of selection.protocols) {
      if (selected.record === 'ephemeral') {
        const sent = (initial?.cmd ?? []).filter((c) => c.protocol === selected.name).length;
        const outbox = record.lanes[selected.name]?.outbox ?? [];
        delete record.lanes[selected.name];
        this.ephemeral.set(selected.name, { nextSeq: sent + 1, commands: [], outbox });
      } else {
        this.reconcile(selected.name, this.lane(selected.name), selected.seq);
      }
    }
    this.table.clear();
    this.applyPacket(packet);
    this.persist();
    this.setStatus('connected');
    this.onSelected?.(selection);
    /** @type {any[]} */
    const cmd = [];
    for (const selected of selection.protocols) {
      if (selected.record === 'ephemeral') continue;
      for (const command of record.lanes[selected.name]?.commands ?? []) {
        cmd.push({ seq: command.seq, protocol: selected.name, method: command.method, params: command.params });
      }
    }
    if (cmd.length > 0) this.send({ cmd });
    this.flush();
  }

  /**
   * A durable lane after a hello with watermark `watermark`: commands the
   * app discarded above it are gone for good (nothing above a watermark
   * was admitted), so the ones after them move down to keep seqs
   * contiguous; and the next seq follows the highest one in use.
   * @param {string} name @param {Lane} lane @param {number} watermark
   */
  reconcile(name, lane, watermark) {
    const removed = (lane.removed ?? []).filter((seq) => seq > watermark);
    if (removed.length > 0) {
      let next = watermark + 1;
      for (const command of lane.commands) {
        if (command.seq <= watermark) continue;
        const handle = this.handles.get(`${name} ${command.seq}`);
        if (handle) {
          this.handles.delete(`${name} ${command.seq}`);
          this.handles.set(`${name} ${next}`, handle);
          handle.seq = next;
        }
        command.seq = next;
        next += 1;
      }
    }
    lane.removed = [];
    lane.inbox = { watermark, cursor: Math.min(lane.inbox?.cursor ?? 0, watermark) };
    const highest = lane.commands.reduce((max, c) => Math.max(max, c.seq), watermark);
    lane.nextSeq = highest + 1;
  }

  /** @param {ClientFrame} frame */
  send(frame) {
    const connection = this.connection;
    if (!connection) return;
    for (const listener of this.packetListeners) listener('out', frame);
    // A frame lost with its connection is sent again after the next hello.
    connection.send(frame).catch(() => {});
  }

  // ---- packets ---------------------------------------------------------

  /**
   * A packet's members in their order: documents first (listeners are
   * told), then answers, then durability.
   * @param {Packet} packet
   */
  applyPacket(packet) {
    if (Array.isArray(packet.ops) && packet.ops.length > 0) {
      /** @type {Set<number>} */
      const docs = new Set();
      for (const op of packet.ops) docs.add(this.applyOp(op));
      this.cacheDocuments(docs);
      for (const listener of [...this.documentListeners]) listener({ docs: [...docs] });
    }
    let lanesChanged = false;
    for (const answer of packet.ans ?? []) lanesChanged = this.settle(answer) || lanesChanged;
    for (const dur of packet.dur ?? []) {
      const lane = this.record?.lanes[dur.protocol];
      if (lane?.inbox && dur.seq > lane.inbox.watermark) {
        lane.inbox.watermark = dur.seq;
        lanesChanged = true;
      }
    }
    if (lanesChanged) this.persist();
  }

  /** @param {any} op @returns {number} the document it changed */
  applyOp(op) {
    const doc = op.doc ?? 0;
    if (op.op === 'mount') {
      this.table.set(doc, { doc, protocol: op.protocol, ...(op.key ? { key: op.key } : {}), main: Boolean(op.main), value: op.value, ...(op.meta === undefined ? {} : { meta: op.meta }) });
      return doc;
    }
    const entry = this.table.get(doc);
    if (!entry) throw new Error(`document ${doc} is not mounted`);
    if (op.op === 'unmount') {
      this.table.delete(doc);
      return doc;
    }
    this.table.set(doc, { ...entry, value: applyPatch(entry.value, [{ op: op.op, path: op.path, ...(op.op === 'remove' ? {} : { value: op.value }) }]) });
    return doc;
  }

  /** Keyed documents into the document cache. @param {Set<number>} docs */
  cacheDocuments(docs) {
    const cache = this.storage.documents;
    if (!cache) return;
    for (const id of docs) {
      const entry = this.table.get(id);
      if (!entry?.key || entry.key[0] === '.') continue;
      const version = this.selection?.protocols.find((p) => p.name === entry.protocol)?.version ?? '';
      cache.save([this.storage.namespace ?? '', entry.protocol, ...entry.key], { version, value: entry.value });
    }
  }

  /**
   * An answer to a command this client tracks; others are ignored.
   * @param {any} answer @returns {boolean} whether a durable lane changed
   */
  settle(answer) {
    const key = `${answer.protocol} ${answer.seq}`;
    const handle = this.handles.get(key);
    const durable = this.record?.lanes[answer.protocol];
    const lane = durable ?? this.ephemeral.get(answer.protocol);
    const index = lane ? lane.commands.findIndex((c) => c.seq === answer.seq) : -1;
    if (!lane || index < 0) return false;
    lane.commands.splice(index, 1);
    this.handles.delete(key);
    const verdict = 'err' in answer && answer.err ? { err: answer.err } : { ok: answer.ok ?? null };
    if (durable) {
      durable.inbox = { watermark: Math.max(durable.inbox?.watermark ?? 0, answer.seq), cursor: Math.max(durable.inbox?.cursor ?? 0, answer.seq) };
      const verdicts = { ...durable.verdicts, [String(answer.seq)]: verdict };
      const kept = Object.keys(verdicts).map(Number).sort((a, b) => b - a).slice(0, MAX_VERDICTS);
      durable.verdicts = Object.fromEntries(kept.map((seq) => [String(seq), verdicts[String(seq)]]));
    }
    if (handle) {
      if (verdict.err) handle.reject(new CommandRejected(answer.protocol, answer.seq, verdict.err));
      else handle.resolve(verdict.ok);
    }
    return Boolean(durable);
  }

  // ---- documents -------------------------------------------------------

  /** @param {string[]} key @param {string[] | undefined} prefix */
  resolveKey(key, prefix) {
    return key[0] === '.' && prefix ? [...prefix, ...key.slice(1)] : key;
  }

  /** @param {string} protocol @param {string[]} [key] @param {string[]} [prefix] */
  readDocument(protocol, key, prefix) {
    if (key === undefined) {
      for (const entry of this.table.values()) if (entry.protocol === protocol && entry.main) return entry.value;
      return undefined;
    }
    const resolved = this.resolveKey(key, prefix ?? this.keyPrefixes[protocol]);
    for (const entry of this.table.values()) {
      if (entry.protocol === protocol && (sameKey(entry.key, resolved) || sameKey(entry.key, key))) return entry.value;
    }
    if (resolved[0] !== '.' && this.storage.documents) {
      return this.storage.documents.load([this.storage.namespace ?? '', protocol, ...resolved])?.value;
    }
    return undefined;
  }

  // ---- commands --------------------------------------------------------

  /** Whether commands may go to `protocol` now. @param {string} protocol */
  allowed(protocol) {
    if (this.selection) return this.selection.protocols.some((p) => p.name === protocol);
    if (this.applicationProtocols === '*') return true;
    return this.applicationProtocols.some((o) => o.name === protocol || protocol.startsWith(`${o.name}/`));
  }

  /**
   * Queues a command in `protocol`'s lane; the next flush gives it its
   * seq and sends it. `hold` keeps it queued until `release()`;
   * `localMeta` is stored beside it and never sent. Throws for a
   * protocol outside the selection.
   * @param {string} protocol @param {string} method @param {unknown[]} [params]
   * @param {{hold?: boolean, localMeta?: unknown}} [options]
   */
  invoke(protocol, method, params = [], { hold = false, localMeta } = {}) {
    if (this.closed && this.status === 'failed') throw new StatewireStopped(this.error ?? 'the client stopped', this.fin);
    if (!this.allowed(protocol)) throw new Error(`${protocol} is not selected on this client`);
    if (!Array.isArray(params)) throw new TypeError('params is an array');
    const eph = this.ephemeral.get(protocol);
    const queue = eph ? eph.outbox : (this.lane(protocol).outbox ??= []);
    const pending = (eph ? eph.commands.length : this.lane(protocol).commands.length) + queue.length;
    if (pending >= MAX_OUTBOX_COMMANDS) throw new Error(`the ${protocol} lane holds ${MAX_OUTBOX_COMMANDS} unanswered commands`);
    const offer = this.applicationProtocols === '*' ? undefined : this.applicationProtocols.find((o) => o.name === protocol || protocol.startsWith(`${o.name}/`));
    /** @type {OutboxCommand} */
    const entry = {
      id: `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`, method, params,
      contract: { wire: { ...this.wireVersion }, protocol: offer ? { version: offer.version, minVersion: offer.minVersion ?? offer.version } : null },
      ...(localMeta === undefined ? {} : { localMeta }), ...(hold ? { hold: true } : {}),
    };
    queue.push(entry);
    const handle = new PendingCommand(this, protocol, entry);
    this.handles.set(entry.id, handle);
    this.persist();
    if (!hold) this.scheduleFlush();
    return handle;
  }

  /** @param {string} protocol @param {string} id */
  dropQueued(protocol, id) {
    const eph = this.ephemeral.get(protocol);
    const queue = eph ? eph.outbox : this.record?.lanes[protocol]?.outbox;
    if (queue) {
      const index = queue.findIndex((c) => c.id === id);
      if (index >= 0) queue.splice(index, 1);
    }
    this.handles.delete(id);
    this.persist();
  }

  scheduleFlush() {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  /** Gives every queued, unheld command its seq and sends them, in one frame. */
  flush() {
    if (this.status !== 'connected' || !this.selection) return;
    /** @type {any[]} */
    const cmd = [];
    for (const selected of this.selection.protocols) {
      const eph = this.ephemeral.get(selected.name);
      const lane = eph ?? this.record?.lanes[selected.name];
      const queue = eph ? eph.outbox : lane && 'inbox' in lane ? lane.outbox : undefined;
      if (!lane || !queue) continue;
      const held = [];
      for (const entry of queue) {
        if (entry.hold) { held.push(entry); continue; }
        const seq = lane.nextSeq;
        lane.nextSeq += 1;
        /** @type {StoredCommand} */
        const stored = { seq, method: entry.method, params: entry.params, contract: entry.contract, ...(entry.localMeta === undefined ? {} : { localMeta: entry.localMeta }) };
        lane.commands.push(stored);
        const handle = this.handles.get(entry.id);
        if (handle) {
          this.handles.delete(entry.id);
          handle.seq = seq;
          this.handles.set(`${selected.name} ${seq}`, handle);
        }
        cmd.push({ seq, protocol: selected.name, method: entry.method, params: entry.params });
      }
      queue.length = 0;
      queue.push(...held);
    }
    if (cmd.length === 0) return;
    this.persist();
    this.send({ cmd });
  }

  /**
   * This attach's context for `protocol` (sent now, and again on every attach).
   * @param {string} protocol @param {unknown} value @param {unknown} [meta]
   */
  setContext(protocol, value, meta) {
    if (this.selection && !this.allowed(protocol)) throw new Error(`${protocol} is not selected on this client`);
    this.context.set(protocol, { value, ...(meta === undefined ? {} : { meta }) });
    if (this.status === 'connected') this.send({ ctx: [{ protocol, value, ...(meta === undefined ? {} : { meta }) }] });
  }

  /**
   * A client-owned document on an ephemeral protocol: `set` replaces it,
   * `patch` changes it; its value is sent again on every attach.
   * @param {string} protocol
   */
  syncedDocument(protocol) {
    const client = this;
    return {
      protocol,
      /** The document as the host last mounted it (or as last set here). */
      get value() { return client.readDocument(protocol) ?? client.synced.get(protocol); },
      /** @param {unknown} value */
      set(value) {
        client.synced.set(protocol, value);
        return client.status === 'connected' ? client.invoke(protocol, 'set', [value]).result : Promise.resolve(null);
      },
      /** @param {Array<{op: string, path: Array<string | number>, value?: unknown}>} ops */
      patch(ops) {
        if (!client.synced.has(protocol)) return Promise.reject(new Error('set the document before patching it'));
        client.synced.set(protocol, applyPatch(client.synced.get(protocol), ops));
        return client.status === 'connected' ? client.invoke(protocol, 'patch', [ops]).result : Promise.resolve(null);
      },
    };
  }

  /** Starts a new client identity: forgets the stored session (its commands are not cancelled). */
  resetSession() {
    this.record = newSession();
    this.persist();
  }
}
