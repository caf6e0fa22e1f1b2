// elicit.js — a clarifying pause (`elicitation.request`, delta 21): one to
// three questions, each with its options, free text and skip as its own
// flags allow, and skipping the whole pause when the frame allows it.
// Owns: the form and the `answers` it builds (keyed by question id, one
// per question). Must never: offer an answer kind a question's flags do
// not allow, or send an answer that leaves a question out.

import { h, uid } from './dom.js';

/** Characters a free-text answer may hold (the server's MAX_ANSWER_TEXT_CHARS). */
export const MAX_ANSWER_CHARS = 8000;

function questionFieldset(question, cardId) {
  const name = `${cardId}-${question.id}`;
  const legend = uid('q');
  const fieldset = h('fieldset', { class: 'question', dataset: { questionId: question.id }, 'aria-labelledby': legend },
    h('legend', { id: legend }, question.question));
  if (question.rationale) fieldset.append(h('p', { class: 'rationale' }, question.rationale));
  const options = question.input === 'text' ? [] : (question.options ?? []);
  for (const option of options) {
    fieldset.append(h('label', {},
      h('input', { type: 'radio', name, value: `option:${option.id}`, dataset: { optionId: option.id } }),
      ' ', option.label, option.recommended ? h('span', { class: 'badge' }, 'recommended') : null));
  }
  let text = null;
  if (question.allow_free_text || question.input === 'text') {
    text = h('input', { type: 'text', maxlength: MAX_ANSWER_CHARS, class: 'free-text', 'aria-label': `Your own answer to: ${question.question}` });
    if (options.length > 0) {
      const other = h('input', { type: 'radio', name, value: 'text', class: 'other-radio' });
      text.addEventListener('input', () => { other.checked = text.value.trim() !== ''; });
      fieldset.append(h('div', { class: 'other' }, h('label', {}, other, ' Other:'), text));
    } else {
      fieldset.append(h('div', { class: 'other' }, text));
    }
  }
  if (question.skippable) {
    fieldset.append(h('label', {}, h('input', { type: 'radio', name, value: 'skipped', class: 'skip-radio' }), ' Leave this to the assistant'));
  }
  const read = () => {
    const picked = fieldset.querySelector(`input[type=radio][name="${CSS.escape(name)}"]:checked`)?.value;
    if (picked?.startsWith('option:')) return { kind: 'option', option_id: picked.slice('option:'.length) };
    if (picked === 'skipped') return { kind: 'skipped' };
    const typed = text?.value.trim() ?? '';
    if ((picked === 'text' || options.length === 0) && typed) return { kind: 'text', text: typed };
    return null;
  };
  return { fieldset, read, question };
}

/**
 * The clarifying card for `frame`. `answer(body)` sends the
 * interrupt.response. Returns `{el, answered(text), reopen()}`.
 */
export function elicitationCard(frame, { conversationId, answer }) {
  const cardId = uid('elicit');
  const questions = (frame.questions ?? []).map((q) => questionFieldset(q, cardId));
  const error = h('p', { class: 'form-error', role: 'alert' });
  const outcome = h('p', { class: 'outcome', role: 'status' });
  const submit = h('button', { type: 'submit', class: 'primary' }, questions.length > 1 ? 'Answer' : 'Answer');
  const skipAll = frame.skippable ? h('button', { type: 'button', class: 'skip-all' }, 'Skip') : null;
  const form = h('form', { class: 'elicit-form' }, questions.map((q) => q.fieldset), error, h('div', { class: 'elicit-actions' }, submit, skipAll));
  const card = h('section', { class: 'elicit-card', 'aria-label': 'A question before planning', dataset: { interruptId: frame.interrupt_id } },
    h('h3', {}, questions.length > 1 ? 'A few questions first' : 'A question first'), form, outcome);
  const controls = () => card.querySelectorAll('input, button, textarea');
  const done = (text) => {
    for (const control of controls()) control.disabled = true;
    card.classList.add('answered');
    outcome.textContent = text;
  };
  const body = (decision, extra) => ({ kind: 'interrupt.response', conversation_id: conversationId, interrupt_id: frame.interrupt_id, decision, ...extra });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const answers = {};
    for (const q of questions) {
      const value = q.read();
      if (!value) {
        error.textContent = `Answer “${q.question.question}”${q.question.skippable ? ' or leave it to the assistant' : ''}.`;
        q.fieldset.querySelector('input')?.focus();
        return;
      }
      answers[q.question.id] = value;
    }
    error.textContent = '';
    done('Answered.');
    answer(body('answer', { answers }));
  });
  skipAll?.addEventListener('click', () => {
    done('Skipped.');
    answer(body('skip'));
  });
  return {
    el: card,
    answered(text) { done(text ?? 'Answered.'); },
    reopen() {
      for (const control of controls()) control.disabled = false;
      card.classList.remove('answered');
      outcome.textContent = '';
    },
  };
}
