// errors.js — a stream-fatal error or a refused request shown with what
// the user can do, by its retry mode (delta 4): what to change, refresh,
// a countdown to retry, or nothing to retry.
// Owns: the error card and its countdown. Must never: retry by itself
// (the buttons call back; the session's own recovery waits on its own),
// or dress a stop the user asked for as a failure.

import { h } from './dom.js';

/** Longest countdown shown, in seconds (a larger retry_after is shown as this). */
export const MAX_COUNTDOWN_SECONDS = 3600;

const HEADINGS = {
  correct_and_retry: 'The request needs a change',
  refresh_then_retry: 'This view is out of date',
  retry_after_delay: 'Temporarily unavailable',
  do_not_retry: 'This cannot be done',
};

/**
 * The card for `error` (`{code, retry, detail, fix?, retry_after_seconds?}`).
 * `actions`: `{onRetry, onRefresh, onEdit}`, each optional.
 */
export function errorCard(error, actions = {}) {
  const quiet = error.code === 'cancelled';
  const card = h('section', { class: `error-card${quiet ? ' quiet' : ''}`, role: quiet ? 'status' : 'alert', dataset: { code: error.code ?? '', retry: error.retry ?? '' } });
  if (quiet) {
    card.append(h('h3', {}, error.detail || 'You stopped this answer.'));
    return card;
  }
  card.append(h('h3', {}, HEADINGS[error.retry] ?? 'Something went wrong'), h('p', { class: 'detail' }, error.detail ?? ''));
  const buttons = h('div', { class: 'error-actions' });
  if (error.retry === 'correct_and_retry') {
    if (error.fix) card.append(h('p', {}, 'What to change: ', h('span', { class: 'fix' }, error.fix)));
    if (actions.onEdit) buttons.append(h('button', { type: 'button', onclick: actions.onEdit }, 'Edit and send again'));
  } else if (error.retry === 'refresh_then_retry') {
    if (actions.onRefresh) buttons.append(h('button', { type: 'button', onclick: actions.onRefresh }, 'Refresh'));
  } else if (error.retry === 'retry_after_delay') {
    const seconds = Math.min(MAX_COUNTDOWN_SECONDS, Math.max(0, Math.ceil(Number(error.retry_after_seconds) || 0)));
    const wait = h('span', { class: 'countdown', 'aria-live': 'off' });
    const retry = actions.onRetry ? h('button', { type: 'button', class: 'retry', onclick: actions.onRetry }, 'Retry') : null;
    buttons.append(wait);
    if (retry) buttons.append(retry);
    countdown(seconds, wait, retry);
  }
  if (buttons.childNodes.length) card.append(buttons);
  card.append(h('p', { class: 'code' }, `${error.code}${error.pointer ? ` at ${error.pointer}` : ''}`));
  return card;
}

/** Counts `seconds` down in `label`, enabling `button` at zero. */
export function countdown(seconds, label, button) {
  let left = seconds;
  const show = () => {
    label.textContent = left > 0 ? `You can retry in ${left} s.` : 'You can retry now.';
    if (button) button.disabled = left > 0;
  };
  show();
  if (left <= 0) return;
  const timer = setInterval(() => {
    left -= 1;
    show();
    if (left <= 0 || !label.isConnected) clearInterval(timer);
  }, 1000);
}
