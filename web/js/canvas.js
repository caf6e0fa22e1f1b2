// canvas.js — one conversation's canvas: the manifest the server last
// sent, the components its cards are drawn from, and every change the
// user makes, through the package's Conversation (`/api/studio/composition`
// with `expected_revision`).
// Owns: rendering the manifest's blocks in its order (cards keyed by
// component id), the "Add to canvas" chips of cards streamed with
// auto-add off, re-rendering from the server's manifest on an
// `edit_conflict`, and the card timing marks (`ledgerwire.card`).
// Must never: hold layout of its own (the manifest is the order, the
// pins and the meta), or apply a change the server has not answered.

import { StudioError } from '@ledgerwire/client/studio';
import { h } from './dom.js';
import { cardElement } from './cards.js';

/** Components one canvas remembers (the frames their cards are drawn from). */
export const MAX_COMPONENTS = 2000;

function signature(block, component, flipped) {
  return JSON.stringify([block.revision, block.pinned, block.title, block.type, block.meta ?? null, component?.revision ?? null,
    component?.seq ?? null, flipped]);
}

/** Resolves after the frame that shows the current DOM has been painted. */
function painted() {
  return new Promise((resolve) => {
    requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => resolve(performance.now());
      channel.port2.postMessage(null);
    });
  });
}

export class Canvas {
  /**
   * `conversationId`; `scope(ref, title)`: start a turn scoped to a card
   * ("Edit card", "Ask follow up"). The Session attaches its Conversation.
   */
  constructor({ conversationId, scope }) {
    this.conversation = null;
    this.conversationId = conversationId;
    this.scope = scope;
    this.manifest = null;
    this.components = new Map();
    this.flipped = new Set();
    this.chips = new Map();
    this.timing = new Map();
    this.rendered = new Map();
    this.note = h('p', { class: 'canvas-note', role: 'status' });
    this.cards = h('div', { class: 'cards' });
    this.empty = h('p', { class: 'canvas-empty' }, 'Cards the assistant makes appear here.');
    this.el = h('div', { class: 'canvas-view', dataset: { conversationId } }, this.note, this.empty, this.cards);
    this.busy = false;
  }

  /** The Conversation changes go through. */
  attach(conversation) {
    this.conversation = conversation;
  }

  onCanvas(id) {
    return Boolean(this.manifest?.blocks?.some((block) => block.component_id === id));
  }

  /** A `component.created` or `component.revised` frame. */
  component(frame, { receivedAt, replay } = {}) {
    const previous = this.components.get(frame.component_id);
    const entry = {
      ...previous,
      ...frame,
      type: frame.type ?? previous?.type,
      fact_summary: frame.fact_summary ?? previous?.fact_summary,
      provenance: frame.provenance ?? previous?.provenance,
    };
    this.components.delete(frame.component_id);
    this.components.set(frame.component_id, entry);
    while (this.components.size > MAX_COMPONENTS) this.components.delete(this.components.keys().next().value);
    if (!replay && typeof receivedAt === 'number') this.timing.set(frame.component_id, { start: receivedAt, seq: frame.seq });
    if (!replay) this.render();
    this.updateChips(frame.component_id);
  }

  /** A manifest from a frame, a mutation's answer or the read route. */
  setManifest(manifest, { replay = false, force = false } = {}) {
    if (manifest === null || manifest === undefined) return;
    const current = this.manifest;
    if (!force && current && current.composition_id === manifest.composition_id && manifest.revision < current.revision) return;
    this.manifest = manifest;
    if (!replay) this.render();
    for (const id of this.chips.keys()) this.updateChips(id);
  }

  /** A chip for a card streamed in the chat: on the canvas, or "Add to canvas". */
  chip(componentId, title) {
    const state = h('span', { class: 'chip-state' });
    const add = h('button', { type: 'button', class: 'add-card' }, 'Add to canvas');
    add.addEventListener('click', async () => {
      add.disabled = true;
      await this.mutate([{ op: 'add', component_id: componentId }]);
      add.disabled = false;
      this.updateChips(componentId);
    });
    const el = h('div', { class: 'card-chip', dataset: { componentId } }, h('span', {}, 'Card: ', h('strong', {}, title)), state, add);
    if (!this.chips.has(componentId)) this.chips.set(componentId, new Set());
    this.chips.get(componentId).add({ el, state, add });
    this.updateChips(componentId);
    return el;
  }

  updateChips(id) {
    const on = this.onCanvas(id);
    for (const chip of this.chips.get(id) ?? []) {
      chip.state.textContent = on ? '✓ Added' : '';
      chip.state.className = on ? 'chip-state added' : 'chip-state';
      chip.add.hidden = on;
    }
  }

