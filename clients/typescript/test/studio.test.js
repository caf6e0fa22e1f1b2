// `/studio` against the real server playing every scenario of
// `serve --agent scenario`: each retry mode of a fatal error, a failed
// then retried step, three questions, a cut stream, a stalled stream, a
// server that exits mid-turn and is started again; Stop during a stream
// and during a switch; a reload mid-turn; two conversations at once.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { StudioClient } from '../src/studio.js';
import { SCENARIOS, conversationId, freePort, scratch, serve } from './support.js';

/** Silence before a stream counts as dropped, here (the stall lasts 12 s). */
const SILENCE_MS = 3_000;

/** @param {string} base @param {string} [token] */
function client(base, token = 'node-tests') {
  return new StudioClient({ baseUrl: base, token, silenceMs: SILENCE_MS });
}

/** Every live frame a conversation delivers. @param {import('../src/studio.js').Conversation} c */
function record(c) {
  /** @type {any[]} */
  const frames = [];
  c.on((event) => { if (event.type === 'frame' && !event.replay) frames.push(event.frame); });
  return frames;
}

/** Seqs strictly grow: nothing twice, nothing out of order. @param {any[]} frames */
function ordered(frames) {
  const seqs = frames.map((f) => f.seq);
  for (let i = 1; i < seqs.length; i += 1) assert.ok(seqs[i] > seqs[i - 1], `seq order: ${seqs}`);
}

/** Resolves once `c` delivers a live frame matching `test`. */
function frameWhere(c, test) {
  return new Promise((resolve) => {
    const off = c.on((event) => {
      if (event.type === 'frame' && test(event.frame)) { off(); resolve(event.frame); }
    });
  });
}

