// chat.js — one conversation's transcript: each turn's question and what
// the assistant streamed for it, frame by frame, in order.
// Owns: turning frames into the transcript: text (Markdown) per segment,
// activity steps updated in place by step_id, plan and clarifying cards,
// the approved plan, card chips, suggestion chips, error cards and a
// turn's status line. Must never: send a request itself (every button
// calls an action the session carries out), or render message text as
// anything but Markdown through markdown.js.

import { h, replace } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { approvedCard, describeAnswer, planCard } from './plan.js';
import { elicitationCard } from './elicit.js';
import { errorCard } from './errors.js';

const STEP_ICONS = { running: '◌', complete: '✓', failed: '✗', stopped: '■' };
const STEP_WORDS = { running: 'running', complete: 'done', failed: 'failed', stopped: 'stopped before it finished' };

class TurnView {
  constructor(chat, message, request) {
    this.chat = chat;
    this.request = request;
    this.assistant = h('div', { class: 'assistant' });
    this.status = h('p', { class: 'turn-status', role: 'status' });
    const scope = request?.component_ref
      ? h('span', { class: 'scope-tag' }, request.component_ref.intent === 'edit' ? 'Editing a card' : 'About a card')
      : null;
    this.el = h('article', { class: 'turn', dataset: { state: 'streaming' } },
      h('div', { class: 'msg-user' }, scope, message), this.assistant, this.status);
    this.segment = { text: null, steps: null };
    this.chips = new Set();
  }

  append(node) {
    this.assistant.append(node);
    this.chat.scrolled();
    return node;
  }

  /** Steps still running when their segment ended never finished. */
  stopSteps() {
    for (const item of this.segment.steps?.items.values() ?? []) {
      if (item.status === 'running') this.setStep(item, { ...item.frame, status: 'stopped' });
    }
  }

  newSegment() {
    this.stopSteps();
    this.segment = { text: null, steps: null };
  }

  bubble() {
    if (!this.segment.text) {
      const el = this.append(h('div', { class: 'msg-text' }));
      this.segment.text = { el, text: '', scheduled: false };
    }
    return this.segment.text;
  }

  text(frame, replace_) {
    const bubble = this.bubble();
    bubble.text = replace_ ? frame.text : bubble.text + frame.text;
    if (bubble.scheduled) return;
    bubble.scheduled = true;
    requestAnimationFrame(() => {
      bubble.scheduled = false;
      replace(bubble.el, renderMarkdown(bubble.text));
      this.chat.scrolled();
    });
  }

  step(frame) {
    if (!this.segment.steps) {
      const el = this.append(h('ol', { class: 'steps', 'aria-label': 'Progress' }));
      this.segment.steps = { el, items: new Map() };
    }
    const { el, items } = this.segment.steps;
    let item = items.get(frame.step_id);
    if (!item) {
      item = { li: h('li', { dataset: { stepId: frame.step_id } }), failedBefore: false };
      items.set(frame.step_id, item);
      el.append(item.li);
    }
    this.setStep(item, frame);
  }

  setStep(item, frame) {
    item.frame = frame;
    item.status = frame.status;
    item.li.className = `step step-${frame.status}`;
    item.li.dataset.status = frame.status;
    const retried = item.failedBefore && frame.status !== 'failed';
    replace(item.li,
      h('span', { class: 'icon', 'aria-hidden': 'true' }, STEP_ICONS[frame.status] ?? '•'),
      h('span', { class: 'label' }, frame.label,
        h('span', { class: 'visually-hidden' }, `, ${STEP_WORDS[frame.status] ?? frame.status}`),
        ' ', h('span', { class: 'tool' }, frame.tool ?? ''),
        retried ? h('span', { class: 'retried' }, ' · failed once, retried') : null,
        frame.detail ? h('span', { class: 'detail' }, frame.detail, frame.code ? ` (${frame.code})` : '') : null));
    if (frame.status === 'failed') item.failedBefore = true;
  }

  setState(state, text) {
    this.el.dataset.state = state;
    this.status.textContent = text ?? '';
  }
}

export class ChatView {
  /**
   * `actions`: `{answer(body), ask(message, options), edit(text), refresh(),
   * announce(text)}`; `canvas`: this conversation's Canvas.
   */
  constructor({ conversationId, canvas, actions }) {
    this.conversationId = conversationId;
    this.canvas = canvas;
    this.actions = actions;
    this.el = h('div', { class: 'transcript', role: 'log', 'aria-live': 'off', dataset: { conversationId } });
    this.turns = [];
    this.current = null;
    this.pauses = new Map();
    this.replaying = false;
  }

  /** Keeps the newest part in view, once per frame (scrolling forces a layout). */
  scrolled() {
    if (this.replaying || this.scrollPending) return;
    this.scrollPending = true;
    requestAnimationFrame(() => {
      this.scrollPending = false;
      const box = this.el.parentElement;
      if (box) box.scrollTop = box.scrollHeight;
    });
  }

