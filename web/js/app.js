// app.js — the page: the token, the conversation list, the composer, and
// which view shows (a conversation's chat and canvas, or its audit).
// Owns: wiring the modules together, one workspace (session, transcript,
// canvas) per open conversation, kept streaming while another one shows,
// and the routes of the address bar (`#/c/<id>`, `#/audit/<id>`,
// `#/inspect/<id>`).
// Must never: talk to the server except through the package's clients
// (a Session, a Canvas, the AuditView, the InspectorView), or keep a
// conversation's content (the log has it).

import { StudioClient } from '@ledgerwire/client/studio';
import { AuditView } from './audit.js';
import { InspectorView } from './inspector.js';
import { Canvas } from './canvas.js';
import { ChatView } from './chat.js';
import { h, replace } from './dom.js';
import { Session } from './session.js';
import * as store from './store.js';

/** Conversations kept open (streaming, drawn) at once; the least recent idle one closes. */
export const MAX_OPEN_CONVERSATIONS = 8;

const $ = (id) => document.getElementById(id);
const ui = {
  status: $('status'),
  tokenForm: $('token-form'),
  tokenInput: $('token-input'),
  studio: $('studio'),
  audit: $('audit'),
  auditBody: $('audit-body'),
  inspector: $('inspector'),
  inspectorBody: $('inspector-body'),
  list: $('conversation-list'),
  newButton: $('new-conversation'),
  transcripts: $('transcripts'),
  canvases: $('canvases'),
  composer: $('composer'),
  text: $('composer-text'),
  autoAdd: $('auto-add'),
  send: $('send'),
  stop: $('stop'),
  scope: $('scope'),
  scopeText: $('scope-text'),
  scopeClear: $('scope-clear'),
  viewChat: $('view-chat'),
  viewAudit: $('view-audit'),
  viewInspector: $('view-inspector'),
};

const studio = new StudioClient({ token: () => store.token() });
const audit = new AuditView({ studio, root: ui.auditBody });
const inspector = new InspectorView({ token: () => store.token(), root: ui.inspectorBody });
const workspaces = new Map();
let currentId = null;
let scope = null;

function announce(text) {
  ui.status.textContent = '';
  // A fresh text node each time, so the same words are announced again.
  requestAnimationFrame(() => { ui.status.textContent = text; });
}

function setScope(ref, title) {
  scope = ref ? { ref, title } : null;
  ui.scope.hidden = !scope;
  ui.scopeText.textContent = scope ? `${ref.intent === 'edit' ? 'Edit card' : 'Ask follow up'}: ${title}` : '';
  if (scope) {
    ui.text.placeholder = ref.intent === 'edit' ? 'How should the card change? (e.g. “only Kenya”, “as a bar chart”)' : 'What would you like to know about this card?';
    ui.text.focus();
  } else {
    ui.text.placeholder = 'Ask about a country\'s statistics… (Enter sends, Shift+Enter starts a new line)';
  }
}

function showBusy(busy) {
  ui.stop.hidden = !busy;
  ui.send.disabled = busy;
}

function workspace(id) {
  const open = workspaces.get(id);
  if (open) {
    workspaces.delete(id);
    workspaces.set(id, open);
    return open;
  }
  const canvas = new Canvas({ conversationId: id, scope: setScope });
  let session = null;
  const chat = new ChatView({
    conversationId: id,
    canvas,
    actions: {
      answer: (body) => session.respond(body),
      ask: (message, options) => send(id, message, options),
      edit: (text) => { ui.text.value = text; ui.text.focus(); },
      refresh: () => reopen(id),
      announce: (text) => { if (currentId === id) announce(text); },
    },
  });
  session = new Session({
    studio, conversationId: id, chat, canvas, announce,
    onBusy: (busy) => { if (currentId === id) showBusy(busy); },
  });
  const ws = { id, chat, canvas, session };
  ws.restored = store.unstarted(store.token(), id) ? Promise.resolve('new') : session.restore();
  workspaces.set(id, ws);
  for (const [other, entry] of workspaces) {
    if (workspaces.size <= MAX_OPEN_CONVERSATIONS) break;
    if (other !== id && !entry.session.busy) {
      entry.session.dispose();
      workspaces.delete(other);
    }
  }
  return ws;
}

function reopen(id) {
  const ws = workspaces.get(id);
  ws?.session.dispose();
  workspaces.delete(id);
  if (currentId === id) showConversation(id);
}

async function send(id, message, { componentRef, autoAdd } = {}) {
  const ws = workspace(id);
  await ws.restored;
  store.markStarted(store.token(), id);
  store.nameFromQuestion(store.token(), id, message);
  renderList();
  return ws.session.ask(message, { componentRef, autoAdd: autoAdd ?? ui.autoAdd.checked });
}

