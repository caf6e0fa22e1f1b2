// session.js — one conversation's streams, as the contract runs them: the
// reference client for its subtle parts.
// Owns: posting a question (`/turn`) or an answer (`/interrupt`) and
// reading the stream it opens until a closing frame (a pause closes the
// stream; the answer opens a new one, and seq goes on across them);
// Stop (`/cancel`); reconnecting after a drop through `/stream` with the
// last seq seen (`Last-Event-ID`); after a segment died (a server restart,
// a closed tab), retrying the identical answer once its lease lapsed, as
// the contract says; and restoring the conversation from the log on a
// reload, then resuming a live turn.
// Must never: show a frame twice or out of order (frames at or below the
// last seq are dropped), retry a stopped turn, or loop without bound
// (every wait and retry is counted).

import { refusal, unreachable } from './api.js';
import { delay } from './dom.js';
import { events } from './sse.js';
import { readTimeline, transcript } from './restore.js';

/** Reconnects to one turn's stream before giving up. */
export const MAX_RECONNECTS = 30;
/** Longest wait between two reconnects, in ms. */
export const MAX_BACKOFF_MS = 3000;
/** Times one turn's dead segment is resumed by retrying its answer. */
export const MAX_RECOVERIES = 6;
/** Times a retried answer waits out a live lease (`retry_after_seconds`). */
export const MAX_LEASE_WAITS = 20;

const ENDING = new Set(['plan.proposed', 'elicitation.request', 'error', 'done']);

/**
 * Whether a reconnect's closing frame says its segment stopped without a
 * closing frame of its own: the error whose retry mode says post the same
 * answer again after the delay, or ask again.
 */
const stoppedSegment = (frame) =>
  frame.event === 'error' &&
  frame.error?.code === 'transient_unavailable' &&
  (frame.error.retry === 'retry_after_delay' || frame.error.retry === 'refresh_then_retry');

const backoff = (attempt) => Math.min(MAX_BACKOFF_MS, 250 * 2 ** attempt);

export class Session {
  /**
   * `chat`: the ChatView, `canvas`: the Canvas, `onBusy(busy)`: a stream
   * opened or closed, `announce(text)`: a line for the status region.
   */
  constructor({ api, conversationId, chat, canvas, onBusy, announce }) {
    this.api = api;
    this.conversationId = conversationId;
    this.chat = chat;
    this.canvas = canvas;
    this.onBusy = onBusy;
    this.announce = announce;
    this.abort = new AbortController();
    this.busy = false;
    this.lastSeq = 0;
    this.request = null;
    this.answer = null;
    this.stopped = false;
  }

  dispose() {
    this.abort.abort();
  }

  get signal() {
    return this.abort.signal;
  }

  setBusy(busy) {
    this.busy = busy;
    this.onBusy(busy);
  }

  /** Asks `message` as a new turn. */
  async ask(message, { componentRef, autoAdd = true } = {}) {
    if (this.busy) {
      this.announce('Wait for this answer to finish, or stop it.');
      return false;
    }
    const body = { kind: 'turn.request', conversation_id: this.conversationId, message, auto_add: autoAdd !== false };
    if (componentRef) body.component_ref = componentRef;
    this.chat.userTurn(message, body);
    this.request = body;
    this.answer = null;
    this.lastSeq = 0;
    this.stopped = false;
    await this.guard(() => this.open('/api/studio/turn', body));
    return true;
  }

  /** Answers the open pause with `body` (an interrupt.response). */
  async respond(body) {
    if (this.busy) {
      this.announce('Wait for this answer to finish, or stop it.');
      this.chat.pauseRefused(body.interrupt_id);
      return;
    }
    this.answer = body;
    this.stopped = false;
    await this.guard(() => this.open('/api/studio/interrupt', body));
  }

  /** The Stop button: asks the server to stop the conversation's live segment. */
  async cancel() {
    this.stopped = true;
    this.chat.status('Stopping…');
    try {
      const response = await this.api.post('/api/studio/cancel', { kind: 'turn.cancel', conversation_id: this.conversationId });
      if (!response.ok) this.chat.notice(await refusal(response));
    } catch {
      this.stopped = false;
      this.announce('The stop request did not reach the server; press Stop again.');
    }
  }

