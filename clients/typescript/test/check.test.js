// The JSDoc types hold: `tsc --noEmit` over the package's sources.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'node:test';

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), '..');

test('tsc --noEmit finds no type error in src/', () => {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '--noEmit', '-p', PACKAGE], { encoding: 'utf8', cwd: PACKAGE });
  assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
});

test('a TypeScript app gets the package\'s types through its exports', () => {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', join(PACKAGE, 'test', 'consumer')], { encoding: 'utf8', cwd: PACKAGE });
  assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
});