describe('scenarios on one server', { concurrency: 4 }, async () => {
  /** @type {any} */
  let server;
  /** @type {Array<() => void>} */
  const cleanups = [];
  // The hooks have no test context: a stand-in that collects the cleanups.
  const scope = /** @type {any} */ ({ after: (/** @type {() => void} */ fn) => cleanups.push(fn) });
  before(async () => {
    server = await serve(scope, { data: scratch(scope), args: ['--agent', 'scenario', '--scenarios', SCENARIOS] });
  });
  after(async () => {
    await server?.kill();
    for (const fn of cleanups.reverse()) fn();
  });

  for (const [name, mode] of [
    ['fatal-correct-and-retry', 'correct_and_retry'],
    ['fatal-refresh-then-retry', 'refresh_then_retry'],
    ['fatal-retry-after-delay', 'retry_after_delay'],
    ['fatal-do-not-retry', 'do_not_retry'],
  ]) {
    test(`${name}: the error and its retry mode are data`, async () => {
      const c = client(server.base).conversation(conversationId(name));
      const frames = record(c);
      const outcome = await c.ask(`scenario ${name}`);
      assert.equal(outcome, 'failed');
      const state = c.getSnapshot();
      assert.equal(state.status, 'failed');
      assert.equal(state.stopped, false);
      assert.equal(state.error?.retry, mode);
      assert.equal(state.retry?.mode, mode);
      if (mode === 'correct_and_retry') assert.ok(state.retry?.fix, 'fix comes with correct_and_retry');
      if (mode === 'retry_after_delay') assert.ok((state.retry?.waitMs ?? 0) > 0, 'a wait comes with retry_after_delay');
      assert.equal(frames.at(-1).event, 'error');
      assert.ok(!frames.some((f) => f.event === 'done'), 'no done after a fatal error');
      ordered(frames);
    });
  }

  test('step-fails-then-succeeds: the failed step completes on the same step_id', async () => {
    const c = client(server.base).conversation(conversationId('step'));
    const frames = record(c);
    assert.equal(await c.ask('scenario step-fails-then-succeeds'), 'done');
    const steps = frames.filter((f) => f.event === 'activity.step');
    const failed = steps.find((f) => f.status === 'failed');
    assert.ok(failed, 'a step failed');
    assert.ok(steps.some((f) => f.step_id === failed.step_id && f.status === 'complete'), 'and completed later');
    assert.equal(c.getSnapshot().status, 'idle');
    ordered(frames);
  });

  test('three-questions: one pause, answered by question id', async () => {
    const c = client(server.base).conversation(conversationId('questions'));
    const frames = record(c);
    assert.equal(await c.ask('scenario three-questions'), 'paused');
    const pause = c.getSnapshot().pause;
    assert.equal(pause?.event, 'elicitation.request');
    const questions = pause.event === 'elicitation.request' ? pause.questions : [];
    assert.equal(questions.length, 3);
    /** @type {Record<string, any>} */
    const answers = {};
    for (const q of questions) answers[q.id] = q.options?.length ? { kind: 'option', option_id: q.options[0].id } : { kind: 'skipped' };
    assert.equal(await c.answerQuestions(answers), 'done');
    assert.equal(c.getSnapshot().pause, null);
    ordered(frames);
  });

  test('cut-stream: the turn is followed through /stream and the answer re-posted, each frame once', async () => {
    const c = client(server.base).conversation(conversationId('cut'));
    const frames = record(c);
    assert.equal(await c.ask('scenario cut-stream'), 'paused');
    const notes = [];
    c.on((e) => { if (e.type === 'note') notes.push(e.text); });
    assert.equal(await c.approve(), 'done');
    assert.ok(notes.some((n) => n.startsWith('Reconnecting')), `reconnected: ${notes}`);
    assert.equal(c.getSnapshot().stopped, false, 'a dropped stream is not a Stop');
    assert.equal(frames.filter((f) => f.event === 'done').length, 1);
    ordered(frames);
  });

  test('stall-stream: a silent stream counts as dropped and the turn is followed to its end', async () => {
    const c = client(server.base).conversation(conversationId('stall'));
    const frames = record(c);
    assert.equal(await c.ask('scenario stall-stream'), 'paused');
    const statuses = new Set();
    c.subscribe(() => statuses.add(c.getSnapshot().status));
    assert.equal(await c.approve(), 'done');
    assert.ok(statuses.has('reconnecting'), `went through reconnecting: ${[...statuses]}`);
    assert.equal(frames.filter((f) => f.event === 'done').length, 1);
    ordered(frames);
  });

  test('Stop during a stream ends the turn as stopped, not failed', async () => {
    const c = client(server.base).conversation(conversationId('stop'));
    const frames = record(c);
    const asked = c.ask('scenario long-tool-call');
    await frameWhere(c, (f) => f.event === 'activity.step');
    await c.stop();
    assert.equal(await asked, 'stopped');
    const state = c.getSnapshot();
    assert.equal(state.status, 'idle');
    assert.equal(state.stopped, true);
    assert.equal(state.error, null);
    assert.equal(frames.at(-1).error?.code, 'cancelled');
  });

  test('Stop during a switch re-offers the unchanged plan, still paused', async () => {
    const c = client(server.base).conversation(conversationId('switch'));
    assert.equal(await c.ask('scenario slow-switch'), 'paused');
    const first = c.getSnapshot().pause;
    const switching = c.switchChoice('r1:basis', 'o2');
    await frameWhere(c, (f) => f.event === 'message.delta' && f.seq > (first?.seq ?? 0));
    await c.stop();
    assert.equal(await switching, 'paused');
    const pause = c.getSnapshot().pause;
    assert.equal(pause?.event, 'plan.proposed');
    assert.equal(pause?.event === 'plan.proposed' && pause.switch_failed?.code, 'switch_cancelled');
    assert.notEqual(pause?.interrupt_id, first?.interrupt_id);
    assert.equal(await c.approve(), 'done');
  });

  test('two conversations at once keep their own frames and state', async () => {
    const studio = client(server.base);
    const a = studio.conversation(conversationId('a'));
    const b = studio.conversation(conversationId('b'));
    const fa = record(a);
    const fb = record(b);
    const [ra, rb] = await Promise.all([a.ask('scenario step-fails-then-succeeds'), b.ask('scenario three-questions')]);
    assert.equal(ra, 'done');
    assert.equal(rb, 'paused');
    assert.equal(a.getSnapshot().pause, null);
    assert.equal(b.getSnapshot().pause?.event, 'elicitation.request');
    assert.ok(!fa.some((f) => f.event === 'elicitation.request'));
    assert.ok(!fb.some((f) => f.event === 'done'));
    // Leaving one mid-stream leaves nothing behind in it.
    const c = studio.conversation(conversationId('left'));
    const asked = c.ask('scenario long-tool-call');
    await frameWhere(c, (f) => f.event === 'activity.step');
    let after = 0;
    c.subscribe(() => { after += 1; });
    c.dispose();
    await assert.rejects(asked, { name: 'AbortError' });
    assert.equal(after, 0, 'a disposed conversation tells no one anything');
    ordered(fa);
    ordered(fb);
  });

  test('frames as an async iterator', async () => {
    const c = client(server.base).conversation(conversationId('iter'));
    const controller = new AbortController();
    const seen = [];
    const reading = (async () => {
      for await (const frame of c.frames({ signal: controller.signal })) {
        seen.push(frame.event);
        if (frame.event === 'done') controller.abort();
      }
    })();
    await c.ask('scenario step-fails-then-succeeds');
    await reading;
    assert.equal(seen.at(-1), 'done');
    assert.ok(seen.includes('suggestions'));
  });

  test('a call aborted mid-stream leaves the status at what is true, not streaming', async () => {
    const c = client(server.base).conversation(conversationId('aborted'));
    const controller = new AbortController();
    const asked = c.ask('scenario long-tool-call', { signal: controller.signal });
    await frameWhere(c, (f) => f.event === 'activity.step');
    assert.equal(c.getSnapshot().status, 'streaming');
    controller.abort();
    await assert.rejects(asked, { name: 'AbortError' });
    const state = c.getSnapshot();
    assert.equal(state.status, 'idle', 'nothing streams after the abort');
    assert.equal(state.busy, false);
  });

  test('a refused mutation is a StudioError and an aborted signal ends a call as AbortError', async () => {
    const studio = client(server.base);
    const c = studio.conversation(conversationId('canvas'));
    await assert.rejects(c.mutate([{ op: 'pin', component_id: 'nope' }]), (error) => error.name === 'StudioError');
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(c.ask('scenario three-questions', { signal: controller.signal }), { name: 'AbortError' });
  });
});

