// markdown.js — assistant text (GitHub-flavoured Markdown, delta 15) as
// DOM nodes, safely.
// Owns: a GFM subset written here: ATX headings, paragraphs and line
// breaks, emphasis, strong, strikethrough, inline and fenced code, block
// quotes, ordered, bullet and task lists (nested), tables with alignment,
// thematic breaks, links and autolinks with safe schemes.
// Must never: produce HTML text. Every piece of message text becomes a
// Text node (the escaping step is the DOM's own), raw HTML in a message
// shows as the characters it is, an image is shown as its alt text (the
// page loads nothing a message names), and a link is made only for
// http, https and mailto URLs.

import { h } from './dom.js';

/** Characters of one message the renderer reads; the rest shows as plain text. */
export const MAX_MARKDOWN_CHARS = 200_000;
/** Block quotes and lists nest at most this deep; deeper ones stay text. */
export const MAX_NESTING = 8;

const SAFE_SCHEMES = new Set(['http:', 'https:', 'mailto:']);

/** `raw` as a link target when its scheme is safe, else null. */
export function safeUrl(raw) {
  const text = String(raw ?? '').trim();
  if (!/^(https?:\/\/|mailto:)/i.test(text)) return null;
  try {
    const url = new URL(text);
    return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

/** The message `text` as a DocumentFragment. */
export function renderMarkdown(text) {
  const source = String(text ?? '');
  const fragment = document.createDocumentFragment();
  const head = source.slice(0, MAX_MARKDOWN_CHARS);
  fragment.append(...blocks(head.replace(/\r\n?/g, '\n').split('\n'), 0));
  if (source.length > MAX_MARKDOWN_CHARS) fragment.append(h('p', {}, source.slice(MAX_MARKDOWN_CHARS)));
  return fragment;
}

// ---- blocks ---------------------------------------------------------------

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,12})([-*+]|\d{1,9}[.)])([ \t]+(.*))?$/;
const DELIMITER_ROW = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

const blank = (line) => line.trim() === '';
const indentOf = (line) => line.match(/^ */)[0].length;

function startsBlock(line, next) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)
    || (ITEM.test(line) && !blank(line.replace(ITEM, '$4')))
    || (line.includes('|') && next !== undefined && DELIMITER_ROW.test(next) && next.includes('-'));
}

