// sse.js — reading a Server-Sent Events response that fetch returned
// (the Studio's streams answer POSTs, which EventSource cannot send).
// Owns: splitting the byte stream into events (`id:`, `data:` lines,
// `:` comments) and stamping each with the time its first byte arrived.
// Must never: interpret a frame (the session does), or buffer an event
// past MAX_EVENT_CHARS.

/** Characters one event may hold before the stream is given up as broken. */
export const MAX_EVENT_CHARS = 32 * 1024 * 1024;
/** Silence (no byte, not even a heartbeat) after which a stream counts as dropped, in ms. */
export const SILENCE_LIMIT_MS = 30_000;

/** Why a stream stopped without its closing frame. */
export class StreamDropped extends Error {}

function parseBlock(block) {
  let id = null;
  const data = [];
  let comment = null;
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) {
      comment = line.slice(1).trim();
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return comment === null ? null : { comment };
  return { id, data: data.join('\n') };
}

/**
 * Yields `{id, data, receivedAt}` for each event and `{comment}` for each
 * comment (heartbeats), until the response ends. Throws StreamDropped when
 * the connection fails, goes silent for SILENCE_LIMIT_MS, or an event
 * grows past MAX_EVENT_CHARS; an AbortError when `signal` aborts.
 */
export async function* events(response, signal) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let pendingCr = false;
  let startedAt = null;
  let silence = null;
  let rejectSilence = () => {};
  const silent = new Promise((_, reject) => { rejectSilence = reject; });
  silent.catch(() => {});
  const arm = () => {
    clearTimeout(silence);
    silence = setTimeout(() => rejectSilence(new StreamDropped('The stream went silent.')), SILENCE_LIMIT_MS);
  };
  const onAbort = () => reader.cancel().catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      arm();
      let chunk;
      try {
        chunk = await Promise.race([reader.read(), silent]);
      } catch (error) {
        if (signal?.aborted) throw new DOMException('aborted', 'AbortError');
        if (error instanceof StreamDropped) throw error;
        throw new StreamDropped(`The connection dropped (${error?.message ?? error}).`);
      }
      if (signal?.aborted) throw new DOMException('aborted', 'AbortError');
      if (chunk.done) return;
      const now = performance.now();
      if (startedAt === null) startedAt = now;
      let text = decoder.decode(chunk.value, { stream: true });
      if (pendingCr) text = `\r${text}`;
      pendingCr = text.endsWith('\r');
      if (pendingCr) text = text.slice(0, -1);
      buffer += text.replace(/\r\n?/g, '\n');
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end < 0) break;
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parseBlock(block);
        const at = startedAt;
        startedAt = buffer.length > 0 ? now : null;
        if (event) {
          if ('data' in event) event.receivedAt = at;
          yield event;
        }
      }
      if (buffer.length > MAX_EVENT_CHARS) throw new StreamDropped('An event was too large to read.');
    }
  } finally {
    clearTimeout(silence);
    signal?.removeEventListener('abort', onAbort);
    reader.cancel().catch(() => {});
  }
}
