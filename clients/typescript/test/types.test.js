// The committed generated types are what the server's schema generates now.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import test from 'node:test';
import { generate, OUTPUT } from '../scripts/gen-types.js';
import { binary } from './support.js';

test('src/studio-wire.d.ts is what `ledgerwire schema` generates (run `npm run gen` when this fails)', async () => {
  const schema = execFileSync(binary(), ['schema'], { encoding: 'utf8' });
  const fresh = await generate(schema);
  assert.equal(readFileSync(OUTPUT, 'utf8'), fresh);
  // Every frame of the contract and the reconnect extension are there.
  for (const name of ['Frame', 'StudioRequest', 'ReconnectRequest', 'PlanProposed', 'ElicitationRequest', 'WireError']) {
    assert.match(fresh, new RegExp(`export (type|interface) ${name}\\b`), name);
  }
  const events = [...fresh.matchAll(/event: "([a-z.]+)"/g)].map((m) => m[1]);
  assert.equal(new Set(events).size, 13, `thirteen frames: ${[...new Set(events)]}`);
});
