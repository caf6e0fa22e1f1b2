// `/statewire` and `/harness` against the real server: a command
// admitted exactly once across a killed socket and across a server
// SIGKILL and restart (the session restored from storage); an
// `unsupported-version` attach retried, then given up; stored sessions of
// an older format migrated, or discarded by `migrate`; ops applied
// before the answers they come with; the inspector's `*` offer.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HarnessClient } from '../src/harness.js';
import { MemorySession, StatewireClient, StatewireHttp, StatewireWebSocket, SESSION_FORMAT } from '../src/statewire.js';
import { StudioClient } from '../src/studio.js';
import { SCENARIOS, conversationId, freePort, scratch, serve, waitFor } from './support.js';

const TOKEN = 'node-statewire';
const FAST = { initialMs: 50, maxMs: 400 };
const SCENARIO_ARGS = ['--agent', 'scenario', '--scenarios', SCENARIOS];

/** The conversation's `studio.turn_requested` records, through the Studio's timeline. */
async function turnsRequested(base, id) {
  const { records } = await new StudioClient({ baseUrl: base, token: TOKEN }).timeline(id);
  return records.filter((r) => r.kind === 'studio.turn_requested').length;
}

/** @param {HarnessClient} harness @param {(h: HarnessClient) => boolean} test */
function until(harness, test) {
  if (test(harness)) return Promise.resolve();
  return waitFor((listener) => harness.subscribe(() => listener(harness)), test);
}