  /** Draws the manifest's blocks, reusing cards that did not change. */
  render() {
    const blocks = this.manifest?.blocks ?? [];
    this.empty.hidden = blocks.length > 0;
    const focused = document.activeElement;
    const focusCard = focused?.closest?.('.card')?.dataset.componentId;
    const focusClass = focusCard ? [...focused.classList].find((c) => c !== 'primary') : null;
    const next = new Map();
    const elements = blocks.map((block, index) => {
      const component = this.components.get(block.component_id);
      const flipped = this.flipped.has(block.component_id);
      const sig = signature(block, component, flipped);
      const old = this.rendered.get(block.component_id);
      if (old && old.sig === sig) { next.set(block.component_id, old); return old.el; }
      const el = cardElement(block, component, {
        index,
        count: blocks.length,
        actions: {
          flipped,
          onFlip: (on) => { if (on) this.flipped.add(block.component_id); else this.flipped.delete(block.component_id); this.rendered.delete(block.component_id); },
          op: (ops) => this.mutate(ops),
          move: (by) => this.move(block.component_id, by),
          edit: () => this.scope({ component_id: block.component_id, revision: block.revision, intent: 'edit' }, block.title),
          followUp: () => this.scope({ component_id: block.component_id, revision: block.revision, intent: 'follow_up' }, block.title),
        },
      });
      next.set(block.component_id, { sig, el });
      const timing = this.timing.get(block.component_id);
      if (timing && component?.payload?.component) {
        this.timing.delete(block.component_id);
        painted().then((end) => {
          try {
            performance.measure(`ledgerwire.card ${block.component_id}`, { start: timing.start, end, detail: { component_id: block.component_id, seq: timing.seq } });
          } catch {
            // An old browser without measure options: no mark, same page.
          }
        });
      }
      return el;
    });
    this.rendered = next;
    // Keyed: a card that did not change stays where it is in the DOM (no
    // detach, so the rest of the canvas is not laid out again).
    let cursor = this.cards.firstChild;
    for (const el of elements) {
      if (el === cursor) { cursor = cursor.nextSibling; continue; }
      this.cards.insertBefore(el, cursor);
    }
    while (cursor) {
      const following = cursor.nextSibling;
      cursor.remove();
      cursor = following;
    }
    elements.forEach((el, index) => {
      const up = el.querySelector('button.move-up');
      const down = el.querySelector('button.move-down');
      if (up) up.disabled = index === 0;
      if (down) down.disabled = index === elements.length - 1;
    });
    if (focusCard && focusClass) {
      const card = [...this.cards.children].find((c) => c.dataset.componentId === focusCard);
      const target = card?.querySelector(`button.${CSS.escape(focusClass)}:not(:disabled)`) ?? card?.querySelector('button:not(:disabled)');
      target?.focus();
    }
  }

  move(id, by) {
    const order = (this.manifest?.blocks ?? []).map((block) => block.component_id);
    const from = order.indexOf(id);
    const to = from + by;
    if (from < 0 || to < 0 || to >= order.length) return;
    order.splice(from, 1);
    order.splice(to, 0, id);
    this.mutate([{ op: 'reorder', order }]);
  }

  /** Applies `ops` through the server; on a conflict, shows the canvas as it is. */
  async mutate(ops) {
    if (this.busy || !this.conversation) return false;
    this.busy = true;
    try {
      // The Conversation sends the revision of the manifest last drawn.
      this.conversation.setCanvas(this.manifest, true);
      this.setManifest(await this.conversation.mutate(ops), { force: true });
      this.note.textContent = '';
      return true;
    } catch (error) {
      if (!(error instanceof StudioError)) throw error;
      if (error.code === 'edit_conflict') {
        this.setManifest(this.conversation.getSnapshot().canvas, { force: true });
        this.note.textContent = 'The canvas changed in the meantime; it is shown as it is now. Try again.';
      } else if (error.failure.status === 0) {
        this.note.textContent = 'The server could not be reached, so the canvas did not change.';
      } else {
        this.note.textContent = `${error.failure.detail}${error.failure.fix ? ` (${error.failure.fix})` : ''}`;
      }
      return false;
    } finally {
      this.busy = false;
    }
  }

  /** Reads the manifest as it stands from the server and draws it. */
  async refresh() {
    try {
      this.setManifest(await this.conversation?.refreshCanvas(), { force: true });
    } catch {
      // Unreadable now: the canvas stays as drawn.
    }
  }
}
