// support.js — the real ledgerwire binary on 127.0.0.1 for the tests:
// started on a free port (or a given one, to restart it where its clients
// know it), its address read from the line it prints once listening, and
// killed when the test ends.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
/** The repository's root. */
export const REPO = join(here, '..', '..', '..');
/** Scripts of `--agent scenario`. */
export const SCENARIOS = join(REPO, 'fixtures', 'scenarios');
/** Longest a server may take to say it listens, in ms. */
const START_TIMEOUT_MS = 20_000;

/** The binary under test: LEDGERWIRE_BIN (cargo's build), else the debug build. */
export function binary() {
  return process.env.LEDGERWIRE_BIN ?? join(REPO, 'target', 'debug', 'ledgerwire');
}

/** A fresh data directory, removed when `t` ends. @param {import('node:test').TestContext} t */
export function scratch(t) {
  const dir = mkdtempSync(join(process.env.LEDGERWIRE_TMP ?? tmpdir(), 'lw-client-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A loopback port free right now. @returns {Promise<number>} */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/**
 * `ledgerwire serve --addr ADDR --data DATA ARGS…`; resolves once it listens.
 * @param {import('node:test').TestContext} t
 * @param {{data: string, args?: string[], addr?: string}} options
 */
export function serve(t, { data, args = [], addr = '127.0.0.1:0' }) {
  const child = spawn(binary(), ['serve', '--addr', addr, '--data', data, ...args], {
    env: { ...process.env, RUST_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  t.after(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    const lines = createInterface({ input: child.stdout });
    child.once('error', reject);
    lines.once('line', (line) => {
      clearTimeout(timer);
      const address = line.trim().replace(/^listening on /, '');
      if (address === line.trim()) { reject(new Error(`unexpected first line ${line}`)); return; }
      resolve({
        child,
        addr: address,
        base: `http://${address}`,
        exited,
        /** SIGKILLs the server and waits for it to go. */
        async kill() { child.kill('SIGKILL'); await exited; },
      });
    });
  });
}

/**
 * Resolves with the first event `listener` is given for which `test`
 * holds, within `ms`.
 * @template T
 * @param {(listener: (value: T) => void) => () => void} on
 * @param {(value: T) => boolean} test
 * @param {number} [ms]
 * @returns {Promise<T>}
 */
export function waitFor(on, test, ms = 20_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { off(); reject(new Error(`nothing matched within ${ms} ms`)); }, ms);
    const off = on((value) => {
      if (test(value)) { clearTimeout(timer); off(); resolve(value); }
    });
  });
}

/** A conversation id of its own per test. @param {string} name */
export function conversationId(name) {
  return `${name}-${Math.random().toString(16).slice(2, 10)}`;
}
