// studio.js — `@ledgerwire/client/studio`: a Studio conversation without
// DOM. A turn, the answers to its pauses, Stop, the canvas, and getting
// back into a turn after a drop, a reload or a server restart.
// Owns: one conversation's streams and the state they add up to (status,
// the open pause, the canvas, the last error with its retry mode), frames
// in seq order with duplicates dropped, reconnecting through
// `/api/studio/stream`, re-posting the identical answer once a dead
// segment's lease lapsed, and waiting out a 409 by its
// `retry_after_seconds`.
// Must never: deliver a frame twice or out of order, treat a dropped
// connection as a Stop (or a Stop as a drop), retry a stopped turn, loop
// without a bound, or touch DOM or storage.

import { StudioError, StudioHttp, isAbort, refusal, unreachable } from './http.js';
import { StreamDropped, readEvents, SILENCE_LIMIT_MS, abortError } from './sse.js';
import { transcript } from './timeline.js';

export { StudioError, StudioHttp, unreachable, refusal } from './http.js';
export { transcript } from './timeline.js';
export { StreamDropped, SILENCE_LIMIT_MS } from './sse.js';

/**
 * @typedef {import('./studio-wire.js').Frame} Frame
 * @typedef {import('./studio-wire.js').StudioRequest} StudioRequest
 * @typedef {import('./studio-wire.js').CompositionManifest} CompositionManifest
 * @typedef {import('./studio-wire.js').CompositionOp} CompositionOp
 * @typedef {import('./studio-wire.js').Answer} QuestionAnswer
 * @typedef {import('./http.js').StudioFailure} StudioFailure
 * @typedef {import('./http.js').TokenSource} TokenSource
 * @typedef {Extract<StudioRequest, {kind: 'turn.request'}>} TurnRequest
 * @typedef {Extract<StudioRequest, {kind: 'interrupt.response'}>} InterruptResponse
 * @typedef {Extract<Frame, {event: 'plan.proposed'}> | Extract<Frame, {event: 'elicitation.request'}>} PauseFrame
 * @typedef {'idle' | 'streaming' | 'paused' | 'reconnecting' | 'failed'} Status
 * @typedef {'done' | 'paused' | 'stopped' | 'failed' | 'refused' | 'gone'} Outcome
 *   how a call ended: the turn finished, paused on a question, was stopped
 *   by the user, ended on an error frame, was refused before streaming, or
 *   could not be followed (the server did not come back)
 * @typedef {{mode: StudioFailure['retry'], fix?: string, waitMs?: number}} RetryAdvice
 * @typedef {{
 *   conversationId: string,
 *   status: Status,
 *   pause: PauseFrame | null,
 *   canvas: CompositionManifest | null,
 *   error: StudioFailure | null,
 *   retry: RetryAdvice | null,
 *   stopped: boolean,
 *   lastSeq: number,
 *   note: string | null,
 *   busy: boolean,
 * }} ConversationState
 * @typedef {{type: 'frame', frame: Frame, receivedAt?: number, replay: boolean}
 *   | {type: 'turn', request: any, replay: boolean}
 *   | {type: 'segment', replay: boolean}
 *   | {type: 'answered', response: any, replay: boolean}
 *   | {type: 'note', text: string}
 *   | {type: 'notice', kind: 'refused' | 'unreachable' | 'lost' | 'gave-up' | 'restore', error: StudioFailure, request?: any}
 *   | {type: 'restored', complete: boolean}} ConversationEvent
 */

/** Reconnects to one turn's stream before giving up. */
export const MAX_RECONNECTS = 30;
/** Longest wait between two reconnects, in ms. */
export const MAX_BACKOFF_MS = 3000;
/** Times one turn's dead segment is resumed by re-posting its answer. */
export const MAX_RECOVERIES = 6;
/** Times one request waits out a live segment's lease (a 409 with `retry_after_seconds`). */
export const MAX_LEASE_WAITS = 20;
/** Longest single wait on a lease, in ms (a larger `retry_after_seconds` waits this long, then asks again). */
export const MAX_LEASE_WAIT_MS = 60_000;

const ENDING = new Set(['plan.proposed', 'elicitation.request', 'error', 'done']);

