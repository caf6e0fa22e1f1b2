// restore.js — a conversation read back from the server's log (the
// timeline route), for a reload and for the audit view.
// Owns: paging through the timeline, and reading its records as the
// transcript's events (turns, segments, frames, answers) and where the
// latest turn stands: finished, paused on an open question, or
// streaming (live, or cut off with its segment dead).
// Must never: guess what the log does not say; a conversation's content
// comes from the log alone, never from the browser's storage.

/** Timeline pages one restore reads at most (1,000 records each). */
export const MAX_TIMELINE_PAGES = 200;
/** Records one timeline page asks for (the server's MAX_TIMELINE_RECORDS). */
export const TIMELINE_PAGE_RECORDS = 1000;

const ENDING = new Set(['plan.proposed', 'elicitation.request', 'error', 'done']);

/** Every record of the conversation: `{ok, records, head}` or `{ok: false, error}`. */
export async function readTimeline(api, conversationId, { raw = false } = {}) {
  const records = [];
  let from = 0;
  let head = 0;
  for (let page = 0; page < MAX_TIMELINE_PAGES; page += 1) {
    const result = await api.timeline(conversationId, from, { raw, limit: TIMELINE_PAGE_RECORDS });
    if (!result.ok) return result;
    records.push(...result.body.records);
    head = result.body.head;
    if (result.body.next === null || result.body.next === undefined) return { ok: true, records, head, complete: true };
    from = result.body.next;
  }
  return { ok: true, records, head, complete: false };
}

/**
 * The transcript's events from `records` (parsed, not raw), oldest first:
 * `{type: 'turn', turn, request}`, `{type: 'segment', segment, turn, first_seq}`,
 * `{type: 'frame', turn, segment, seq, frame}`, `{type: 'answer', turn, response}`;
 * and `latest`, where the last turn stands:
 * `{turn, request, lastSeq, state: 'idle'|'paused'|'streaming', answer}` (`answer`:
 * the interrupt.response that started the turn's latest segment, if one did).
 */
export function transcript(records) {
  const events = [];
  let latest = null;
  for (const record of records) {
    const p = record.payload ?? {};
    switch (record.kind) {
      case 'studio.turn_requested':
        latest = { turn: p.turn, request: p.request, lastSeq: 0, lastFrame: null, answers: new Map(), lastAnswer: null };
        events.push({ type: 'turn', turn: p.turn, request: p.request });
        break;
      case 'studio.segment_claimed':
        events.push({ type: 'segment', segment: p.segment, turn: p.turn, first_seq: p.first_seq });
        break;
      case 'studio.frame_sent':
        if (latest && p.turn === latest.turn) {
          latest.lastSeq = Math.max(latest.lastSeq, p.seq);
          latest.lastFrame = p.frame;
        }
        events.push({ type: 'frame', turn: p.turn, segment: p.segment, seq: p.seq, frame: p.frame });
        break;
      case 'studio.interrupt_answered':
        if (latest && p.turn === latest.turn) {
          latest.answers.set(p.interrupt_id, p.response);
          // The log keeps the answer as accepted, without its `kind`.
          latest.lastAnswer = { kind: 'interrupt.response', ...p.response };
        }
        events.push({ type: 'answer', turn: p.turn, response: p.response });
        break;
      default:
        break;
    }
  }
  if (!latest) return { events, latest: null };
  // Every segment after a turn's first starts from an answer (a retried
  // one claims again with no new record), so the latest answer started
  // the latest segment.
  const answer = latest.lastAnswer;
  const last = latest.lastFrame;
  let state = 'streaming';
  if (last && ENDING.has(last.event)) {
    if (last.event === 'done' || last.event === 'error') state = 'idle';
    else state = latest.answers.has(last.interrupt_id) ? 'streaming' : 'paused';
  }
  return {
    events,
    latest: { turn: latest.turn, request: latest.request, lastSeq: latest.lastSeq, state, answer },
  };
}
