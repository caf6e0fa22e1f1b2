// plan.js — the plan card (`plan.proposed`) and the approved plan
// (`plan.approved`).
// Owns: drawing a plan's title, summary, steps (the answering one
// marked), asks, caveats, requirements and choices; the Approve, Amend
// and Reject answers and a choice switch (an amend carrying `switch`);
// a failed or stopped switch shown on its row; the approved plan kept
// with the message. Must never: decide the plan (it shows what the
// server sent), or show a stopped switch as a failure.

import { h, uid } from './dom.js';

/** Characters an amendment may hold (the server's MAX_PAYLOAD_CHARS). */
export const MAX_AMEND_CHARS = 8000;
export const SWITCH_CANCELLED = 'switch_cancelled';

function stepNumber(steps, id) {
  const index = steps.findIndex((step) => step.id === id);
  return index < 0 ? id : String(index + 1);
}

function title(frame) {
  const answer = frame.steps?.find((step) => step.gives_answer) ?? frame.steps?.[frame.steps.length - 1];
  return answer ? answer.label : 'Plan';
}

function stepsList(steps) {
  return h('ol', { class: 'plan-steps' }, steps.map((step) => h('li', { class: step.gives_answer ? 'answer-step' : null, dataset: { stepId: step.id ?? '' } },
    step.label,
    step.gives_answer ? h('span', { class: 'badge badge-answer' }, 'answers the question') : null,
    step.description ? h('span', { class: 'step-desc' }, step.description) : null)));
}

function asksList(frame) {
  const steps = frame.steps ?? [];
  return h('ul', { class: 'asks' }, frame.asks.map((ask) => {
    const by = (ask.answered_by ?? []).map((id) => stepNumber(steps, id));
    let state;
    if (ask.declined && by.length > 0) {
      state = h('span', { class: 'ask-partial' }, `answered in part by step ${by.join(', ')}; not computed: ${ask.not_computed ?? 'the rest'} (${ask.declined})`);
    } else if (ask.declined) {
      state = h('span', { class: 'ask-declined' }, `not computed: ${ask.declined}`);
    } else {
      state = h('span', { class: 'ask-answered' }, by.length ? `answered by step ${by.join(', ')}` : 'answered');
    }
    return h('li', { dataset: { state: ask.declined ? (by.length ? 'partial' : 'declined') : 'answered' } }, h('q', {}, ask.ask), ' — ', state);
  }));
}

function requirementsDetails(frame) {
  const items = [
    ...(frame.requirements ?? []).map((r) => h('li', {}, r.sentence)),
    ...(frame.operations ?? []).map((o) => h('li', {}, o.sentence)),
  ];
  if (items.length === 0) return null;
  return h('details', { class: 'plan-detail' }, h('summary', {}, 'What it reads and computes'), h('ul', {}, items));
}

/**
 * The plan card for `frame`. `answer(body)` sends an interrupt.response and
 * resolves once the answer was taken (or refused); `conversationId` goes in
 * every body. Returns `{el, answered(text), reopen(), supersede(version)}`.
 */