describe('harness-sdk commands', () => {
  test('ops are applied before the answer they come with', async (t) => {
    const server = await serve(t, { data: scratch(t), args: SCENARIO_ARGS });
    const id = conversationId('ops');
    const harness = new HarnessClient({ baseUrl: server.base, conversationId: id, token: TOKEN, session: new MemorySession() });
    t.after(() => harness.close());
    await harness.connect();
    assert.equal(harness.main?.status, 'idle');
    const result = /** @type {any} */ (await harness.ask('scenario three-questions').then((answer) => ({
      answer, status: harness.main?.status, user: harness.message(/** @type {any} */ (answer).request),
    })));
    assert.equal(result.answer.turn, 1);
    assert.notEqual(result.status, 'idle', 'the main document showed the turn when its answer arrived');
    assert.equal(result.user?.text, 'scenario three-questions', 'the request message was mounted before the answer');
    await until(harness, (h) => h.main?.status === 'paused_questions');
    const pause = harness.main?.pause;
    assert.equal(pause?.kind, 'questions');
    // A refusal comes back as the Studio's error.
    await assert.rejects(harness.answer({ interrupt_id: pause?.interrupt_id ?? '', decision: 'approve' }), (error) => error.name === 'CommandRejected' && error.code === 'binding_invalid');
    assert.equal(harness.messages().length >= 2, true);
  });

  test('a command is admitted exactly once across a killed socket', async (t) => {
    const server = await serve(t, { data: scratch(t), args: SCENARIO_ARGS });
    const id = conversationId('socket');
    const session = new MemorySession();
    const harness = new HarnessClient({ baseUrl: server.base, conversationId: id, token: TOKEN, session, transport: 'websocket', backoff: FAST });
    t.after(() => harness.close());
    await harness.connect();
    let killed = false;
    harness.statewire.onPacket((direction, packet) => {
      // Kill the socket the moment the command leaves, before any answer.
      if (direction === 'out' && packet.cmd?.some((c) => c.method === 'turn') && !killed) {
        killed = true;
        queueMicrotask(() => harness.statewire.connection?.close());
      }
    });
    const answer = /** @type {any} */ (await harness.ask('scenario three-questions'));
    assert.ok(killed, 'the socket was killed');
    assert.equal(answer.turn, 1);
    assert.ok(harness.statewire.getSnapshot().attaches >= 2, 'it attached again');
    await until(harness, (h) => h.main?.status === 'paused_questions');
    assert.equal(harness.main?.turns.length, 1);
    assert.equal(await turnsRequested(server.base, id), 1);
  });

  test('a command is admitted exactly once across a server SIGKILL and restart, the session restored from storage', async (t) => {
    const data = scratch(t);
    const addr = `127.0.0.1:${await freePort()}`;
    const first = await serve(t, { data, addr, args: SCENARIO_ARGS });
    const id = conversationId('restart');
    const session = new MemorySession();
    const before = new HarnessClient({ baseUrl: first.base, conversationId: id, token: TOKEN, session, backoff: FAST });
    await before.connect();
    const sent = waitFor((listener) => before.statewire.onPacket((direction, packet) => listener({ direction, packet })),
      ({ direction, packet }) => direction === 'out' && packet.cmd?.some((c) => c.method === 'turn'));
    void before.ask('scenario three-questions').catch(() => {});
    await sent;
    await first.kill();
    before.close();
    const stored = /** @type {any} */ (session.load());
    assert.equal(stored.format, SESSION_FORMAT);
    assert.equal(stored.lanes['harness-sdk'].commands.length, 1, 'the unanswered command is in storage');

    const second = await serve(t, { data, addr, args: SCENARIO_ARGS });
    const after = new HarnessClient({ baseUrl: second.base, conversationId: id, token: TOKEN, session, backoff: FAST });
    t.after(() => after.close());
    await after.connect();
    await until(after, (h) => h.main?.status === 'paused_questions');
    await waitFor((listener) => after.statewire.subscribe(() => listener(after.statewire.getSnapshot())),
      (snapshot) => snapshot.lanes.find((l) => l.name === 'harness-sdk')?.pending === 0).catch(() => {});
    assert.equal(/** @type {any} */ (session.load()).lanes['harness-sdk'].commands.length, 0, 'answered, so no longer stored');
    assert.equal(after.main?.turns.length, 1);
    assert.equal(await turnsRequested(second.base, id), 1);
    const verdict = after.statewire.verdict('harness-sdk', 1);
    assert.equal(/** @type {any} */ (verdict)?.ok?.turn, 1, 'the answer is kept for the reloaded app');
  });

  test('held commands wait for release; localMeta stays local', async (t) => {
    const server = await serve(t, { data: scratch(t), args: SCENARIO_ARGS });
    const id = conversationId('hold');
    const session = new MemorySession();
    const harness = new HarnessClient({ baseUrl: server.base, conversationId: id, token: TOKEN, session });
    t.after(() => harness.close());
    await harness.connect();
    const outgoing = [];
    harness.statewire.onPacket((direction, packet) => { if (direction === 'out') outgoing.push(packet); });
    const held = harness.command('turn', { message: 'scenario three-questions' }, { hold: true, localMeta: { draft: 7 } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(held.seq, null, 'a held command has no seq yet');
    assert.equal(outgoing.length, 0);
    assert.deepEqual(/** @type {any} */ (session.load()).lanes['harness-sdk'].outbox[0].localMeta, { draft: 7 });
    held.release();
    assert.equal((/** @type {any} */ (await held.result)).turn, 1);
    assert.equal(held.seq, 1);
    assert.ok(!JSON.stringify(outgoing).includes('draft'), 'localMeta is never sent');
  });
});

describe('negotiation', () => {
  test('an unsupported-version attach is retried with backoff, then given up', async (t) => {
    const server = await serve(t, { data: scratch(t), args: SCENARIO_ARGS });
    let attempts = 0;
    const http = StatewireHttp({ url: `${server.base}/threads/${conversationId('version')}`, token: TOKEN });
    const counting = { ...http, open: (/** @type {any} */ options) => { attempts += 1; return http.open(options); } };
    const client = new StatewireClient({
      applicationProtocols: [{ name: 'harness-sdk', version: '2026-12-01' }],
      wireVersion: { version: '2027-01-01' },
      transport: counting, retryForMs: 1_000, backoff: { initialMs: 100, maxMs: 200 },
    });
    const started = Date.now();
    await assert.rejects(client.connect(), (error) => error.name === 'StatewireStopped' && error.fin?.code === 'unsupported-version');
    assert.ok(attempts >= 3, `retried (${attempts} attempts)`);
    assert.ok(Date.now() - started >= 1_000, 'for the retry window');
    assert.equal(client.getSnapshot().status, 'failed');
    assert.deepEqual(client.fin.payload.protocols.map((p) => p.name).includes('harness-sdk'), true, 'the host said what it serves');
  });

  test('the inspector offers `*` and sees the native selection, its lanes and documents', async (t) => {
    const server = await serve(t, { data: scratch(t), args: SCENARIO_ARGS });
    const id = conversationId('star');
    const client = new StatewireClient({ applicationProtocols: '*', transport: StatewireWebSocket({ url: `${server.base}/threads/${id}`, token: TOKEN }) });
    t.after(() => client.close());
    const selection = await client.connect();
    const names = selection.protocols.map((p) => p.name);
    assert.deepEqual(names, ['harness-sdk', 'harness-sdk/interest']);
    assert.equal(selection.protocols[1].record, 'ephemeral');
    assert.equal(client.documents.get('harness-sdk')?.status, 'idle');
    assert.throws(() => client.invoke('acme-chat', 'setTheme', ['dark']), /not selected/);
    const answer = await client.invoke('harness-sdk', 'turn', [{ message: 'scenario three-questions' }]).result;
    assert.equal(/** @type {any} */ (answer).turn, 1);
    const lane = client.getSnapshot().lanes.find((l) => l.name === 'harness-sdk');
    assert.equal(lane?.watermark, 1);
  });
});

describe('stored sessions', () => {
  /** A format 2 record: one unanswered turn, stored with no contract. @param {string} clientId */
  const older = (clientId) => ({ format: 2, clientId, lanes: { 'harness-sdk': { nextSeq: 2, commands: [{ seq: 1, method: 'turn', params: [{ message: 'scenario three-questions' }] }] } } });

  test('an older format is upgraded, migrated by `migrate`, and its command replayed', async (t) => {
    const server = await serve(t, { data: scratch(t), args: SCENARIO_ARGS });
    const id = conversationId('migrate');
    /** @type {any[]} */
    const seen = [];
    const session = new MemorySession({
      initial: older('0123456789abcdef0123456789abcdef'),
      migrate: (record, current) => {
        seen.push(record.format, current.format);
        for (const lane of Object.values(record.lanes)) {
          for (const command of lane.commands) command.contract = { wire: current.wireVersion, protocol: { version: '2026-12-01' } };
        }
        return record;
      },
    });
    const harness = new HarnessClient({ baseUrl: server.base, conversationId: id, token: TOKEN, session });
    t.after(() => harness.close());
    await harness.connect();
    assert.deepEqual(seen, [5, 5], 'migrate saw the record upgraded to format 5');
    await until(harness, (h) => h.main?.status === 'paused_questions');
    assert.equal(harness.statewire.getSnapshot().clientId, '0123456789abcdef0123456789abcdef', 'the client identity was kept');
    assert.equal(await turnsRequested(server.base, id), 1);
  });

  test('`migrate` returning null discards the stored session and starts a new identity', async (t) => {
    const server = await serve(t, { data: scratch(t), args: SCENARIO_ARGS });
    const id = conversationId('discard');
    const session = new MemorySession({ initial: older('fedcba9876543210fedcba9876543210'), migrate: () => null });
    const harness = new HarnessClient({ baseUrl: server.base, conversationId: id, token: TOKEN, session });
    t.after(() => harness.close());
    await harness.connect();
    const snapshot = harness.statewire.getSnapshot();
    assert.notEqual(snapshot.clientId, 'fedcba9876543210fedcba9876543210');
    assert.equal(snapshot.lanes.find((l) => l.name === 'harness-sdk')?.pending, 0);
    assert.equal(harness.main?.turns.length, 0, 'the discarded command was never sent');
    assert.equal(/** @type {any} */ (session.load()).format, SESSION_FORMAT);
  });
});

test('without a WebSocket (Node 20 without --experimental-websocket) connect() rejects at once, saying what to do', async (t) => {
  const saved = Object.getOwnPropertyDescriptor(globalThis, 'WebSocket');
  Object.defineProperty(globalThis, 'WebSocket', { value: undefined, configurable: true, writable: true });
  t.after(() => {
    if (saved) Object.defineProperty(globalThis, 'WebSocket', saved);
    else delete globalThis.WebSocket;
  });
  const client = new StatewireClient({
    applicationProtocols: [{ name: 'harness-sdk', version: '2026-12-01' }],
    transport: StatewireWebSocket({ url: 'http://127.0.0.1:9/threads/t1', token: TOKEN }),
    backoff: FAST,
  });
  t.after(() => client.close());
  const started = Date.now();
  await assert.rejects(client.connect(), (error) => error.name === 'StatewireStopped'
    && /pass `WebSocket`/.test(error.message) && /--experimental-websocket/.test(error.message));
  assert.ok(Date.now() - started < FAST.initialMs * 4, 'at once, not after retries');
  assert.equal(client.getSnapshot().status, 'failed');
});
