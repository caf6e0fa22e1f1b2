// store.js — what the browser remembers between visits: the token, each
// token's conversation list with the names given locally, the open
// conversation and the auto-add toggle.
// Owns: localStorage keys under `ledgerwire.`. Must never: keep a
// conversation's content (the server's log is the one copy; a reload
// reads it back), or share one token's list with another token.

const PREFIX = 'ledgerwire.';
/** Conversations one token's list keeps; the oldest fall off. */
export const MAX_CONVERSATIONS_KEPT = 200;
/** Characters a local conversation name keeps. */
export const MAX_NAME_CHARS = 120;

function read(key, fallback) {
  try {
    const text = localStorage.getItem(PREFIX + key);
    return text === null ? fallback : JSON.parse(text);
  } catch {
    return fallback;
  }
}

function write(key, value) {
  try {
    localStorage.setItem(PREFIX + key, JSON.stringify(value));
  } catch {
    // Storage full or disabled: the page works, it only forgets.
  }
}

/** FNV-1a of the token: a key for its list (not a secret, not a digest). */
function tag(token) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < token.length; i += 1) {
    hash ^= token.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}

export function token() { return read('token', ''); }
export function setToken(value) { write('token', value); }

export function autoAdd() { return read('autoAdd', true) !== false; }
export function setAutoAdd(value) { write('autoAdd', Boolean(value)); }

/** The conversations of `token`, newest first: `[{id, name, created_ms}]`. */
export function conversations(tokenValue) {
  const list = read(`conversations.${tag(tokenValue)}`, []);
  return Array.isArray(list) ? list.filter((c) => c && typeof c.id === 'string') : [];
}

function saveConversations(tokenValue, list) {
  write(`conversations.${tag(tokenValue)}`, list.slice(0, MAX_CONVERSATIONS_KEPT));
}

/** A fresh conversation id: `c-` and 16 random hex digits. */
export function mintId() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return `c-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * Adds `id` to the front of the list (if absent) and returns the list.
 * `started`: whether the server may already hold it (false only for an id
 * this browser has just minted).
 */
export function remember(tokenValue, id, name, started = true) {
  const list = conversations(tokenValue);
  if (!list.some((c) => c.id === id)) {
    list.unshift({ id, name: (name || 'New conversation').slice(0, MAX_NAME_CHARS), created_ms: Date.now(), started });
    saveConversations(tokenValue, list);
  }
  return list;
}

export function rename(tokenValue, id, name) {
  const list = conversations(tokenValue);
  const entry = list.find((c) => c.id === id);
  if (entry) {
    entry.name = name.trim().slice(0, MAX_NAME_CHARS) || entry.name;
    entry.named = true;
    saveConversations(tokenValue, list);
  }
  return list;
}

/** Whether `id` is a conversation this browser minted and never asked in
 * (the server holds nothing for it yet, so there is nothing to read back). */
export function unstarted(tokenValue, id) {
  const entry = conversations(tokenValue).find((c) => c.id === id);
  return Boolean(entry && !entry.started);
}

/** Notes that a question was sent in `id`. */
export function markStarted(tokenValue, id) {
  const list = conversations(tokenValue);
  const entry = list.find((c) => c.id === id);
  if (entry && !entry.started) {
    entry.started = true;
    saveConversations(tokenValue, list);
  }
}

/** Names a conversation after its first question, unless the user named it. */
export function nameFromQuestion(tokenValue, id, question) {
  const list = conversations(tokenValue);
  const entry = list.find((c) => c.id === id);
  if (entry && !entry.named && entry.name === 'New conversation') {
    entry.name = question.replace(/\s+/g, ' ').trim().slice(0, 60) || entry.name;
    saveConversations(tokenValue, list);
  }
  return list;
}

export function current(tokenValue) { return read(`current.${tag(tokenValue)}`, null); }
export function setCurrent(tokenValue, id) { write(`current.${tag(tokenValue)}`, id); }
