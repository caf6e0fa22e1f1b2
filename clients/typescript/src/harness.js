// harness.js — `@ledgerwire/client/harness`: a Studio conversation as a
// `harness-sdk` Statewire thread. Its main document and message
// documents, typed, and the four commands as methods.
// Owns: the harness-sdk offer, the thread's key prefix, and the interest
// document. Must never: build a Studio body differently from the routes
// (bodies go as given; the host fills in `kind` and `conversation_id`).

import { StatewireClient } from './statewire/client.js';
import { StatewireHttp, StatewireWebSocket } from './statewire/transports.js';

/**
 * @typedef {import('./studio-wire.js').Frame} Frame
 * @typedef {import('./studio-wire.js').StudioRequest} StudioRequest
 * @typedef {import('./studio-wire.js').CompositionManifest} CompositionManifest
 * @typedef {import('./studio-wire.js').CompositionOp} CompositionOp
 * @typedef {import('./statewire/session.js').SessionStorage} SessionStorage
 * @typedef {import('./statewire/session.js').DocumentsStorage} DocumentsStorage
 * @typedef {'idle' | 'streaming' | 'paused_plan' | 'paused_questions' | 'cancelled' | 'failed'} HarnessStatus
 * @typedef {{
 *   conversation_id: string,
 *   status: HarnessStatus,
 *   turn: number,
 *   pause: null | {kind: 'plan' | 'questions', interrupt_id: string, message_id: string, frame: Frame},
 *   canvas: CompositionManifest | null,
 *   turns: Array<{turn: number, status: string, messages: string[]}>,
 *   turns_omitted: number,
 * }} HarnessMain the conversation's main document
 * @typedef {{id: string, turn: number, role: 'user', kind: 'request', text: string, request: any}} RequestMessage
 * @typedef {{id: string, turn: number, role: 'user', kind: 'answer', interrupt_id: string, decision: string, response: any}} AnswerMessage
 * @typedef {{
 *   id: string, turn: number, role: 'assistant', kind: 'reply', segment: number,
 *   status: 'streaming' | 'paused' | 'done' | 'failed' | 'cancelled' | 'abandoned',
 *   text: string, complete: boolean, plan: Frame | null, plan_versions: Frame[], approved: Frame | null,
 *   questions: Frame | null, steps: Frame[], cards: Frame[], suggestions: string[],
 *   error: Frame | null, done: Frame | null, first_seq: number, last_seq: number,
 * }} ReplyMessage
 * @typedef {RequestMessage | AnswerMessage | ReplyMessage} HarnessMessage
 */

/** The application protocol and the version this client is written against. */
export const HARNESS_PROTOCOL = 'harness-sdk';
export const HARNESS_VERSION = '2026-12-01';
/** The ephemeral child whose synced document says which messages to mount. */
export const INTEREST_PROTOCOL = 'harness-sdk/interest';
/** Namespace of message keys: `[conversation_id, "main", message_id]`. */
export const MESSAGE_NAMESPACE = 'main';

export class HarnessClient {
  /**
   * @param {{
   *   baseUrl?: string, conversationId: string, token?: string | (() => string | Promise<string>),
   *   transport?: 'http' | 'websocket' | import('./statewire/transports.js').Transport,
   *   session?: SessionStorage, documents?: DocumentsStorage,
   *   fetch?: typeof fetch, WebSocket?: typeof WebSocket, retryForMs?: number, backoff?: {initialMs: number, maxMs: number},
   * }} options
   */
  constructor({ baseUrl = '', conversationId, token, transport = 'http', session, documents, fetch, WebSocket, retryForMs, backoff }) {
    this.conversationId = conversationId;
    const url = `${baseUrl.replace(/\/+$/, '')}/threads/${encodeURIComponent(conversationId)}`;
    const chosen = typeof transport === 'object' ? transport
      : transport === 'websocket' ? StatewireWebSocket({ url, token, WebSocket }) : StatewireHttp({ url, token, fetch });
    this.statewire = new StatewireClient({
      protocol: HARNESS_PROTOCOL,
      applicationProtocols: [{ name: HARNESS_PROTOCOL, version: HARNESS_VERSION, minVersion: HARNESS_VERSION }],
      transport: chosen,
      keyPrefixes: { [HARNESS_PROTOCOL]: [conversationId] },
      storage: { session, documents },
      retryForMs,
      backoff,
    });
    this.interest = this.statewire.syncedDocument(INTEREST_PROTOCOL);
    /** @type {{main: HarnessMain | undefined, messages: HarnessMessage[]} | null} */
    this.cached = null;
    this.subscribe = this.subscribe.bind(this);
    this.getSnapshot = this.getSnapshot.bind(this);
    this.statewire.documents.subscribe(() => { this.cached = null; });
  }

  connect() { return this.statewire.connect(); }

  close() { this.statewire.close(); }

  /** @returns {HarnessMain | undefined} */
  get main() { return this.statewire.documents.get(HARNESS_PROTOCOL); }

  /** A mounted message document by id. @param {string} id @returns {HarnessMessage | undefined} */
  message(id) { return this.statewire.documents.get(HARNESS_PROTOCOL, ['.', MESSAGE_NAMESPACE, id]); }

  /** Every mounted message, in the main document's turn order. @returns {HarnessMessage[]} */
  messages() {
    const ids = (this.main?.turns ?? []).flatMap((turn) => turn.messages);
    return /** @type {HarnessMessage[]} */ (ids.map((id) => this.message(id)).filter(Boolean));
  }

  /** Document changes (`useSyncExternalStore`). @param {() => void} listener */
  subscribe(listener) { return this.statewire.documents.subscribe(() => listener()); }

  /** The main document and the mounted messages; the same object until a document changes. */
  getSnapshot() {
    this.cached ??= { main: this.main, messages: this.messages() };
    return this.cached;
  }

  /**
   * @param {string} method @param {unknown} body @param {{hold?: boolean, localMeta?: unknown}} [options]
   */
  command(method, body, options) { return this.statewire.invoke(HARNESS_PROTOCOL, method, [body], options); }

  /**
   * Starts a turn (`POST /api/studio/turn` as a command); resolves with
   * `{turn, segment, first_seq, request, reply}`.
   * @param {Omit<Extract<StudioRequest, {kind: 'turn.request'}>, 'kind' | 'conversation_id'>} body
   * @param {{hold?: boolean, localMeta?: unknown}} [options]
   */
  turn(body, options) { return this.command('turn', body, options).result; }

  /** @param {string} message */
  ask(message) { return this.turn({ message }); }

  /**
   * Answers the open pause; resolves with `{turn, segment, first_seq, reply, interrupt_id, decision}`.
   * @param {Omit<Extract<StudioRequest, {kind: 'interrupt.response'}>, 'kind' | 'conversation_id'>} body
   * @param {{hold?: boolean, localMeta?: unknown}} [options]
   */
  answer(body, options) { return this.command('answer', body, options).result; }

  /** @param {string} interruptId */
  approve(interruptId) { return this.answer({ interrupt_id: interruptId, decision: 'approve' }); }

  /** Stops the live segment; resolves with `{cancelled, segment?}`. */
  cancel() { return this.command('cancel', {}).result; }

  /**
   * Changes the canvas; resolves with `{composition}`.
   * @param {{expected_revision: number, ops: CompositionOp[], composition_id?: string}} body
   */
  mutate(body) { return this.command('mutate', body).result; }

  /**
   * Which messages this attach mounts: the newest `latest` and the named ones.
   * @param {{latest?: number, messages?: string[]}} interest
   */
  setInterest(interest) { return this.interest.set(interest); }
}
