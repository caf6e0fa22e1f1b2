// The package as a front-end team installs it: its exports pass publint,
// `/studio` and `/statewire` stay small once bundled, nothing touches
// DOM or storage at import or construction (server rendering), and the
// React hooks render from the stores' snapshots.

import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import test from 'node:test';
import { build } from 'esbuild';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { readFileSync } from 'node:fs';

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Most bytes of each entry, minified and gzipped, with its dependencies. */
const BUDGET_BYTES = { studio: 10 * 1024, statewire: 20 * 1024 };

test('publint finds nothing wrong with the exports', async () => {
  const { messages, pkg } = await publint({ pkgDir: PACKAGE, level: 'suggestion', strict: true });
  const text = messages.map((m) => `${m.type}: ${formatMessage(m, pkg)}`);
  assert.deepEqual(text, []);
});

for (const [entry, budget] of Object.entries(BUDGET_BYTES)) {
  test(`/${entry} bundles to at most ${budget / 1024} KB minified and gzipped`, async () => {
    const result = await build({
      entryPoints: [join(PACKAGE, 'src', `${entry}.js`)], bundle: true, minify: true, format: 'esm',
      platform: 'browser', write: false, logLevel: 'silent',
    });
    const bytes = gzipSync(result.outputFiles[0].contents, { level: 9 }).length;
    console.log(`/${entry}: ${result.outputFiles[0].contents.length} B minified, ${bytes} B gzipped`);
    assert.ok(bytes <= budget, `/${entry} is ${bytes} B gzipped, over ${budget}`);
  });
}

test('importing and constructing touches no DOM or storage (safe under server rendering)', async () => {
  const touched = [];
  for (const name of ['localStorage', 'sessionStorage', 'document', 'window', 'location']) {
    Object.defineProperty(globalThis, name, { configurable: true, get() { touched.push(name); return undefined; } });
  }
  try {
    const all = await import('../src/index.js');
    await import('../src/react.js');
    const studio = new all.StudioClient({ token: 't' }).conversation('c1');
    const session = new all.LocalStorageSession({ principal: 'p', threadId: 't1' });
    const client = new all.StatewireClient({
      applicationProtocols: [{ name: 'harness-sdk', version: '2026-12-01' }],
      transport: all.StatewireHttp({ url: '/threads/t1' }),
      storage: { session },
    });
    new all.HarnessClient({ conversationId: 'c1' });
    assert.equal(studio.getSnapshot().status, 'idle');
    assert.equal(client.getSnapshot().status, 'idle');
    assert.deepEqual(touched, []);
  } finally {
    for (const name of ['localStorage', 'sessionStorage', 'document', 'window', 'location']) delete globalThis[name];
  }
});

test('the React hooks render the stores\' snapshots on the server', async () => {
  const { createElement } = await import('react');
  const { renderToString } = await import('react-dom/server');
  const { useConversation, useStatewireClient, useStatewireDocument } = await import('../src/react.js');
  const { StudioClient } = await import('../src/studio.js');
  const { StatewireClient, StatewireHttp } = await import('../src/statewire.js');
  const conversation = new StudioClient({ token: 't' }).conversation('c1');
  const client = new StatewireClient({ applicationProtocols: '*', transport: StatewireHttp({ url: 'http://127.0.0.1:9/threads/t1' }) });
  function View() {
    const state = useConversation(conversation);
    const statewire = useStatewireClient(client);
    const main = useStatewireDocument(client, 'harness-sdk');
    return createElement('p', null, `${state.status}/${statewire.status}/${main === undefined ? 'none' : 'main'}`);
  }
  assert.equal(renderToString(createElement(View)), '<p>idle/idle/none</p>');
});

test('the package names React only as an optional peer', () => {
  const pkg = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8'));
  assert.deepEqual(Object.keys(pkg.dependencies).sort(), ['eventsource-parser', 'structured-headers']);
  assert.equal(pkg.peerDependenciesMeta.react.optional, true);
});

test('web/vendor/ holds what `npm run vendor` bundles from the locked dependencies', async () => {
  const { vendor, VENDOR } = await import('../scripts/vendor.js');
  for (const [name, text] of await vendor()) {
    assert.equal(readFileSync(join(VENDOR, name), 'utf8'), text, `web/vendor/${name} is stale: run npm run vendor`);
  }
});

test('types/ holds the declarations the sources give (run `npm run types` when this fails)', async () => {
  const { emit, TYPES } = await import('../scripts/types.js');
  const { mkdtempSync, readdirSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const fresh = mkdtempSync(join(tmpdir(), 'lw-types-'));
  try {
    emit(fresh);
    const list = (/** @type {string} */ dir) => readdirSync(dir, { recursive: true }).map(String).filter((f) => f.endsWith('.d.ts')).sort();
    assert.deepEqual(list(TYPES), list(fresh));
    for (const file of list(fresh)) assert.equal(readFileSync(join(TYPES, file), 'utf8'), readFileSync(join(fresh, file), 'utf8'), file);
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
});
