// The README as a new user follows it: its `serve --agent scenario` line
// starts a server outside the repository's root and plays a script, and
// its harness snippet passes strict type-checking.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'node:test';

import { StudioClient } from '../src/studio.js';
import { SCENARIOS, binary, conversationId, scratch, serve } from './support.js';

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), '..');
const README = readFileSync(join(PACKAGE, 'README.md'), 'utf8');

/** The README's `ledgerwire serve --agent scenario …` line, as arguments. */
function serveLine() {
  const line = README.split('\n').find((l) => l.startsWith('ledgerwire serve --agent scenario'));
  assert.ok(line, 'the README says how to start the scenario agent');
  return line.replace(/#.*$/, '').trim().split(/\s+/).slice(1);
}

test("the README's scenario server starts outside the repository's root and plays a script", async (t) => {
  const args = serveLine();
  assert.ok(args.includes('--scenarios'), 'the README names --scenarios');
  // This test runs in clients/typescript, where fixtures/scenarios does not exist.
  const bare = spawnSync(binary(), ['serve', '--addr', '127.0.0.1:0', '--data', scratch(t), '--agent', 'scenario'], { encoding: 'utf8', timeout: 20_000 });
  assert.notEqual(bare.status, 0, 'without --scenarios the server does not start here');
  assert.match(bare.stderr, /cannot read fixtures\/scenarios/);
  const given = args.slice(1).map((arg) => (arg.endsWith('fixtures/scenarios') ? SCENARIOS : arg));
  const server = await serve(t, { data: scratch(t), args: given });
  const chat = new StudioClient({ baseUrl: server.base, token: 'readme' }).conversation(conversationId('readme'));
  assert.equal(await chat.ask('scenario three-questions'), 'paused');
  assert.equal(chat.getSnapshot().pause?.event, 'elicitation.request');
});

test("the README's harness snippet passes strict type-checking", (t) => {
  const section = README.slice(README.indexOf('## 11. harness-sdk'));
  const snippet = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(snippet, 'the harness section has a TypeScript snippet');
  const lines = snippet.split('\n');
  const imports = lines.filter((l) => l.startsWith('import '));
  const body = lines.filter((l) => !l.startsWith('import '));
  const source = [...imports, 'declare const token: string;', 'declare const principal: string;',
    'export async function main(): Promise<void> {', ...body, '}', ''].join('\n');
  // Inside the package, so `@ledgerwire/client` resolves to its own exports.
  const file = join(PACKAGE, 'test', 'consumer', '.readme-harness.ts');
  writeFileSync(file, source);
  t.after(() => rmSync(file, { force: true }));
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '--strict', '--noEmit', '--skipLibCheck', '--target', 'ES2022', '--module', 'NodeNext',
    '--moduleResolution', 'NodeNext', '--lib', 'ES2023,DOM', file], { encoding: 'utf8', cwd: PACKAGE });
  assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
});
