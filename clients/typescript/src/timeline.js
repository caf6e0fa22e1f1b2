// timeline.js — a conversation read back from the server's log (the
// timeline route) as the transcript's events and where its latest turn
// stands, for a reload.
// Owns: reading `studio.*` records into turns, segments, frames and
// answers. Must never: guess what the log does not say.

/**
 * @typedef {import('./studio-wire.js').Frame} Frame
 * @typedef {{type: 'turn', turn: number, request: any}
 *   | {type: 'segment', segment: number, turn: number, first_seq: number}
 *   | {type: 'frame', turn: number, segment: number, seq: number, frame: Frame}
 *   | {type: 'answer', turn: number, response: any}} TimelineEvent
 * @typedef {Extract<Frame, {event: 'plan.proposed'}> | Extract<Frame, {event: 'elicitation.request'}>} PauseFrame
 * @typedef {{turn: number, request: any, lastSeq: number, state: 'idle' | 'paused' | 'streaming', answer: any, pause: PauseFrame | null}} LatestTurn
 */

const ENDING = new Set(['plan.proposed', 'elicitation.request', 'error', 'done']);

/**
 * The transcript's events from parsed (not raw) timeline records, oldest
 * first, and where the latest turn stands: `idle` (it ended), `paused`
 * (an open question) or `streaming` (live, or cut off with its segment
 * dead); `answer` is the interrupt.response that started its latest
 * segment, if one did.
 * @param {Array<{kind: string, payload: any}>} records
 * @returns {{events: TimelineEvent[], latest: LatestTurn | null}}
 */
export function transcript(records) {
  /** @type {TimelineEvent[]} */
  const events = [];
  /** @type {any} */
  let latest = null;
  for (const record of records) {
    const p = record.payload ?? {};
    switch (record.kind) {
      case 'studio.turn_requested':
        latest = { turn: p.turn, request: p.request, lastSeq: 0, lastFrame: null, answered: new Set(), lastAnswer: null };
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
          latest.answered.add(p.interrupt_id);
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
  const last = latest.lastFrame;
  /** @type {'idle' | 'paused' | 'streaming'} */
  let state = 'streaming';
  if (last && ENDING.has(last.event)) {
    if (last.event === 'done' || last.event === 'error') state = 'idle';
    else state = latest.answered.has(last.interrupt_id) ? 'streaming' : 'paused';
  }
  // Every segment after a turn's first starts from an answer (a retried
  // one claims again with no new record), so the latest answer started
  // the latest segment.
  return {
    events,
    latest: { turn: latest.turn, request: latest.request, lastSeq: latest.lastSeq, state, answer: latest.lastAnswer, pause: state === 'paused' ? last : null },
  };
}
