// Bundles the package's dependencies (and markdown-it, the page's
// Markdown renderer) as single ES modules into the repository's
// web/vendor/, each beside the licences of every package it holds, so
// the web Studio loads nothing from anywhere but its own server.
// Usage: npm run vendor. `vendor()` is also what the test compares the
// committed files against.

import { readFileSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const PACKAGE = join(here, '..');
export const VENDOR = join(PACKAGE, '..', '..', 'web', 'vendor');
/** The modules the page imports by bare name. */
export const MODULES = ['eventsource-parser', 'structured-headers', 'markdown-it'];

/** The package directory holding `file`. @param {string} file */
function packageOf(file) {
  let dir = dirname(join(PACKAGE, file));
  while (!existsSync(join(dir, 'package.json')) || !JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name) dir = dirname(dir);
  return dir;
}

/** @param {string} dir */
function licence(dir) {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const file = ['LICENSE', 'LICENSE.md', 'LICENSE.txt', 'license'].map((name) => join(dir, name)).find(existsSync);
  const text = file ? readFileSync(file, 'utf8').trim() : `${pkg.license} (the package ships no licence file)`;
  return `${pkg.name} ${pkg.version} — ${pkg.license}\n\n${text}\n`;
}

/** Every vendored file's name and text. @returns {Promise<Map<string, string>>} */
export async function vendor() {
  const files = new Map();
  for (const name of MODULES) {
    const result = await build({
      stdin: { contents: `export * from '${name}';${name === 'markdown-it' ? `\nexport { default } from '${name}';` : ''}`, resolveDir: PACKAGE, loader: 'js' },
      bundle: true, format: 'esm', platform: 'browser', minify: true, legalComments: 'none',
      write: false, metafile: true, logLevel: 'silent', target: 'es2022',
    });
    const held = [...new Set(Object.keys(result.metafile.inputs).filter((f) => f.includes('node_modules')).map(packageOf))].sort();
    const header = `// ${name}, bundled by clients/typescript/scripts/vendor.js; licences in ${name}.LICENSE.txt.\n`;
    files.set(`${name}.js`, header + result.outputFiles[0].text);
    files.set(`${name}.LICENSE.txt`, held.map(licence).join('\n---\n\n'));
  }
  return files;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  mkdirSync(VENDOR, { recursive: true });
  for (const [name, text] of await vendor()) writeFileSync(join(VENDOR, name), text);
  console.log(`wrote ${VENDOR}`);
}