/** @param {number} attempt */
const backoff = (attempt) => Math.min(MAX_BACKOFF_MS, 250 * 2 ** attempt);

/**
 * Resolves after `ms`, or rejects with an AbortError when `signal` aborts.
 * @param {number} ms
 * @param {AbortSignal} [signal]
 */
export function delay(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) { reject(abortError()); return; }
    const onAbort = () => { clearTimeout(timer); reject(abortError()); };
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(undefined); }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * What an error's retry mode asks of the client, as data.
 * @param {StudioFailure} error
 * @returns {RetryAdvice}
 */
export function retryAdvice(error) {
  if (error.retry === 'correct_and_retry') return { mode: error.retry, fix: error.fix ?? undefined };
  if (error.retry === 'retry_after_delay') return { mode: error.retry, waitMs: Math.max(0, Number(error.retry_after_seconds ?? 0)) * 1000 };
  return { mode: error.retry };
}

/**
 * A reconnect's closing error that says its segment stopped without a
 * closing frame: post the same answer again after the delay, or ask again.
 * @param {Frame} frame
 */
function stoppedSegment(frame) {
  return frame.event === 'error' && frame.error.code === 'transient_unavailable'
    && (frame.error.retry === 'retry_after_delay' || frame.error.retry === 'refresh_then_retry');
}

/** @param {Array<AbortSignal | undefined>} signals */
function anySignal(...signals) {
  return AbortSignal.any(/** @type {AbortSignal[]} */ (signals.filter(Boolean)));
}

/** The entry point: one server, one token; conversations and the read routes. */
export class StudioClient {
  /**
   * @param {{baseUrl?: string, token: TokenSource, fetch?: typeof fetch, silenceMs?: number, waitOutBusy?: boolean}} options
   *   `silenceMs`: how long a stream may go without a byte (heartbeats
   *   come every 5 s) before it counts as dropped; `waitOutBusy`: wait out
   *   a 409 on a live segment by its `retry_after_seconds` (default true).
   */
  constructor({ baseUrl, token, fetch, silenceMs = SILENCE_LIMIT_MS, waitOutBusy = true }) {
    this.http = new StudioHttp({ baseUrl, token, fetch });
    this.silenceMs = silenceMs;
    this.waitOutBusy = waitOutBusy;
  }

  /**
   * A client for conversation `conversationId` (mint one id per
   * conversation and keep it). Each call returns a new object: dispose
   * the one you leave.
   * @param {string} conversationId
   */
  conversation(conversationId) {
    return new Conversation(this, conversationId);
  }

  /** @param {string} conversationId @param {{signal?: AbortSignal}} [options] */
  cancel(conversationId, options) { return this.http.cancel(conversationId, options); }

  /** @param {Parameters<StudioHttp['mutate']>[0]} body @param {{signal?: AbortSignal}} [options] */
  mutate(body, options) { return this.http.mutate(body, options); }

  /** @param {string} conversationId @param {{signal?: AbortSignal}} [options] */
  composition(conversationId, options) { return this.http.composition(conversationId, options); }

  /** @param {string} conversationId @param {{raw?: boolean, signal?: AbortSignal}} [options] */
  timeline(conversationId, options) { return this.http.timeline(conversationId, options); }

  /** @param {string} conversationId @param {{signal?: AbortSignal}} [options] */
  check(conversationId, options) { return this.http.check(conversationId, options); }
}

export class Conversation {
  /**
   * @param {StudioClient} client
   * @param {string} conversationId
   */
  constructor(client, conversationId) {
    this.client = client;
    this.http = client.http;
    this.conversationId = conversationId;
    /** @type {ConversationState} */
    this.state = { conversationId, status: 'idle', pause: null, canvas: null, error: null, retry: null, stopped: false, lastSeq: 0, note: null, busy: false };
    /** @type {Set<() => void>} */
    this.subscribers = new Set();
    /** @type {Set<(event: ConversationEvent) => void>} */
    this.listeners = new Set();
    this.disposed = new AbortController();
    this.busy = false;
    /** The turn.request of the latest turn. @type {any} */
    this.request = null;
    /** The interrupt.response that started the latest segment, if one did. @type {any} */
    this.answer = null;
    this.stopRequested = false;
    /** The latest pause delivered, restored when its answer is refused. @type {PauseFrame | null} */
    this.lastPause = null;
    this.subscribe = this.subscribe.bind(this);
    this.getSnapshot = this.getSnapshot.bind(this);
  }

