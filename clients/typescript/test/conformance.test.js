// The conformance vectors in tests/conformance/: JSON Patch cases through
// Statepatch (the ops the client applies to its documents), and the
// structured-field cases through the field readers the client uses.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import test from 'node:test';
import { DisplayString, Token, parseItem, parseList } from 'structured-headers';
import { applyPatch } from '../src/statewire/statepatch.js';
import { readProtocolField, readVersionField } from '../src/statewire/negotiation.js';
import { REPO } from './support.js';

const CONFORMANCE = join(REPO, 'tests', 'conformance');

/** `/a/0` as Statepatch's steps. @param {string} pointer */
function steps(pointer) {
  if (pointer === '') return [];
  if (!pointer.startsWith('/') || /~[^01]|~$/.test(pointer)) throw new Error(`not a JSON Pointer: ${pointer}`);
  return pointer.slice(1).split('/').map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
}

test('JSON Patch cases of add, remove and replace apply through Statepatch', () => {
  let run = 0;
  let outside = 0;
  for (const file of ['tests.json', 'spec_tests.json']) {
    const cases = JSON.parse(readFileSync(join(CONFORMANCE, 'json-patch-tests', file), 'utf8'));
    for (const c of cases) {
      if (c.disabled) continue;
      if (!Array.isArray(c.patch) || c.patch.some((op) => !['add', 'remove', 'replace'].includes(op.op))) { outside += 1; continue; }
      const ops = () => c.patch.map((op) => ({ ...op, path: typeof op.path === 'string' ? steps(op.path) : op.path }));
      const before = JSON.stringify(c.doc);
      if (c.error !== undefined) {
        assert.throws(() => applyPatch(c.doc, ops()), `${file}: ${c.comment ?? c.error}`);
      } else if (c.expected !== undefined) {
        assert.deepEqual(applyPatch(c.doc, ops()), c.expected, `${file}: ${c.comment}`);
      } else {
        applyPatch(c.doc, ops());
      }
      assert.equal(JSON.stringify(c.doc), before, 'the input document is never changed');
      run += 1;
    }
  }
  assert.ok(run > 60, `ran ${run} cases (${outside} use move, copy or test)`);
});

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
/** @param {ArrayBuffer} buffer */
function base32(buffer) {
  const bytes = new Uint8Array(buffer);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) { out += BASE32[(value >>> (bits - 5)) & 31]; bits -= 5; }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  while (out.length % 8) out += '=';
  return out;
}

/** A parsed bare item in the vectors' notation. @param {any} value */
function bare(value) {
  if (value instanceof Token) return { __type: 'token', value: value.toString() };
  if (value instanceof DisplayString) return { __type: 'displaystring', value: value.toString() };
  if (value instanceof Date) return { __type: 'date', value: value.getTime() / 1000 };
  if (value instanceof ArrayBuffer) return { __type: 'binary', value: base32(value) };
  return value;
}
/** @param {Map<string, any>} params */
const params = (params) => [...params].map(([k, v]) => [k, bare(v)]);
/** @param {any} member */
const member = ([value, p]) => (Array.isArray(value) ? [value.map(member), params(p)] : [bare(value), params(p)]);

test('structured-field list and item cases: parsed as the vectors say, or refused', () => {
  let lists = 0;
  let items = 0;
  // A JavaScript Date holds ±8.64e12 s; the vectors' syntactic limits lie past it.
  let beyondDates = 0;
  for (const file of readdirSync(join(CONFORMANCE, 'structured-field-tests')).filter((f) => f.endsWith('.json'))) {
    const cases = JSON.parse(readFileSync(join(CONFORMANCE, 'structured-field-tests', file), 'utf8'));
    for (const c of cases) {
      if (c.header_type !== 'list' && c.header_type !== 'item') continue;
      const raw = c.raw.join(', ');
      const parse = c.header_type === 'list' ? () => parseList(raw).map(member) : () => member(parseItem(raw));
      if (c.must_fail) {
        assert.throws(parse, `${file}: ${c.name} must fail`);
        // The client's own readers refuse it too.
        assert.throws(() => (c.header_type === 'list' ? readProtocolField(raw) : readVersionField(raw)), `${file}: ${c.name}`);
      } else if (c.expected?.[0]?.__type === 'date' && Math.abs(c.expected[0].value) > 8.64e12) {
        beyondDates += 1;
      } else {
        const normalise = (/** @type {any} */ v) => JSON.parse(JSON.stringify(v, (_k, x) => (x?.__type === 'binary' ? { __type: 'binary', value: x.value.replace(/=+$/, '') } : x)));
        assert.deepEqual(normalise(parse()), normalise(c.expected), `${file}: ${c.name}`);
      }
      if (c.header_type === 'list') lists += 1;
      else items += 1;
    }
  }
  assert.ok(lists > 100 && items > 100, `${lists} list and ${items} item cases`);
  assert.ok(beyondDates <= 2, `${beyondDates} dates past what a JavaScript Date holds`);
});

test('the client reads back the offers it writes', () => {
  assert.deepEqual(readProtocolField('harness-sdk; version="2026-12-01"; min-version="2026-11-15", acme-chat; version="2026-09-13"; optional'),
    [{ name: 'harness-sdk', version: '2026-12-01', minVersion: '2026-11-15' }, { name: 'acme-chat', version: '2026-09-13', optional: true }]);
  assert.equal(readProtocolField('*'), '*');
  assert.throws(() => readProtocolField('*; version="2026-01-01"'));
  assert.throws(() => readProtocolField('harness-sdk'), /no version/);
  assert.deepEqual(readVersionField('"2026-11-02"; min-version="2026-11-01"'), { version: '2026-11-02', minVersion: '2026-11-01' });
});
