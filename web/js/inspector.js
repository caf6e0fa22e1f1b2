// inspector.js — the Inspector view: one conversation's Statewire thread
// attached with `Statewire-Protocol: *` through the package's
// `/statewire` client. It shows what the host selected, each lane's
// watermark, the documents as they change and every packet, and sends a
// command typed by hand.
// Owns: one StatewireClient while the view is open (closed when it
// leaves), and laying its state out. Must never: keep the inspector's
// session past the view (its commands are the user's own, sent once),
// or render a document or packet as anything but text.

import { MemorySession, StatewireClient, StatewireHttp } from '@ledgerwire/client/statewire';
import { h, replace } from './dom.js';
import { clock } from './format.js';

/** Packets the log keeps, newest last. */
export const MAX_PACKETS = 200;
/** Characters of one packet shown in the log (the rest is cut). */
export const MAX_PACKET_CHARS = 4000;
/** Characters of a command's params the form takes. */
export const MAX_PARAMS_CHARS = 65_536;

const json = (value) => JSON.stringify(value, null, 2);

export class InspectorView {
  /** `token()`: the bearer token; `root`: where the view goes. */
  constructor({ token, root }) {
    this.token = token;
    this.root = root;
    this.client = null;
    this.off = [];
  }

  /** Closes the attach (the view left). */
  hide() {
    for (const off of this.off) off();
    this.off = [];
    this.client?.close();
    this.client = null;
  }