function renderList() {
  const token = store.token();
  const items = store.conversations(token).map((entry) => {
    const open = h('button', { type: 'button', class: 'open', 'aria-current': entry.id === currentId ? 'true' : null, title: entry.id, dataset: { conversationId: entry.id } }, entry.name);
    open.addEventListener('click', () => { location.hash = `#/c/${encodeURIComponent(entry.id)}`; });
    const rename = h('button', { type: 'button', class: 'rename', 'aria-label': `Rename ${entry.name}` }, 'Rename');
    const li = h('li', { dataset: { conversationId: entry.id } }, open, rename);
    rename.addEventListener('click', () => {
      const input = h('input', { type: 'text', maxlength: store.MAX_NAME_CHARS, 'aria-label': 'New name' });
      input.value = entry.name;
      const done = (save) => {
        if (save) store.rename(token, entry.id, input.value);
        renderList();
        ui.list.querySelector(`li[data-conversation-id="${CSS.escape(entry.id)}"] .rename`)?.focus();
      };
      input.addEventListener('keydown', (event) => {
        if (event.key === 'Enter') { event.preventDefault(); done(true); }
        if (event.key === 'Escape') done(false);
      });
      input.addEventListener('blur', () => { if (input.isConnected) done(true); });
      replace(li, input);
      input.focus();
      input.select();
    });
    return li;
  });
  replace(ui.list, items);
}

/** Shows one of the three views (`chat`, `audit`, `inspector`) for `id`. */
function showView(view, id) {
  if (view !== 'inspector') inspector.hide();
  ui.studio.hidden = view !== 'chat';
  ui.audit.hidden = view !== 'audit';
  ui.inspector.hidden = view !== 'inspector';
  for (const [name, link] of [['chat', ui.viewChat], ['audit', ui.viewAudit], ['inspector', ui.viewInspector]]) {
    if (name === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (id) {
    ui.viewChat.href = `#/c/${encodeURIComponent(id)}`;
    ui.viewAudit.href = `#/audit/${encodeURIComponent(id)}`;
    ui.viewInspector.href = `#/inspect/${encodeURIComponent(id)}`;
  }
}

function showConversation(id) {
  if (id !== currentId) ui.status.textContent = '';
  currentId = id;
  const token = store.token();
  store.remember(token, id);
  store.setCurrent(token, id);
  showView('chat', id);
  const ws = workspace(id);
  replace(ui.transcripts, ws.chat.el);
  replace(ui.canvases, ws.canvas.el);
  showBusy(ws.session.busy);
  setScope(null);
  renderList();
  ws.chat.scrolled();
}

function showAudit(id) {
  ui.status.textContent = '';
  showView('audit', id);
  audit.show(id);
}

function showInspector(id) {
  ui.status.textContent = '';
  showView('inspector', id);
  inspector.show(id);
}

function newConversation() {
  const id = store.mintId();
  store.remember(store.token(), id, 'New conversation', false);
  location.hash = `#/c/${encodeURIComponent(id)}`;
}

function route() {
  if (!store.token()) {
    showView('chat', null);
    announce('Enter the access token to start (any non-empty token when the server sets no STUDIO_API_TOKEN).');
    ui.tokenInput.focus();
    return;
  }
  const hash = decodeURIComponent(location.hash.replace(/^#\/?/, ''));
  const [view, ...rest] = hash.split('/');
  const named = rest.join('/');
  const fallback = () => store.current(store.token()) ?? store.conversations(store.token())[0]?.id;
  if (view === 'audit' || view === 'inspect') {
    const id = named || fallback();
    if (id && view === 'audit') showAudit(id);
    else if (id) showInspector(id);
    else announce(`Open a conversation first: the ${view === 'audit' ? 'audit' : 'inspector'} shows one conversation.`);
    return;
  }
  const id = (view === 'c' && named) || fallback();
  if (!id) { newConversation(); return; }
  if (view !== 'c') { history.replaceState(null, '', `#/c/${encodeURIComponent(id)}`); }
  showConversation(id);
}

ui.tokenInput.value = store.token();
ui.tokenForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const value = ui.tokenInput.value.trim();
  if (!value) return;
  if (value !== store.token()) {
    for (const ws of workspaces.values()) ws.session.dispose();
    workspaces.clear();
    currentId = null;
    store.setToken(value);
    history.replaceState(null, '', '#/');
  }
  announce('Token saved.');
  route();
  ui.text.focus();
});
ui.newButton.addEventListener('click', newConversation);
ui.autoAdd.checked = store.autoAdd();
ui.autoAdd.addEventListener('change', () => store.setAutoAdd(ui.autoAdd.checked));
ui.scopeClear.addEventListener('click', () => { setScope(null); ui.text.focus(); });
ui.stop.addEventListener('click', () => workspaces.get(currentId)?.session.cancel());
ui.text.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  } else if (event.key === 'Escape' && scope) {
    setScope(null);
  }
});
ui.composer.addEventListener('submit', (event) => {
  event.preventDefault();
  const message = ui.text.value.trim();
  if (!message) return;
  if (!store.token()) { announce('Enter the access token first.'); ui.tokenInput.focus(); return; }
  if (!currentId) route();
  const ws = workspaces.get(currentId);
  if (ws?.session.busy) { announce('Wait for this answer to finish, or stop it.'); return; }
  const componentRef = scope?.ref;
  ui.text.value = '';
  setScope(null);
  send(currentId, message, { componentRef });
});
window.addEventListener('hashchange', route);
route();