  /** Runs `work` with the busy flag set; an abort (page leaving) ends it quietly. */
  async guard(work) {
    this.setBusy(true);
    try {
      await work();
    } catch (error) {
      if (error?.name !== 'AbortError') this.chat.notice(unreachable(`The answer could not be read: ${error?.message ?? error}.`));
    } finally {
      this.setBusy(false);
    }
  }

  async open(path, body) {
    let response;
    try {
      response = await this.api.post(path, body, { signal: this.signal });
    } catch (error) {
      if (error?.name === 'AbortError') throw error;
      // No answer at all. An answer is recorded before its stream starts,
      // so retrying it is safe; a question is offered again.
      if (body.kind === 'interrupt.response') {
        await this.recover();
      } else {
        this.chat.notice(unreachable(), { onRetry: () => this.guard(() => this.open(path, body)) });
      }
      return;
    }
    if (!response.ok) {
      await this.refused(await refusal(response), path, body);
      return;
    }
    this.chat.segmentStarted();
    this.chat.status('');
    const outcome = await this.consume(response);
    if (outcome !== 'ended') await this.recover();
  }

  async refused(error, path, body) {
    if (body.kind === 'interrupt.response') this.chat.pauseRefused(body.interrupt_id);
    if (error.code === 'unauthorized') this.announce('The server refused the token: enter the right one above.');
    this.chat.notice(error, { onRetry: () => this.guard(() => this.open(path, body)) });
  }

  /**
   * Reads frames from `response` until a closing frame (`ended`), the end
   * of the stream without one (`closed`), or a drop (`dropped`). On a
   * reconnect (`reconnect`), a closing frame already shown ends it as
   * `ended`, and an error saying the segment stopped and what to do
   * (post the answer again after the delay, or ask again) ends it as
   * `dead`, for `recover` to act on rather than to show.
   */
  async consume(response, { reconnect = false } = {}) {
    try {
      for await (const event of events(response, this.signal)) {
        if (!('data' in event)) continue;
        let frame;
        try {
          frame = JSON.parse(event.data);
        } catch {
          continue;
        }
        const seq = Number(frame.seq ?? event.id);
        if (Number.isFinite(seq)) {
          if (seq <= this.lastSeq) {
            // A reconnect always ends on the turn's closing frame, even
            // one this page holds: the turn stands as shown.
            if (reconnect && ENDING.has(frame.event)) {
              this.chat.status('');
              return 'ended';
            }
            continue;
          }
          this.lastSeq = seq;
        }
        if (reconnect && stoppedSegment(frame)) {
          this.chat.status('');
          return 'dead';
        }
        this.chat.frame(frame, { receivedAt: event.receivedAt });
        if (ENDING.has(frame.event)) {
          this.chat.status('');
          return 'ended';
        }
      }
      return 'closed';
    } catch (error) {
      if (error?.name === 'AbortError') throw error;
      return 'dropped';
    }
  }

  /** The stream stopped short: follow the turn, and resume it if its segment died. */
  async recover() {
    for (let round = 0; round < MAX_RECOVERIES; round += 1) {
      const followed = await this.follow();
      if (followed !== 'dead') return;
      if (this.stopped) {
        this.chat.status('Stopped.', 'stopped');
        return;
      }
      if (!this.answer) {
        const message = this.request?.message;
        this.chat.notice({
          code: 'transient_unavailable', retry: 'do_not_retry',
          detail: 'This answer stopped before it finished (its connection was lost while the question was being read), and nothing can resume it.',
        });
        this.chat.status('', 'failed');
        if (message) {
          this.chat.notice({ code: 'transient_unavailable', retry: 'retry_after_delay', retry_after_seconds: 0, detail: 'Ask the question again to start over.' },
            { onRetry: () => this.ask(message, { componentRef: this.request.component_ref, autoAdd: this.request.auto_add }) });
        }
        return;
      }
      if ((await this.retryAnswer()) === 'done') return;
    }
    this.chat.notice({ code: 'transient_unavailable', retry: 'refresh_then_retry', detail: `The answer could not be resumed after ${MAX_RECOVERIES} tries.` });
  }