export function planCard(frame, { conversationId, answer }) {
  const card = h('section', { class: 'plan-card', 'aria-label': `Plan: ${title(frame)}`, dataset: { interruptId: frame.interrupt_id, planVersionId: frame.plan_version_id } });
  const outcome = h('p', { class: 'outcome', role: 'status' });
  const body = (decision, extra) => ({ kind: 'interrupt.response', conversation_id: conversationId, interrupt_id: frame.interrupt_id, decision, ...extra });
  const controls = [];
  const send = (request, text) => {
    for (const control of controls) control.disabled = true;
    card.classList.add('answered');
    outcome.textContent = text;
    answer(request);
  };

  const head = h('h3', {}, title(frame), frame.version > 1 ? h('span', { class: 'badge' }, `version ${frame.version}`) : null);
  const plan = h('div', { class: 'plan-body' });
  if (frame.summary) plan.append(h('p', { class: 'summary' }, frame.summary));
  plan.append(h('h4', {}, 'Steps'), stepsList(frame.steps ?? []));
  if (frame.asks?.length) plan.append(h('h4', {}, 'What you asked for'), asksList(frame));
  if (frame.caveats?.length) plan.append(h('h4', {}, 'Caveats'), h('ul', { class: 'caveats' }, frame.caveats.map((c) => h('li', {}, c))));
  const detail = requirementsDetails(frame);
  if (detail) plan.append(detail);

  if (frame.decisions?.length) {
    plan.append(h('h4', {}, 'Choices'));
    for (const row of frame.decisions) {
      const legend = uid('choice');
      const options = h('div', { class: 'options', role: 'group', 'aria-labelledby': legend });
      for (const option of row.options ?? []) {
        const chosen = option.label === row.chosen;
        const button = h('button', {
          type: 'button', class: 'option', 'aria-pressed': chosen ? 'true' : 'false',
          dataset: { choiceId: row.choice_id, optionId: option.option_id },
          onclick: () => {
            if (chosen) return;
            send(body('amend', { switch: { choice_id: row.choice_id, option_id: option.option_id } }), `Switching ${row.question} to ${option.label}…`);
          },
        }, option.label);
        controls.push(button);
        options.append(button);
      }
      const fieldset = h('fieldset', { class: 'choice', dataset: { choiceId: row.choice_id } }, h('legend', { id: legend }, row.question), options);
      const failed = frame.switch_failed;
      if (failed && failed.choice_id === row.choice_id) {
        const picked = row.options?.find((o) => o.option_id === failed.option_id)?.label ?? failed.option_id;
        if (failed.code === SWITCH_CANCELLED) {
          fieldset.append(h('p', { class: 'note-quiet switch-note', dataset: { code: failed.code } }, failed.reason));
        } else {
          fieldset.append(h('p', { class: 'note-failed switch-note', role: 'alert', dataset: { code: failed.code } },
            `Could not switch to ${picked}: ${failed.reason}`, failed.retryable ? ' You can try again.' : ''));
        }
      }
      plan.append(fieldset);
    }
  }

  const amendText = h('textarea', { rows: 2, maxlength: MAX_AMEND_CHARS, 'aria-label': 'What should change in the plan?' });
  const amendSend = h('button', { type: 'submit' }, 'Send amendment');
  const amendCancel = h('button', { type: 'button' }, 'Cancel');
  const amendForm = h('form', { class: 'amend-form', hidden: true }, h('label', {}, 'What should change?', amendText), h('div', { class: 'row' }, amendSend, amendCancel));
  const approve = h('button', { type: 'button', class: 'primary approve', onclick: () => send(body('approve'), 'Approved.') }, 'Approve');
  const amend = h('button', { type: 'button', class: 'amend', 'aria-expanded': 'false' }, 'Amend');
  const reject = h('button', { type: 'button', class: 'reject', onclick: () => send(body('reject'), 'Rejected.') }, 'Reject');
  amend.addEventListener('click', () => {
    amendForm.hidden = !amendForm.hidden;
    amend.setAttribute('aria-expanded', String(!amendForm.hidden));
    if (!amendForm.hidden) amendText.focus();
  });
  const closeAmend = () => { amendForm.hidden = true; amend.setAttribute('aria-expanded', 'false'); amend.focus(); };
  amendCancel.addEventListener('click', closeAmend);
  amendForm.addEventListener('keydown', (event) => { if (event.key === 'Escape') closeAmend(); });
  amendForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const text = amendText.value.trim();
    if (!text) { amendText.focus(); return; }
    send(body('amend', { payload: text }), `Amendment sent: ${text}`);
  });
  controls.push(approve, amend, reject, amendText, amendSend, amendCancel);
  card.append(head, plan, h('div', { class: 'plan-actions' }, approve, amend, reject), amendForm, outcome);

  return {
    el: card,
    planVersionId: frame.plan_version_id,
    /** The pause was answered (live or in the log): `text` says how. */
    answered(text) {
      for (const control of controls) control.disabled = true;
      card.classList.add('answered');
      if (text) outcome.textContent = text;
    },
    /** The answer was refused: the card takes answers again. */
    reopen() {
      for (const control of controls) control.disabled = false;
      card.classList.remove('answered');
      outcome.textContent = '';
    },
    /** A newer plan replaced this one; `text` says which. */
    supersede(text) {
      card.classList.add('superseded', 'answered');
      for (const control of controls) control.disabled = true;
      outcome.textContent = text;
    },
  };
}

/** The approved plan, kept with the message the resumed stream produces. */
export function approvedCard(frame) {
  return h('section', { class: 'approved-card', 'aria-label': `Approved plan: ${frame.title}` },
    h('h3', {}, 'Approved plan: ', frame.title),
    frame.summary ? h('p', { class: 'summary' }, frame.summary) : null,
    h('ol', {}, (frame.steps ?? []).map((step) => h('li', { class: step.gives_answer ? 'answer-step' : null },
      step.label, step.gives_answer ? h('span', { class: 'badge badge-answer' }, 'answers the question') : null))),
    frame.choices?.length ? h('ul', { class: 'approved-choices' }, frame.choices.map((choice) => h('li', { dataset: { choiceId: choice.choice_id ?? '' } },
      `${choice.question}: ${choice.chosen}`, choice.changed_from ? h('span', { class: 'changed' }, ` (was ${choice.changed_from})`) : null))) : null,
    frame.caveats?.length ? h('ul', { class: 'caveats' }, frame.caveats.map((c) => h('li', {}, c))) : null);
}

/** How an answer reads in a card's outcome line. */
export function describeAnswer(response) {
  switch (response?.decision) {
    case 'approve': return 'Approved.';
    case 'reject': return 'Rejected.';
    case 'amend': return response.switch ? `Switched ${response.switch.choice_id} to ${response.switch.option_id}.` : `Amended: ${response.payload ?? ''}`;
    case 'skip': return 'Skipped.';
    case 'answer': return 'Answered.';
    default: return 'Answered.';
  }
}