  /** State listeners (`useSyncExternalStore`'s subscribe). @param {() => void} listener */
  subscribe(listener) {
    this.subscribers.add(listener);
    return () => { this.subscribers.delete(listener); };
  }

  /** The current state; a new object after every change. */
  getSnapshot() { return this.state; }

  /** Every event (frames, notes, notices). @param {(event: ConversationEvent) => void} listener */
  on(listener) {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  /**
   * The live frames as an async iterator, in seq order, each once, until
   * `signal` aborts or the conversation is disposed.
   * @param {{signal?: AbortSignal}} [options]
   * @returns {AsyncGenerator<Frame>}
   */
  async *frames({ signal } = {}) {
    /** @type {Frame[]} */
    const queue = [];
    /** @type {(() => void) | null} */
    let wake = null;
    const off = this.on((event) => { if (event.type === 'frame' && !event.replay) { queue.push(event.frame); wake?.(); } });
    const stop = () => wake?.();
    const until = anySignal(signal, this.disposed.signal);
    until.addEventListener('abort', stop);
    try {
      for (;;) {
        while (queue.length > 0) yield /** @type {Frame} */ (queue.shift());
        if (until.aborted) return;
        await new Promise((resolve) => { wake = () => resolve(undefined); });
        wake = null;
      }
    } finally {
      off();
      until.removeEventListener('abort', stop);
    }
  }

  /** @param {Partial<ConversationState>} patch */
  set(patch) {
    if (this.disposed.signal.aborted) return;
    this.state = { ...this.state, ...patch };
    if (patch.error !== undefined) this.state.retry = patch.error ? retryAdvice(patch.error) : null;
    for (const listener of [...this.subscribers]) listener();
  }

  /** @param {ConversationEvent} event */
  emit(event) {
    if (this.disposed.signal.aborted) return;
    for (const listener of [...this.listeners]) listener(event);
  }

  /** @param {string} text */
  note(text) {
    this.set({ note: text || null });
    this.emit({ type: 'note', text });
  }

  /** Stops every stream and timer of this conversation; later events are dropped. */
  dispose() {
    this.disposed.abort();
    this.subscribers.clear();
    this.listeners.clear();
  }

  /**
   * Runs `work` as the one call in flight: busy while it runs; a
   * disposal or `signal` ends it as an AbortError.
   * @param {(signal: AbortSignal) => Promise<Outcome>} work
   * @param {AbortSignal} [signal]
   * @returns {Promise<Outcome>}
   */
  async exclusive(work, signal) {
    if (this.busy) throw new Error('a call is already in flight on this conversation: wait for it, or stop() it');
    this.busy = true;
    this.set({ busy: true });
    try {
      return await work(anySignal(signal, this.disposed.signal));
    } catch (error) {
      // An aborted call streams nothing any more: the status says what is true.
      if (isAbort(error) && (this.state.status === 'streaming' || this.state.status === 'reconnecting')) {
        this.set({ status: this.state.pause ? 'paused' : 'idle', note: null });
      }
      throw error;
    } finally {
      this.busy = false;
      this.set({ busy: false });
    }
  }

  /**
   * Asks a new turn: `message`, or a turn.request body's members.
   * @param {string | Omit<TurnRequest, 'kind' | 'conversation_id'>} message
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<Outcome>}
   */
  ask(message, { signal } = {}) {
    const members = typeof message === 'string' ? { message } : message;
    const body = { ...members, kind: 'turn.request', conversation_id: this.conversationId };
    return this.exclusive(async (all) => {
      this.request = body;
      this.answer = null;
      this.stopRequested = false;
      this.set({ lastSeq: 0, pause: null, error: null, stopped: false, status: 'streaming', note: null });
      this.emit({ type: 'turn', request: body, replay: false });
      return this.open('/api/studio/turn', body, all);
    }, signal);
  }

  /**
   * Answers the open pause with an interrupt.response body.
   * @param {Omit<InterruptResponse, 'kind' | 'conversation_id'>} response
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<Outcome>}
   */
  respond(response, { signal } = {}) {
    const body = { ...response, kind: 'interrupt.response', conversation_id: this.conversationId };
    return this.exclusive(async (all) => {
      this.answer = body;
      this.stopRequested = false;
      this.set({ pause: null, error: null, stopped: false, status: 'streaming', note: null });
      return this.open('/api/studio/interrupt', body, all);
    }, signal);
  }

  /** The open pause's interrupt id (throws when nothing is paused). */
  pauseId() {
    const pause = this.state.pause;
    if (!pause) throw new Error('no pause is open on this conversation');
    return pause.interrupt_id;
  }

  /** @param {{signal?: AbortSignal}} [options] */
  approve(options) { return this.respond({ interrupt_id: this.pauseId(), decision: 'approve' }, options); }

  /** @param {string} text the amendment @param {{signal?: AbortSignal}} [options] */
  amend(text, options) { return this.respond({ interrupt_id: this.pauseId(), decision: 'amend', payload: text }, options); }

  /**
   * Picks another option of one of the plan's choices (ledgerwire's switch).
   * @param {string} choiceId @param {string} optionId @param {{signal?: AbortSignal}} [options]
   */
  switchChoice(choiceId, optionId, options) {
    return this.respond({ interrupt_id: this.pauseId(), decision: 'amend', switch: { choice_id: choiceId, option_id: optionId } }, options);
  }

  /** @param {{signal?: AbortSignal}} [options] */
  reject(options) { return this.respond({ interrupt_id: this.pauseId(), decision: 'reject' }, options); }

  /**
   * Answers a clarifying pause, one answer per question id.
   * @param {Record<string, QuestionAnswer>} answers @param {{signal?: AbortSignal}} [options]
   */
  answerQuestions(answers, options) { return this.respond({ interrupt_id: this.pauseId(), decision: 'answer', answers }, options); }

  /** Dismisses a skippable clarifying pause. @param {{signal?: AbortSignal}} [options] */
  skip(options) { return this.respond({ interrupt_id: this.pauseId(), decision: 'skip' }, options); }

  /**
   * Follows the latest turn again (after `gone`, or when a tab comes back
   * from the background): reconnects through `/api/studio/stream` and, if
   * its segment died, re-posts the answer that started it.
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<Outcome>}
   */
  resume({ signal } = {}) {
    return this.exclusive((all) => this.recover(all), signal);
  }

  /**
   * Stop: asks the server to end the live segment (or a running switch).
   * The call in flight then ends as `stopped` (or `paused`, for a switch).
   * @param {{signal?: AbortSignal}} [options]
   */
  async stop({ signal } = {}) {
    this.stopRequested = true;
    try {
      await this.http.cancel(this.conversationId, { signal: anySignal(signal, this.disposed.signal) });
    } catch (error) {
      this.stopRequested = false;
      throw error;
    }
  }

  /**
   * Applies canvas operations with the revision last drawn. On
   * `edit_conflict` the canvas is read again before the error is thrown.
   * @param {CompositionOp[]} ops @param {{signal?: AbortSignal}} [options]
   */
  async mutate(ops, { signal } = {}) {
    const canvas = this.state.canvas;
    /** @type {any} */
    const body = { conversation_id: this.conversationId, expected_revision: canvas?.revision ?? 0, ops };
    if (canvas?.composition_id) body.composition_id = canvas.composition_id;
    const all = anySignal(signal, this.disposed.signal);
    try {
      const manifest = await this.http.mutate(body, { signal: all });
      this.setCanvas(manifest, true);
      return manifest;
    } catch (error) {
      if (error instanceof StudioError && error.code === 'edit_conflict') await this.refreshCanvas({ signal: all }).catch(() => {});
      throw error;
    }
  }

  /** Reads the canvas as it stands. @param {{signal?: AbortSignal}} [options] */
  async refreshCanvas({ signal } = {}) {
    const manifest = await this.http.composition(this.conversationId, { signal: anySignal(signal, this.disposed.signal) });
    this.setCanvas(manifest, true);
    return manifest;
  }

  /**
   * @param {CompositionManifest | null | undefined} manifest
   * @param {boolean} [force] take it even when older (the server's latest answer)
   */
  setCanvas(manifest, force = false) {
    if (manifest === undefined) return;
    const current = this.state.canvas;
    if (!force && manifest && current && current.composition_id === manifest.composition_id && manifest.revision < current.revision) return;
    this.set({ canvas: manifest });
  }

  /**
   * Reads the conversation back from the log (a reload, or another
   * client on the same conversation): every turn, segment, frame and
   * answer as replayed events, the canvas as it stands, and, when the
   * latest turn is still streaming, follows it (and resumes it if its
   * segment died). `new` when the server holds no such conversation.
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<'new' | 'restored' | 'failed'>}
   */
  async restore({ signal } = {}) {
    /** @type {'new' | 'restored' | 'failed'} */
    let result = 'restored';
    await this.exclusive(async (all) => {
      let read;
      try {
        read = await this.http.timeline(this.conversationId, { signal: all });
      } catch (error) {
        if (!(error instanceof StudioError)) throw error;
        if (error.code === 'not_found') { result = 'new'; return 'done'; }
        this.emit({ type: 'notice', kind: 'restore', error: error.failure });
        result = 'failed';
        return 'failed';
      }
      const { events, latest } = transcript(read.records);
      for (const item of events) {
        if (item.type === 'turn') this.emit({ type: 'turn', request: item.request, replay: true });
        else if (item.type === 'segment') this.emit({ type: 'segment', replay: true });
        else if (item.type === 'answer') this.emit({ type: 'answered', response: item.response, replay: true });
        else this.apply(item.frame, undefined, true);
      }
      try {
        this.setCanvas(await this.http.composition(this.conversationId, { signal: all }), true);
      } catch (error) {
        if (isAbort(error)) throw error;
      }
      this.emit({ type: 'restored', complete: read.complete });
      if (!latest) return 'done';
      this.request = latest.request;
      this.answer = latest.answer;
      this.set({ lastSeq: latest.lastSeq, pause: latest.pause });
      if (latest.state !== 'streaming') return 'done';
      return this.recover(all);
    }, signal);
    return result;
  }

  /**
   * Posts a question or an answer and reads the stream it opens.
   * @param {string} path @param {any} body @param {AbortSignal} signal
   * @returns {Promise<Outcome>}
   */
  async open(path, body, signal) {
    for (let wait = 0; ; wait += 1) {
      let response;
      try {
        response = await this.http.post(path, body, { signal });
      } catch (error) {
        if (!(error instanceof StudioError)) throw error;
        // No answer at all. An answer is recorded before its stream
        // starts, so following the turn and re-posting it is safe; a
        // question is offered again.
        if (body.kind === 'interrupt.response') return this.recover(signal);
        return this.fail(error.failure, 'unreachable', body);
      }
      if (!response.ok) {
        const failure = await refusal(response);
        if (this.client.waitOutBusy && response.status === 409 && failure.code === 'transient_unavailable' && wait < MAX_LEASE_WAITS) {
          await this.waitLease(failure, signal);
          continue;
        }
        if (body.kind === 'interrupt.response') this.set({ pause: this.lastPause ?? null, status: this.lastPause ? 'paused' : 'failed' });
        return this.fail(failure, 'refused', body);
      }
      this.emit({ type: 'segment', replay: false });
      const outcome = await this.consume(response, signal, false);
      if (outcome === 'ended') return this.outcome();
      return this.recover(signal);
    }
  }

  /**
   * A refusal or an unreachable server, kept as the state's error and
   * told as a notice.
   * @param {StudioFailure} failure
   * @param {'refused' | 'unreachable' | 'lost' | 'gave-up'} kind
   * @param {any} [request]
   * @returns {Outcome}
   */
  fail(failure, kind, request) {
    const paused = this.state.pause !== null;
    this.set({ error: failure, status: paused ? 'paused' : 'failed', note: null });
    this.emit({ type: 'notice', kind, error: failure, request });
    return kind === 'refused' ? 'refused' : kind === 'gave-up' ? 'gone' : 'failed';
  }

  /** @param {StudioFailure} failure @param {AbortSignal} signal */
  async waitLease(failure, signal) {
    const seconds = Math.max(1, Math.ceil(Number(failure.retry_after_seconds ?? 1)));
    this.note(`The conversation is busy; trying again in ${seconds} s.`);
    await delay(Math.min(MAX_LEASE_WAIT_MS, seconds * 1000), signal);
  }

  /** How the latest call ended, from the state. @returns {Outcome} */
  outcome() {
    const { status, stopped } = this.state;
    if (status === 'paused') return 'paused';
    if (status === 'failed') return 'failed';
    return stopped ? 'stopped' : 'done';
  }

  /**
   * One frame into the state, then to the listeners. Frames at or below
   * the last seq are dropped before this.
   * @param {Frame} frame @param {number | undefined} receivedAt @param {boolean} replay
   */
  apply(frame, receivedAt, replay) {
    /** @type {Partial<ConversationState>} */
    const patch = {};
    if (typeof frame.seq === 'number' && frame.seq > this.state.lastSeq) patch.lastSeq = frame.seq;
    switch (frame.event) {
      case 'plan.proposed':
      case 'elicitation.request':
        this.lastPause = frame;
        Object.assign(patch, { status: 'paused', pause: frame, note: null });
        break;
      case 'error':
        if (frame.error.code === 'cancelled') Object.assign(patch, { status: 'idle', stopped: true, error: null, pause: null, note: null });
        else Object.assign(patch, { status: 'failed', error: { ...frame.error, status: 200 }, pause: null, note: null });
        break;
      case 'done':
        Object.assign(patch, { status: 'idle', pause: null, error: null, note: null });
        break;
      default:
        if (this.state.status !== 'streaming') Object.assign(patch, { status: 'streaming', note: null });
    }
    this.set(patch);
    if (frame.event === 'composition.updated') this.setCanvas(frame.composition);
    if (frame.event === 'done' && frame.composition) this.setCanvas(frame.composition);
    this.emit({ type: 'frame', frame, receivedAt, replay });
  }

  /**
   * Reads frames until a closing frame (`ended`), the body's end without
   * one (`closed`) or a drop (`dropped`). On a reconnect, a closing frame
   * already delivered ends it as `ended`, and an error saying the segment
   * stopped ends it as `dead`, for `recover` to act on.
   * @param {Response} response @param {AbortSignal} signal @param {boolean} reconnect
   * @returns {Promise<'ended' | 'closed' | 'dropped' | 'dead'>}
   */
  async consume(response, signal, reconnect) {
    try {
      for await (const event of readEvents(response, { signal, silenceMs: this.client.silenceMs })) {
        if (!('data' in event)) continue;
        /** @type {Frame} */
        let frame;
        try {
          frame = JSON.parse(event.data);
        } catch {
          continue;
        }
        const seq = Number(frame.seq ?? event.id);
        if (Number.isFinite(seq) && seq <= this.state.lastSeq) {
          // A reconnect always ends on the turn's closing frame, even one
          // already delivered: the turn stands as it was shown.
          if (reconnect && ENDING.has(frame.event)) {
            if (this.state.status === 'reconnecting') this.settleFrom(frame);
            return 'ended';
          }
          continue;
        }
        if (reconnect && stoppedSegment(frame)) {
          this.set({ lastSeq: Number.isFinite(seq) ? seq : this.state.lastSeq });
          return 'dead';
        }
        this.apply(frame, event.receivedAt, false);
        if (ENDING.has(frame.event)) return 'ended';
      }
      return 'closed';
    } catch (error) {
      if (error instanceof StreamDropped) return 'dropped';
      if (isAbort(error)) throw error;
      return 'dropped';
    }
  }

  /** A closing frame seen again on a reconnect: the state it stands for. @param {Frame} frame */
  settleFrom(frame) {
    if (frame.event === 'done') this.set({ status: 'idle', note: null });
    else if (frame.event === 'error') this.set(frame.error.code === 'cancelled' ? { status: 'idle', stopped: true, note: null } : { status: 'failed', error: { ...frame.error, status: 200 }, note: null });
    else this.set({ status: 'paused', pause: /** @type {PauseFrame} */ (frame), note: null });
  }

  /**
   * The stream stopped short: follow the turn, and resume it by
   * re-posting its answer when its segment died.
   * @param {AbortSignal} signal
   * @returns {Promise<Outcome>}
   */
  async recover(signal) {
    for (let round = 0; round < MAX_RECOVERIES; round += 1) {
      const followed = await this.follow(signal);
      if (followed === 'ended') return this.outcome();
      if (followed === 'gone') return 'gone';
      if (this.stopRequested) {
        this.set({ status: 'idle', stopped: true, note: null });
        return 'stopped';
      }
      if (!this.answer) {
        // The turn's first segment died: nothing can resume it.
        return this.fail({
          code: 'transient_unavailable', retry: 'refresh_then_retry', status: 0,
          detail: 'This answer stopped before it finished (its connection was lost while the question was being read), and nothing can resume it. Ask the question again to start over.',
        }, 'lost', this.request);
      }
      if ((await this.retryAnswer(signal)) === 'done') return this.outcome();
    }
    return this.fail({ code: 'transient_unavailable', retry: 'refresh_then_retry', status: 0, detail: `The answer could not be resumed after ${MAX_RECOVERIES} tries.` }, 'gave-up');
  }

  /**
   * Reconnects through `/api/studio/stream` after the last seq: `ended`
   * (a closing frame came), `dead` (no segment streams the turn any
   * more) or `gone` (given up).
   * @param {AbortSignal} signal
   * @returns {Promise<'ended' | 'dead' | 'gone'>}
   */
  async follow(signal) {
    for (let attempt = 0; attempt < MAX_RECONNECTS; attempt += 1) {
      this.set({ status: 'reconnecting' });
      this.note(attempt === 0 ? 'Reconnecting…' : `Reconnecting (attempt ${attempt + 1})…`);
      const lastSeq = this.state.lastSeq;
      let response;
      try {
        response = await this.http.post('/api/studio/stream', { conversation_id: this.conversationId, after_seq: lastSeq },
          { signal, headers: { 'Last-Event-ID': String(lastSeq) } });
      } catch (error) {
        if (!(error instanceof StudioError)) throw error;
        await delay(backoff(attempt), signal);
        continue;
      }
      if (!response.ok) {
        const failure = await refusal(response);
        if (failure.code === 'transient_unavailable' && attempt + 1 < MAX_RECONNECTS) {
          await delay(Math.min(MAX_BACKOFF_MS, 1000 * Number(failure.retry_after_seconds ?? 1)), signal);
          continue;
        }
        this.fail(failure, 'gave-up');
        return 'gone';
      }
      const outcome = await this.consume(response, signal, true);
      if (outcome === 'ended') return 'ended';
      if (outcome === 'closed' || outcome === 'dead') return 'dead';
      await delay(backoff(attempt), signal);
    }
    this.fail(unreachable('The server has not come back, so the answer could not be followed.'), 'gave-up');
    return 'gone';
  }

  /**
   * Re-posts the answer that started the dead segment, waiting out its
   * lease: `done`, or `again` to follow once more.
   * @param {AbortSignal} signal
   * @returns {Promise<'done' | 'again'>}
   */
  async retryAnswer(signal) {
    for (let attempt = 0; attempt < MAX_LEASE_WAITS; attempt += 1) {
      this.note('Resuming the answer where it stopped…');
      let response;
      try {
        response = await this.http.post('/api/studio/interrupt', this.answer, { signal });
      } catch (error) {
        if (!(error instanceof StudioError)) throw error;
        await delay(backoff(attempt), signal);
        continue;
      }
      if (response.ok) {
        this.emit({ type: 'segment', replay: false });
        this.set({ status: 'streaming', note: null });
        const outcome = await this.consume(response, signal, false);
        return outcome === 'ended' ? 'done' : 'again';
      }
      const failure = await refusal(response);
      if (failure.code === 'transient_unavailable' && failure.retry === 'retry_after_delay') {
        const seconds = Math.max(1, Math.ceil(Number(failure.retry_after_seconds ?? 1)));
        this.note(`The stopped attempt still holds the conversation; resuming in ${seconds} s.`);
        await delay(Math.min(MAX_LEASE_WAIT_MS, seconds * 1000), signal);
        continue;
      }
      // The answer was carried out and the turn moved on: read what it made.
      if (failure.code === 'edit_conflict') return 'again';
      this.fail(failure, 'refused', this.answer);
      return 'done';
    }
    this.fail(unreachable('The conversation stayed busy, so the answer could not be resumed.'), 'gave-up');
    return 'done';
  }
}
