// cards.js — one canvas card: its chart on the front, its fact summary
// and provenance on the back, and its buttons (details, pin, move, remove,
// edit the card's meta, "Edit card" and "Ask follow up").
// Owns: the card's elements and its meta form. Must never: change the
// canvas itself (every button calls back to the canvas, which mutates
// through the server), or keep layout state of its own.

import { h, uid } from './dom.js';
import { change, full } from './format.js';
import { draw } from './charts.js';

/** Characters a meta field may hold (the server's MAX_CARD_META_CHARS). */
export const MAX_META_CHARS = 2000;
const META_FIELDS = [
  ['subtitle', 'Subtitle'],
  ['description', 'Description'],
  ['x_label', 'X axis label'],
  ['y_label', 'Y axis label'],
];

function factsBack(component) {
  const facts = component?.fact_summary;
  const provenance = component?.provenance ?? {};
  const envelope = component?.payload?.provenance;
  const back = h('div', { class: 'card-back' });
  back.append(h('h4', {}, 'Facts'));
  if (facts?.headline) back.append(h('p', { class: 'headline' }, facts.headline));
  if (facts?.series?.length) {
    back.append(h('table', {},
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Series'), h('th', { scope: 'col' }, 'Latest'), h('th', { scope: 'col' }, 'Change'))),
      h('tbody', {}, facts.series.map((series) => h('tr', {},
        h('td', {}, series.label, series.unit ? ` (${series.unit})` : ''),
        h('td', {}, series.latest ? `${full(series.latest.value)} in ${series.latest.period}` : '—'),
        h('td', {}, change(series.change) || '—'))))));
  } else if (!facts?.headline) {
    back.append(h('p', {}, 'No facts were sent with this card.'));
  }
  back.append(h('h4', {}, 'Provenance'));
  const rows = [
    ['Source', provenance.source],
    ['Dataset', provenance.spec_id],
    ['Version', provenance.content_version],
    ['Package', envelope?.package],
    ['Licence', envelope?.licence],
    ['Query', envelope?.query],
    ['Revision', component?.revision],
  ].filter(([, value]) => value !== undefined && value !== null && value !== '');
  back.append(h('dl', {}, rows.map(([name, value]) => [h('dt', {}, name), h('dd', {}, String(value))])));
  return back;
}

function metaForm(block, onSave, onClose) {
  const meta = block.meta ?? {};
  const inputs = {};
  const form = h('form', { class: 'meta-form' });
  for (const [key, label] of META_FIELDS) {
    const input = key === 'description'
      ? h('textarea', { rows: 2, maxlength: MAX_META_CHARS, name: key })
      : h('input', { type: 'text', maxlength: MAX_META_CHARS, name: key });
    input.value = meta[key] ?? '';
    inputs[key] = input;
    form.append(h('label', {}, label, input));
  }
  form.append(h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Save'), h('button', { type: 'button', onclick: onClose }, 'Cancel')));
  form.addEventListener('keydown', (event) => { if (event.key === 'Escape') onClose(); });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = {};
    if (meta.style) next.style = meta.style;
    for (const [key] of META_FIELDS) {
      const value = inputs[key].value.trim();
      if (value) next[key] = value;
    }
    onSave(next);
  });
  return form;
}

/**
 * The card of `block` (a manifest block) drawn from `component` (the
 * latest component frame for it, or undefined when this page never saw
 * it). `actions`: `{op(ops), edit(), followUp(), flipped, onFlip(bool)}`;
 * `index` and `count` place it for the move buttons.
 */
export function cardElement(block, component, { index, count, actions }) {
  const titleId = uid('card');
  const meta = block.meta ?? {};
  const card = h('article', {
    class: `card${block.pinned ? ' pinned' : ''}`,
    'aria-labelledby': titleId,
    dataset: { componentId: block.component_id, revision: block.revision, type: block.type },
  });
  const header = h('header', {},
    h('h3', { id: titleId }, block.title, block.pinned ? h('span', { class: 'pin-badge' }, ' · pinned') : null),
    meta.subtitle ? h('p', { class: 'subtitle' }, meta.subtitle) : null);
  const front = h('div', { class: 'card-front' });
  if (component?.payload?.component) {
    front.append(...draw(component.payload.component, block.type, block.title, meta));
  } else {
    front.append(h('p', { class: 'chart-note' }, 'This card was made in another session of this conversation; reload the page to draw it.'));
  }
  if (meta.description) front.append(h('p', { class: 'description' }, meta.description));
  const back = factsBack(component);
  back.hidden = !actions.flipped;
  front.hidden = actions.flipped;

  const flip = h('button', { type: 'button', class: 'flip', 'aria-pressed': actions.flipped ? 'true' : 'false' }, actions.flipped ? 'Chart' : 'Facts and source');
  flip.addEventListener('click', () => {
    const flipped = back.hidden;
    back.hidden = !flipped;
    front.hidden = flipped;
    flip.setAttribute('aria-pressed', String(flipped));
    flip.textContent = flipped ? 'Chart' : 'Facts and source';
    actions.onFlip(flipped);
  });
  const id = block.component_id;
  const pin = h('button', { type: 'button', class: 'pin', onclick: () => actions.op([{ op: block.pinned ? 'unpin' : 'pin', component_id: id }]) }, block.pinned ? 'Unpin' : 'Pin');
  const up = h('button', { type: 'button', class: 'move-up', disabled: index === 0, 'aria-label': `Move ${block.title} up`, onclick: () => actions.move(-1) }, '↑ Up');
  const down = h('button', { type: 'button', class: 'move-down', disabled: index === count - 1, 'aria-label': `Move ${block.title} down`, onclick: () => actions.move(1) }, '↓ Down');
  const remove = h('button', { type: 'button', class: 'remove', 'aria-label': `Remove ${block.title} from the canvas`, onclick: () => actions.op([{ op: 'remove', component_id: id }]) }, 'Remove');
  const editMeta = h('button', { type: 'button', class: 'edit-meta', 'aria-expanded': 'false' }, 'Edit details');
  const editCard = h('button', { type: 'button', class: 'edit-card', onclick: actions.edit }, 'Edit card');
  const followUp = h('button', { type: 'button', class: 'follow-up', onclick: actions.followUp }, 'Ask follow up');
  let form = null;
  const closeForm = () => {
    form?.remove();
    form = null;
    editMeta.setAttribute('aria-expanded', 'false');
    editMeta.focus();
  };
  editMeta.addEventListener('click', () => {
    if (form) { closeForm(); return; }
    form = metaForm(block, (next) => { actions.op([{ op: 'set_card_meta', component_id: id, meta: next }]); }, closeForm);
    card.append(form);
    editMeta.setAttribute('aria-expanded', 'true');
    form.querySelector('input, textarea')?.focus();
  });
  card.append(header, front, back, h('div', { class: 'card-actions' }, flip, pin, up, down, remove, editMeta, editCard, followUp));
  return card;
}