  /** A new turn with the user's `message` (`request`: its turn.request). */
  userTurn(message, request) {
    for (const pause of this.pauses.values()) {
      if (pause.open) { pause.open = false; pause.card.answered('Left unanswered: a new question started another turn.'); }
    }
    const turn = new TurnView(this, message, request);
    this.turns.push(turn);
    this.current = turn;
    this.el.append(turn.el);
    this.scrolled();
    return turn;
  }

  /** A new segment of the current turn starts (a new stream, not a reconnect). */
  segmentStarted() {
    this.current?.newSegment();
  }

  turn() {
    return this.current ?? this.userTurn('(a turn this page did not see start)', null);
  }

  /** One frame, in seq order; `meta.receivedAt` is when its first byte came. */
  frame(frame, meta = {}) {
    const turn = this.turn();
    const replay = this.replaying;
    switch (frame.event) {
      case 'message.delta': turn.text(frame, false); break;
      case 'message.complete': turn.text(frame, true); break;
      case 'activity.step': turn.step(frame); break;
      case 'plan.proposed': this.pause(turn, frame, planCard); if (!replay) this.actions.announce('A plan is ready for your approval.'); break;
      case 'elicitation.request': this.pause(turn, frame, elicitationCard); if (!replay) this.actions.announce('The assistant has a question.'); break;
      case 'plan.versioned':
        for (const pause of this.pauses.values()) {
          if (pause.card.planVersionId === frame.supersedes) pause.card.supersede(`Replaced by version ${frame.version}.`);
        }
        break;
      case 'plan.approved': turn.append(approvedCard(frame)); break;
      case 'component.created':
      case 'component.revised':
        this.canvas.component(frame, { receivedAt: meta.receivedAt, replay });
        if (!turn.chips.has(frame.component_id)) {
          turn.chips.add(frame.component_id);
          turn.append(this.canvas.chip(frame.component_id, frame.title ?? frame.component_id));
        }
        break;
      case 'composition.updated': this.canvas.setManifest(frame.composition, { replay }); break;
      case 'suggestions':
        if (frame.suggestions?.length) {
          turn.append(h('div', { class: 'chips', role: 'group', 'aria-label': 'Suggested follow-ups' },
            frame.suggestions.map((text) => h('button', { type: 'button', class: 'chip suggestion', onclick: () => this.actions.ask(text, {}) }, text))));
        }
        break;
      case 'error':
        turn.stopSteps();
        turn.append(errorCard(frame.error ?? {}, this.errorActions(turn)));
        turn.setState(frame.error?.code === 'cancelled' ? 'stopped' : 'failed');
        if (!replay) this.actions.announce(frame.error?.code === 'cancelled' ? 'Stopped.' : 'The answer failed; see what you can do below it.');
        break;
      case 'done':
        if (frame.composition) this.canvas.setManifest(frame.composition, { replay });
        turn.setState('done');
        if (!replay) this.actions.announce('The answer is complete.');
        break;
      default:
        // A frame kind from a later delta: ignored, as the contract asks.
        break;
    }
  }

  errorActions(turn) {
    const message = turn.request?.message;
    return {
      onRetry: message ? () => this.actions.ask(message, { componentRef: turn.request.component_ref, autoAdd: turn.request.auto_add }) : null,
      onEdit: message ? () => this.actions.edit(message) : null,
      onRefresh: () => this.actions.refresh(),
    };
  }

  pause(turn, frame, make) {
    const card = make(frame, { conversationId: this.conversationId, answer: (body) => this.actions.answer(body) });
    // A plan offered again (after a failed or stopped switch) replaces the
    // card it was offered from.
    for (const pause of turn.plans ?? []) {
      if (!pause.card.el.classList.contains('superseded')) pause.card.supersede('Offered again below.');
    }
    const entry = { card, open: true };
    if (frame.event === 'plan.proposed') (turn.plans ??= []).push(entry);
    this.pauses.set(frame.interrupt_id, entry);
    turn.append(card.el);
    turn.setState('paused');
  }

  /** The pause `response` names was answered (live, or found in the log). */
  answered(response) {
    const pause = this.pauses.get(response.interrupt_id);
    if (pause) { pause.open = false; pause.card.answered(describeAnswer(response)); }
    this.current?.setState('streaming');
  }

  /** The server refused the answer to `interruptId`: its card takes answers again. */
  pauseRefused(interruptId) {
    const pause = this.pauses.get(interruptId);
    if (pause) { pause.open = true; pause.card.reopen(); }
  }

  /** A refused request, or a note about the stream, in the current turn. */
  notice(error, actions = {}) {
    const turn = this.turn();
    const card = errorCard(error, { ...this.errorActions(turn), ...actions });
    turn.append(card);
    return card;
  }

  /** The current turn's status line. */
  status(text, state) {
    const turn = this.current;
    if (!turn) return;
    if (state) turn.setState(state, text);
    else turn.status.textContent = text ?? '';
  }
}
