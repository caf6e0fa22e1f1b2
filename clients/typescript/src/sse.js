// sse.js — Server-Sent Events out of a fetch() response body, for the
// routes that answer a POST (which EventSource cannot send).
// Owns: feeding the body to eventsource-parser, stamping each event with
// the time its first byte arrived, and noticing a silent stream.
// Must never: interpret an event's data (its callers do), or buffer one
// event past MAX_EVENT_CHARS.

import { createParser } from 'eventsource-parser';

/** Characters one event may hold before the stream is given up as broken. */
export const MAX_EVENT_CHARS = 32 * 1024 * 1024;
/** Silence (no byte, not even a heartbeat) after which a stream counts as dropped, in ms. */
export const SILENCE_LIMIT_MS = 30_000;

/** A stream that stopped without its closing frame: cut, silent or unreadable. */
export class StreamDropped extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'StreamDropped';
  }
}

/** An AbortError as fetch raises it. */
export function abortError() {
  return new DOMException('The operation was aborted.', 'AbortError');
}

/**
 * @typedef {{id?: string, data: string, receivedAt: number}} SseMessage
 * @typedef {{comment: string}} SseComment
 */

/**
 * Yields each event (`{id, data, receivedAt}`) and each comment
 * (`{comment}`, the heartbeats) of `response` until its body ends.
 * Throws StreamDropped when the connection fails, stays silent for
 * `silenceMs`, or an event grows past MAX_EVENT_CHARS; an AbortError
 * when `signal` aborts.
 * @param {Response} response
 * @param {{signal?: AbortSignal, silenceMs?: number}} [options]
 * @returns {AsyncGenerator<SseMessage | SseComment>}
 */
export async function* readEvents(response, { signal, silenceMs = SILENCE_LIMIT_MS } = {}) {
  if (!response.body) throw new StreamDropped('The response has no body.');
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  /** @type {Array<{id?: string, data: string} | SseComment>} */
  const ready = [];
  const parser = createParser({
    onEvent: (event) => { ready.push({ id: event.id, data: event.data }); },
    onComment: (comment) => { ready.push({ comment }); },
  });
  // When the first byte of the event being read arrived (null between events).
  /** @type {number | null} */
  let openedAt = null;
  let pending = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const onAbort = () => { reader.cancel().catch(() => {}); };
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      if (signal?.aborted) throw abortError();
      const silent = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new StreamDropped('The stream went silent.')), silenceMs);
      });
      /** @type {ReadableStreamReadResult<Uint8Array>} */
      let chunk;
      try {
        chunk = await Promise.race([reader.read(), silent]);
      } catch (error) {
        if (signal?.aborted) throw abortError();
        if (error instanceof StreamDropped) throw error;
        throw new StreamDropped(`The connection dropped (${error instanceof Error ? error.message : error}).`);
      } finally {
        clearTimeout(timer);
      }
      if (signal?.aborted) throw abortError();
      if (chunk.done) return;
      const now = performance.now();
      openedAt ??= now;
      const text = decoder.decode(chunk.value, { stream: true });
      parser.feed(text);
      const boundary = /(\r?\n|\r)(\r?\n|\r)$/.test(text);
      let first = openedAt;
      if (ready.length > 0) {
        openedAt = boundary ? null : now;
        pending = boundary ? 0 : text.length;
      } else {
        pending += text.length;
      }
      if (pending > MAX_EVENT_CHARS) throw new StreamDropped('An event was too large to read.');
      while (ready.length > 0) {
        const event = /** @type {{id?: string, data: string} | SseComment} */ (ready.shift());
        if ('data' in event) {
          yield { id: event.id, data: event.data, receivedAt: first };
          first = now;
        } else {
          yield event;
        }
      }
    }
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    reader.cancel().catch(() => {});
  }
}