  /**
   * Reconnects through `/stream` after the last seq: `ended` (a closing
   * frame came), `dead` (the stream ended with no segment left to
   * stream the turn) or `gone` (given up, with a notice shown).
   */
  async follow() {
    for (let attempt = 0; attempt < MAX_RECONNECTS; attempt += 1) {
      this.chat.status(attempt === 0 ? 'Reconnecting…' : `Reconnecting (attempt ${attempt + 1})…`);
      let response;
      try {
        response = await this.api.post('/api/studio/stream', { conversation_id: this.conversationId, after_seq: this.lastSeq },
          { signal: this.signal, headers: { 'Last-Event-ID': String(this.lastSeq) } });
      } catch (error) {
        if (error?.name === 'AbortError') throw error;
        await delay(backoff(attempt), this.signal);
        continue;
      }
      if (!response.ok) {
        const error = await refusal(response);
        if (error.code === 'transient_unavailable' && attempt + 1 < MAX_RECONNECTS) {
          await delay(Math.min(MAX_BACKOFF_MS, 1000 * (error.retry_after_seconds ?? 1)), this.signal);
          continue;
        }
        this.chat.status('');
        this.chat.notice(error);
        return 'gone';
      }
      const outcome = await this.consume(response, { reconnect: true });
      if (outcome === 'ended') return 'ended';
      if (outcome === 'closed' || outcome === 'dead') return 'dead';
      await delay(backoff(attempt), this.signal);
    }
    this.chat.status('');
    this.chat.notice(unreachable('The server has not come back, so the answer could not be followed.'),
      { onRetry: () => this.guard(() => this.recover()) });
    return 'gone';
  }

  /** Retries the answer that started the dead segment: `done`, or `again` to follow once more. */
  async retryAnswer() {
    for (let attempt = 0; attempt < MAX_LEASE_WAITS; attempt += 1) {
      this.chat.status('Resuming the answer where it stopped…');
      let response;
      try {
        response = await this.api.post('/api/studio/interrupt', this.answer, { signal: this.signal });
      } catch (error) {
        if (error?.name === 'AbortError') throw error;
        await delay(backoff(attempt), this.signal);
        continue;
      }
      if (response.ok) {
        this.chat.segmentStarted();
        const outcome = await this.consume(response);
        return outcome === 'ended' ? 'done' : 'again';
      }
      const error = await refusal(response);
      if (error.code === 'transient_unavailable' && error.retry === 'retry_after_delay') {
        const seconds = Math.max(1, Math.ceil(error.retry_after_seconds ?? 1));
        this.chat.status(`The stopped attempt still holds the conversation; resuming in ${seconds} s.`);
        await delay(seconds * 1000, this.signal);
        continue;
      }
      // The answer was carried out and the turn moved on: read what it made.
      if (error.code === 'edit_conflict') return 'again';
      this.chat.status('');
      this.chat.notice(error);
      return 'done';
    }
    this.chat.status('');
    this.chat.notice(unreachable('The conversation stayed busy, so the answer could not be resumed.'));
    return 'done';
  }

  /**
   * Reads the conversation back from the log (a reload, or opening it
   * again) and resumes its latest turn if it is still streaming.
   * Resolves to `new` when the server holds no such conversation yet.
   */
  async restore() {
    const read = await readTimeline(this.api, this.conversationId);
    if (!read.ok) {
      if (read.error.code === 'not_found') return 'new';
      this.chat.notice(read.error, { onRefresh: () => this.chat.actions.refresh() });
      return 'failed';
    }
    const { events: items, latest } = transcript(read.records);
    this.chat.replaying = true;
    try {
      for (const item of items) {
        if (item.type === 'turn') this.chat.userTurn(item.request?.message ?? '', item.request);
        else if (item.type === 'segment') this.chat.segmentStarted();
        else if (item.type === 'frame') this.chat.frame(item.frame, {});
        else if (item.type === 'answer') this.chat.answered(item.response);
      }
    } finally {
      this.chat.replaying = false;
    }
    if (!read.complete) this.chat.notice({ code: 'transient_unavailable', retry: 'do_not_retry', detail: 'This conversation is longer than the page reads back; its oldest part is shown.' });
    await this.canvas.refresh();
    this.canvas.render();
    this.chat.scrolled();
    if (latest) {
      this.request = latest.request;
      this.answer = latest.answer;
      this.lastSeq = latest.lastSeq;
      if (latest.state === 'streaming') await this.guard(() => this.recover());
    }
    return 'restored';
  }
}