  /** Attaches to `conversationId`'s thread and shows it live. */
  show(conversationId) {
    this.hide();
    const client = new StatewireClient({
      applicationProtocols: '*',
      transport: StatewireHttp({ url: `/threads/${encodeURIComponent(conversationId)}`, token: this.token }),
      storage: { session: new MemorySession() },
    });
    this.client = client;
    this.status = h('p', { class: 'inspector-status', role: 'status' }, 'Attaching…');
    this.selection = h('tbody');
    this.lanes = h('tbody');
    this.documents = h('div', { class: 'inspector-documents' });
    this.packets = h('ol', { class: 'inspector-packets', 'aria-label': 'Packets' });
    this.answer = h('pre', { class: 'inspector-answer', 'aria-live': 'polite' });
    this.protocolSelect = h('select', { name: 'protocol', id: 'inspector-protocol' });
    const method = h('input', { name: 'method', id: 'inspector-method', type: 'text', maxlength: 64, required: true, spellcheck: 'false', placeholder: 'turn' });
    const params = h('textarea', { name: 'params', id: 'inspector-params', rows: 3, maxlength: MAX_PARAMS_CHARS, spellcheck: 'false', placeholder: '[{"message": "Population of Peru"}]' });
    const form = h('form', { id: 'inspector-command', class: 'inspector-command', autocomplete: 'off' },
      h('label', { for: 'inspector-protocol' }, 'Protocol'), this.protocolSelect,
      h('label', { for: 'inspector-method' }, 'Method'), method,
      h('label', { for: 'inspector-params' }, 'Params (a JSON array)'), params,
      h('button', { type: 'submit', class: 'primary' }, 'Send command'));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.send(this.protocolSelect.value, method.value.trim(), params.value);
    });
    replace(this.root,
      h('div', { class: 'audit-head' }, h('span', {}, 'Thread ', h('code', {}, conversationId), ' over Statewire (', h('code', {}, 'Statewire-Protocol: *'), ')'),
        h('a', { href: `#/c/${encodeURIComponent(conversationId)}` }, 'Back to the chat')),
      this.status,
      h('section', { class: 'inspector-part' }, h('h3', {}, 'Selection'),
        h('table', { class: 'inspector-selection' }, h('thead', {}, h('tr', {}, ['protocol', 'version', 'lane'].map((c) => h('th', { scope: 'col' }, c)))), this.selection)),
      h('section', { class: 'inspector-part' }, h('h3', {}, 'Lanes'),
        h('table', { class: 'inspector-lanes' }, h('thead', {}, h('tr', {}, ['protocol', 'watermark', 'answered up to', 'next seq', 'unanswered'].map((c) => h('th', { scope: 'col' }, c)))), this.lanes)),
      h('section', { class: 'inspector-part' }, h('h3', {}, 'Send a command'), form, this.answer),
      h('section', { class: 'inspector-part' }, h('h3', {}, 'Documents'), this.documents),
      h('section', { class: 'inspector-part' }, h('h3', {}, 'Packets'), this.packets));
    this.off.push(client.subscribe(() => this.renderState()));
    this.off.push(client.documents.subscribe(() => this.renderDocuments()));
    this.off.push(client.onPacket((direction, packet) => this.logPacket(direction, packet)));
    client.connect().catch(() => this.renderState());
  }

  renderState() {
    const client = this.client;
    if (!client) return;
    const snapshot = client.getSnapshot();
    const fin = snapshot.fin ? ` Last fin: ${snapshot.fin.code}${snapshot.fin.message ? ` (${snapshot.fin.message})` : ''}.` : '';
    this.status.textContent = `${snapshot.status}${snapshot.selection ? `, wire ${snapshot.selection.version}` : ''}, client ${snapshot.clientId ?? '—'}, ${snapshot.attaches} attach(es).${fin}${snapshot.error ? ` ${snapshot.error}` : ''}`;
    this.status.dataset.status = snapshot.status;
    const protocols = snapshot.selection?.protocols ?? [];
    replace(this.selection, protocols.map((p) => h('tr', { dataset: { protocol: p.name } },
      h('td', {}, h('code', {}, p.name)), h('td', {}, p.version), h('td', {}, p.record ?? 'durable'))));
    replace(this.lanes, snapshot.lanes.map((lane) => h('tr', { dataset: { protocol: lane.name } },
      h('td', {}, h('code', {}, lane.name)), h('td', { class: 'num watermark' }, String(lane.watermark)),
      h('td', { class: 'num' }, String(lane.cursor)), h('td', { class: 'num' }, String(lane.nextSeq)),
      h('td', { class: 'num pending' }, String(lane.pending + lane.queued)))));
    const current = this.protocolSelect.value;
    if (this.protocolSelect.options.length !== protocols.length) {
      replace(this.protocolSelect, protocols.map((p) => h('option', { value: p.name }, p.name)));
      if (protocols.some((p) => p.name === current)) this.protocolSelect.value = current;
    }
    if (snapshot.status === 'connected' && this.documents.childElementCount === 0) this.renderDocuments();
  }

  renderDocuments() {
    const docs = this.client?.documents.list() ?? [];
    replace(this.documents, docs.map((doc) => h('details', { class: 'inspector-document', open: doc.main ? true : null, dataset: { doc: doc.doc, protocol: doc.protocol, main: doc.main } },
      h('summary', {}, `#${doc.doc} `, h('code', {}, doc.protocol), doc.main ? ' (main)' : '', doc.key ? ` ${JSON.stringify(doc.key)}` : ''),
      h('pre', {}, json(doc.value)))));
  }

  logPacket(direction, packet) {
    let text = JSON.stringify(packet);
    if (text.length > MAX_PACKET_CHARS) text = `${text.slice(0, MAX_PACKET_CHARS)}…`;
    const members = Object.keys(packet).join(', ');
    this.packets.append(h('li', { class: `packet packet-${direction}`, dataset: { direction } },
      h('span', { class: 'packet-head' }, `${clock(Date.now())} ${direction === 'in' ? '←' : '→'} ${members}`), h('code', {}, text)));
    while (this.packets.childElementCount > MAX_PACKETS) this.packets.firstElementChild.remove();
  }

  async send(protocol, method, paramsText) {
    let params;
    try {
      params = paramsText.trim() ? JSON.parse(paramsText) : [];
      if (!Array.isArray(params)) throw new Error('params must be a JSON array');
    } catch (error) {
      this.answer.textContent = `Not sent: ${error.message}`;
      return;
    }
    let pending;
    try {
      pending = this.client.invoke(protocol, method, params);
    } catch (error) {
      this.answer.textContent = `Not sent: ${error.message}`;
      return;
    }
    this.answer.textContent = `${protocol} ${method}: waiting for the answer…`;
    try {
      const result = await pending.result;
      this.answer.textContent = `${protocol} #${pending.seq} ${method} answered:\n${json(result)}`;
      this.answer.dataset.outcome = 'ok';
    } catch (error) {
      this.answer.textContent = `${protocol} #${pending.seq ?? '?'} ${method} refused: ${error.code ?? ''} ${error.message}${error.data ? `\n${json(error.data)}` : ''}`;
      this.answer.dataset.outcome = 'err';
    }
  }
}