describe('a reload mid-turn', () => {
  test('a new client on the same conversation restores it and follows the turn to its end', async (t) => {
    const server = await serve(t, { data: scratch(t), args: ['--agent', 'scenario', '--scenarios', SCENARIOS, '--keep-on-disconnect'] });
    const id = conversationId('reload');
    const first = client(server.base).conversation(id);
    assert.equal(await first.ask('scenario cut-stream'), 'paused');
    const approving = first.approve();
    await frameWhere(first, (f) => f.event === 'activity.step');
    first.dispose();
    await assert.rejects(approving, { name: 'AbortError' });

    const second = client(server.base).conversation(id);
    const replayed = [];
    const live = record(second);
    second.on((e) => { if (e.type === 'frame' && e.replay) replayed.push(e.frame); });
    assert.equal(await second.restore(), 'restored');
    assert.ok(replayed.some((f) => f.event === 'plan.proposed'), 'the log was replayed');
    const all = [...replayed, ...live];
    assert.equal(all.filter((f) => f.event === 'done').length, 1, 'the turn finished once');
    ordered(all);
    assert.equal(second.getSnapshot().status, 'idle');
  });
});

describe('a server that exits mid-turn', () => {
  test('is started again; the client reconnects, waits out the lease and re-posts the identical answer', async (t) => {
    const data = scratch(t);
    const addr = `127.0.0.1:${await freePort()}`;
    const args = ['--agent', 'scenario', '--scenarios', SCENARIOS, '--lease-ttl', '2000', '--heartbeat', '200'];
    const server = await serve(t, { data, addr, args });
    const c = client(server.base).conversation(conversationId('exit'));
    const frames = record(c);
    assert.equal(await c.ask('scenario server-exit'), 'paused');
    const notes = [];
    c.on((e) => { if (e.type === 'note') notes.push(e.text); });
    const approving = c.approve();
    const exit = await server.exited;
    assert.equal(exit.code, 70, 'the scenario made the server exit');
    await serve(t, { data, addr, args });
    assert.equal(await approving, 'done');
    assert.ok(notes.some((n) => n.startsWith('Reconnecting')), `${notes}`);
    assert.equal(frames.filter((f) => f.event === 'done').length, 1);
    ordered(frames);
    const resumed = frames.find((f) => f.event === 'message.complete');
    assert.ok(resumed.seq >= 1000, `the resumed segment starts past the dead one's seqs (${resumed.seq})`);
  });
});

describe('a busy conversation', () => {
  test('a 409 on a live segment is waited out by its retry_after_seconds, then the turn runs', async (t) => {
    const server = await serve(t, { data: scratch(t), args: [...['--agent', 'scenario', '--scenarios', SCENARIOS], '--lease-ttl', '2000', '--heartbeat', '200'] });
    const id = conversationId('busy');
    const first = client(server.base).conversation(id);
    const second = client(server.base).conversation(id);
    const notes = [];
    second.on((e) => { if (e.type === 'note') notes.push(e.text); });
    const asked = first.ask('scenario slow-plan');
    await frameWhere(first, (f) => f.event === 'message.delta');
    const started = Date.now();
    assert.equal(await second.ask('scenario three-questions'), 'paused');
    assert.ok(notes.some((n) => n.startsWith('The conversation is busy')), `waited: ${notes}`);
    assert.ok(Date.now() - started >= 900, 'it waited before asking again');
    assert.equal(await asked, 'paused');
  });
});