function blocks(lines, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (blank(line)) { i += 1; continue; }
    let m;
    if ((m = line.match(FENCE))) {
      const fence = m[1];
      const body = [];
      i += 1;
      while (i < lines.length && !new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`).test(lines[i])) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1;
      const code = h('code', {}, body.join('\n'));
      if (/^[\w+-]{1,32}$/.test(m[2])) code.className = `language-${m[2]}`;
      out.push(h('pre', {}, code));
      continue;
    }
    if ((m = line.match(HEADING))) {
      const level = Math.min(6, m[1].length + 2);
      out.push(h(`h${level}`, {}, inline(m[2] ?? '', 0)));
      i += 1;
      continue;
    }
    if (RULE.test(line)) { out.push(h('hr')); i += 1; continue; }
    if (line.includes('|') && i + 1 < lines.length && DELIMITER_ROW.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      const parsed = table(lines, i);
      if (parsed) { out.push(parsed.node); i = parsed.next; continue; }
    }
    if (QUOTE.test(line) && depth < MAX_NESTING) {
      const inner = [];
      while (i < lines.length && !blank(lines[i])) {
        const q = lines[i].match(QUOTE);
        if (q) inner.push(q[1]);
        else if (startsBlock(lines[i], lines[i + 1])) break;
        else inner.push(lines[i]);
        i += 1;
      }
      out.push(h('blockquote', {}, blocks(inner, depth + 1)));
      continue;
    }
    if ((m = line.match(ITEM)) && !blank(m[4] ?? '') && depth < MAX_NESTING) {
      const parsed = list(lines, i, depth);
      out.push(parsed.node);
      i = parsed.next;
      continue;
    }
    const para = [];
    while (i < lines.length && !blank(lines[i]) && (para.length === 0 || !startsBlock(lines[i], lines[i + 1]))) {
      para.push(lines[i]);
      i += 1;
    }
    out.push(h('p', {}, inline(para.map((l) => l.replace(/^ +/, '')).join('\n'), 0)));
  }
  return out;
}

function list(lines, start, depth) {
  const first = lines[start].match(ITEM);
  const ordered = /\d/.test(first[2]);
  const baseIndent = first[1].length;
  const node = ordered ? h('ol') : h('ul');
  if (ordered) {
    const n = parseInt(first[2], 10);
    if (n !== 1) node.setAttribute('start', String(n));
  }
  let i = start;
  let loose = false;
  const items = [];
  while (i < lines.length) {
    const m = lines[i].match(ITEM);
    if (!m || blank(m[4] ?? '') || m[1].length !== baseIndent || /\d/.test(m[2]) !== ordered) break;
    const contentIndent = m[1].length + m[2].length + (m[3].length - (m[4] ?? '').length);
    const content = [m[4]];
    i += 1;
    while (i < lines.length) {
      const line = lines[i];
      if (blank(line)) {
        let j = i + 1;
        while (j < lines.length && blank(lines[j])) j += 1;
        if (j < lines.length && indentOf(lines[j]) >= contentIndent) {
          content.push('');
          i += 1;
          loose = true;
          continue;
        }
        break;
      }
      if (indentOf(line) >= contentIndent) { content.push(line.slice(contentIndent)); i += 1; continue; }
      if (ITEM.test(line) && !blank(line.replace(ITEM, '$4'))) break;
      if (startsBlock(line, lines[i + 1])) break;
      content.push(line.trim());
      i += 1;
    }
    items.push(content);
    // A blank line between items makes the list loose.
    if (i < lines.length && blank(lines[i])) {
      let j = i;
      while (j < lines.length && blank(lines[j])) j += 1;
      const next = j < lines.length ? lines[j].match(ITEM) : null;
      if (next && next[1].length === baseIndent && /\d/.test(next[2]) === ordered) { loose = true; i = j; }
    }
  }
  for (const content of items) {
    const li = h('li');
    const task = content[0].match(/^\[( |x|X)\][ \t]+(.*)$/);
    if (task) {
      content[0] = task[2];
      li.className = 'task';
      li.append(h('input', { type: 'checkbox', disabled: true, checked: task[1] !== ' ', 'aria-label': task[1] !== ' ' ? 'done' : 'not done' }), ' ');
    }
    const children = blocks(content, depth + 1);
    if (!loose && children.length > 0 && children[0].tagName === 'P') {
      li.append(...children[0].childNodes, ...children.slice(1));
    } else {
      li.append(...children);
    }
    node.append(li);
  }
  return { node, next: i };
}

function cells(line) {
  let text = line.trim();
  if (text.startsWith('|')) text = text.slice(1);
  if (text.endsWith('|') && !text.endsWith('\\|')) text = text.slice(0, -1);
  const out = [];
  let cell = '';
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === '\\' && text[i + 1] === '|') { cell += '|'; i += 1; continue; }
    if (text[i] === '|') { out.push(cell.trim()); cell = ''; continue; }
    cell += text[i];
  }
  out.push(cell.trim());
  return out;
}

function table(lines, start) {
  const header = cells(lines[start]);
  const aligns = cells(lines[start + 1]).map((d) => {
    const left = d.startsWith(':');
    const right = d.endsWith(':');
    return left && right ? 'center' : right ? 'right' : left ? 'left' : null;
  });
  if (aligns.length !== header.length) return null;
  const row = (values, tag) => h('tr', {}, header.map((_, c) => {
    const cell = h(tag, {}, inline(values[c] ?? '', 0));
    if (aligns[c]) cell.style.textAlign = aligns[c];
    return cell;
  }));
  const body = [];
  let i = start + 2;
  while (i < lines.length && !blank(lines[i]) && lines[i].includes('|') && !startsBlock(lines[i], undefined)) {
    body.push(row(cells(lines[i]), 'td'));
    i += 1;
  }
  const node = h('table', {}, h('thead', {}, row(header, 'th')), body.length ? h('tbody', {}, body) : null);
  return { node, next: i };
}

// ---- inline ---------------------------------------------------------------

const PUNCTUATION = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/;
const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0', ndash: '–', mdash: '—', hellip: '…', middot: '·', times: '×', copy: '©' };
const BARE_URL = /^(https?:\/\/[^\s<>]*[^\s<>.,:;"')\]!?*_~])/i;

function decodeEntity(text, i) {
  const m = text.slice(i).match(/^&(#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});/);
  if (!m) return null;
  const name = m[1];
  let char = null;
  if (name[0] === '#') {
    const code = name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
    if (code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff)) char = String.fromCodePoint(code);
  } else if (Object.hasOwn(ENTITIES, name)) {
    char = ENTITIES[name];
  }
  return char === null ? null : { char, length: m[0].length };
}

/** The closing index of a delimiter run `delim` opened at `from`, or -1. */
function closer(text, delim, from) {
  let j = from;
  while (j < text.length) {
    const k = text.indexOf(delim, j);
    if (k < 0) return -1;
    if (k > from && !/\s/.test(text[k - 1]) && text[k - 1] !== '\\') {
      // `_` closes only at a word's end.
      if (delim[0] !== '_' || !/\w/.test(text[k + delim.length] ?? '')) return k;
    }
    j = k + 1;
  }
  return -1;
}

function link(text, i, depth) {
  // [label](url "title") — brackets may nest once.
  let level = 0;
  let close = -1;
  for (let j = i; j < text.length; j += 1) {
    if (text[j] === '\\') { j += 1; continue; }
    if (text[j] === '[') level += 1;
    else if (text[j] === ']') { level -= 1; if (level === 0) { close = j; break; } }
  }
  if (close < 0 || text[close + 1] !== '(') return null;
  const end = text.indexOf(')', close + 2);
  if (end < 0) return null;
  const target = text.slice(close + 2, end).trim().match(/^<?([^\s>]*)>?(?:\s+"([^"]*)")?$/);
  if (!target) return null;
  return { label: text.slice(i + 1, close), url: target[1], title: target[2], next: end + 1, depth };
}

function anchor(href, children, title) {
  return h('a', { href, title, target: '_blank', rel: 'noopener noreferrer nofollow' }, children);
}

/** Inline Markdown of `text` as nodes. */
export function inline(text, depth) {
  const out = [];
  let plain = '';
  const flush = () => { if (plain) { out.push(document.createTextNode(plain)); plain = ''; } };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && i + 1 < text.length && PUNCTUATION.test(text[i + 1])) { plain += text[i + 1]; i += 2; continue; }
    if (c === '\\' && text[i + 1] === '\n') { flush(); out.push(h('br')); i += 2; continue; }
    if (c === '\n') {
      const hard = plain.endsWith('  ');
      plain = plain.replace(/ +$/, '');
      flush();
      out.push(hard ? h('br') : document.createTextNode(' '));
      i += 1;
      continue;
    }
    if (c === '`') {
      const run = text.slice(i).match(/^`+/)[0];
      const end = text.indexOf(run, i + run.length);
      if (end >= 0) {
        flush();
        const code = text.slice(i + run.length, end).replace(/\n/g, ' ');
        out.push(h('code', {}, code.length > 2 && code.startsWith(' ') && code.endsWith(' ') ? code.slice(1, -1) : code));
        i = end + run.length;
        continue;
      }
      plain += run;
      i += run.length;
      continue;
    }
    if (c === '&') {
      const entity = decodeEntity(text, i);
      if (entity) { plain += entity.char; i += entity.length; continue; }
    }
    if (depth < MAX_NESTING && (c === '*' || c === '_' || c === '~')) {
      const run = text.slice(i).match(c === '~' ? /^~~/ : c === '*' ? /^\*{1,3}/ : /^_{1,3}/)?.[0];
      const opensWord = c !== '_' || i === 0 || !/\w/.test(text[i - 1]);
      if (run && opensWord && text[i + run.length] && !/\s/.test(text[i + run.length])) {
        const end = closer(text, run, i + run.length);
        if (end > i + run.length - 1) {
          flush();
          const inner = inline(text.slice(i + run.length, end), depth + 1);
          if (c === '~') out.push(h('del', {}, inner));
          else if (run.length === 3) out.push(h('strong', {}, h('em', {}, inner)));
          else if (run.length === 2) out.push(h('strong', {}, inner));
          else out.push(h('em', {}, inner));
          i = end + run.length;
          continue;
        }
      }
      if (run) { plain += run; i += run.length; continue; }
    }
    if (c === '!' && text[i + 1] === '[') {
      const parsed = link(text, i + 1, depth);
      if (parsed) {
        // An image: its alt text only; the page never loads what a message names.
        flush();
        out.push(h('span', { class: 'img-alt', title: 'image not loaded' }, inline(parsed.label, depth + 1)));
        i = parsed.next;
        continue;
      }
    }
    if (c === '[' && depth < MAX_NESTING) {
      const parsed = link(text, i, depth);
      if (parsed) {
        flush();
        const href = safeUrl(parsed.url);
        const label = inline(parsed.label, depth + 1);
        out.push(href ? anchor(href, label, parsed.title) : h('span', {}, label));
        i = parsed.next;
        continue;
      }
    }
    if (c === '<') {
      const m = text.slice(i).match(/^<((?:https?:\/\/|mailto:)[^\s<>]+)>/i);
      const href = m && safeUrl(m[1]);
      if (href) { flush(); out.push(anchor(href, m[1])); i += m[0].length; continue; }
    }
    if ((c === 'h' || c === 'H') && (i === 0 || /[\s(*_~]/.test(text[i - 1]))) {
      const m = text.slice(i).match(BARE_URL);
      const href = m && safeUrl(m[1]);
      if (href) { flush(); out.push(anchor(href, m[1])); i += m[1].length; continue; }
    }
    plain += c;
    i += 1;
  }
  flush();
  return out;
}
