// markdown.js — the assistant's Markdown (GFM) as DOM nodes, parsed by
// markdown-it (vendored in web/vendor/, raw HTML off) and built here from
// its token stream.
// Owns: the parser's settings and the token → element mapping: headings,
// paragraphs and breaks, emphasis, strikethrough, code, quotes, lists
// (task items too), tables with alignment, rules, links and bare URLs.
// Must never: produce markup from text (every piece of text becomes a
// Text node, so the escaping is the browser's), make a link to anything
// but http, https or mailto, or load an image a message names.

import MarkdownIt from 'markdown-it';
import { h } from './dom.js';

/** Characters of one message rendered as Markdown; the rest shows as plain text. */
export const MAX_MARKDOWN_CHARS = 200_000;
/** Deepest nesting of blocks and inline marks markdown-it builds. */
export const MAX_NESTING = 20;

const SAFE_SCHEMES = new Set(['http:', 'https:', 'mailto:']);

let parser = null;
function markdown() {
  parser ??= new MarkdownIt('default', { html: false, linkify: true, typographer: false, breaks: false, maxNesting: MAX_NESTING });
  parser.validateLink = (url) => safeUrl(url) !== null;
  return parser;
}

/** `raw` when it is an http, https or mailto URL; null otherwise. */
export function safeUrl(raw) {
  try {
    const url = new URL(raw, 'invalid://relative/');
    return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

const BLOCK_TAGS = {
  paragraph_open: 'p', blockquote_open: 'blockquote', bullet_list_open: 'ul', ordered_list_open: 'ol',
  list_item_open: 'li', table_open: 'table', thead_open: 'thead', tbody_open: 'tbody', tr_open: 'tr',
  th_open: 'th', td_open: 'td',
};
const INLINE_TAGS = { strong_open: 'strong', em_open: 'em', s_open: 'del' };

function cell(el, token) {
  const style = token.attrGet('style') ?? '';
  const align = /text-align:\s*(left|right|center)/.exec(style);
  if (align) el.style.textAlign = align[1];
}

/** Inline tokens (a paragraph's children) into `parent`. */
function inline(parent, tokens) {
  const stack = [parent];
  const top = () => stack[stack.length - 1];
  for (const token of tokens) {
    const tag = INLINE_TAGS[token.type];
    if (tag) { const el = h(tag); top().append(el); stack.push(el); continue; }
    switch (token.type) {
      case 'strong_close': case 'em_close': case 's_close': case 'link_close':
        if (stack.length > 1) stack.pop();
        break;
      case 'link_open': {
        const href = safeUrl(token.attrGet('href') ?? '');
        const el = href ? h('a', { href, target: '_blank', rel: 'noopener noreferrer nofollow' }) : h('span');
        top().append(el);
        stack.push(el);
        break;
      }
      case 'text': top().append(token.content); break;
      case 'code_inline': top().append(h('code', {}, token.content)); break;
      case 'softbreak': top().append('\n'); break;
      case 'hardbreak': top().append(h('br')); break;
      case 'image': top().append(h('span', { class: 'img-alt', title: 'image not loaded' }, token.content || 'image')); break;
      default: if (token.content) top().append(token.content);
    }
  }
}

/** A list item that opens with `[ ]` or `[x]` becomes a task. */
function taskItem(li) {
  const text = li.querySelector('p')?.firstChild ?? li.firstChild;
  if (!(text instanceof Text)) return;
  const match = /^\[([ xX])\]\s+/.exec(text.data);
  if (!match) return;
  text.data = text.data.slice(match[0].length);
  li.classList.add('task');
  const box = h('input', { type: 'checkbox', disabled: true });
  box.checked = match[1] !== ' ';
  text.before(box, ' ');
}

/** The nodes of `text` rendered as Markdown, in one fragment. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const source = String(text ?? '');
  const head = source.slice(0, MAX_MARKDOWN_CHARS);
  let tokens;
  try {
    tokens = markdown().parse(head, {});
  } catch {
    fragment.append(h('p', {}, source));
    return fragment;
  }
  const stack = [fragment];
  const top = () => stack[stack.length - 1];
  for (const token of tokens) {
    const tag = BLOCK_TAGS[token.type];
    if (tag) {
      const el = h(tag);
      if (tag === 'th' || tag === 'td') cell(el, token);
      if (tag === 'ol' && token.attrGet('start')) el.setAttribute('start', token.attrGet('start'));
      top().append(el);
      stack.push(el);
      continue;
    }
    if (token.type === 'heading_open') {
      // The page's own headings sit above: a message's # is an h3.
      const el = h(`h${Math.min(6, Number(token.tag.slice(1)) + 2)}`);
      top().append(el);
      stack.push(el);
      continue;
    }
    if (token.type.endsWith('_close')) {
      const closed = stack.length > 1 ? stack.pop() : null;
      if (closed?.tagName === 'LI') taskItem(closed);
      continue;
    }
    switch (token.type) {
      case 'inline': inline(top(), token.children ?? []); break;
      case 'fence':
      case 'code_block': {
        const language = (token.info ?? '').trim().split(/\s+/)[0];
        top().append(h('pre', {}, h('code', { class: language ? `language-${language}` : null }, token.content.replace(/\n$/, ''))));
        break;
      }
      case 'hr': top().append(h('hr')); break;
      default: if (token.content) top().append(token.content);
    }
  }
  if (source.length > MAX_MARKDOWN_CHARS) fragment.append(h('p', { class: 'truncated' }, source.slice(MAX_MARKDOWN_CHARS)));
  return fragment;
}
