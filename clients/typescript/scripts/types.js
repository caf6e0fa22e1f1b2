// Writes the package's declarations into types/ (tsc over the JSDoc of
// src/, plus the generated wire types), for TypeScript users.
// Usage: npm run types. `emit(dir)` is also what the test compares the
// committed folder against.

import { spawnSync } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), '..');
export const TYPES = join(PACKAGE, 'types');

/** Emits every declaration into `dir` (emptied first). @param {string} dir */
export function emit(dir) {
  rmSync(dir, { recursive: true, force: true });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', join(PACKAGE, 'tsconfig.types.json'), '--outDir', dir], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`tsc failed:\n${run.stdout}${run.stderr}`);
  copyFileSync(join(PACKAGE, 'src', 'studio-wire.d.ts'), join(dir, 'studio-wire.d.ts'));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  emit(TYPES);
  console.log(`wrote ${TYPES}`);
}
