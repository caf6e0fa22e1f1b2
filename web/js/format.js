// format.js — numbers, times and ids as people read them.
// Owns: number formatting for charts and facts, timestamps for the audit.
// Must never: round a value it is asked to show exactly (facts show the
// value as sent, grouped for reading).

const grouped = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });

/** A value for a tick or a bar label: compact past ten thousand. */
export function short(value) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return String(value ?? '');
  return Math.abs(value) >= 1e4 ? compact.format(value) : grouped.format(value);
}

/** A value in a fact or a table cell. */
export function full(value) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return String(value ?? '');
  return grouped.format(value);
}

/** A year-like axis value shows without grouping (2020, not 2,020). */
export function axisX(value, years) {
  return years ? String(Math.round(value)) : short(value);
}

/** A signed change: "+3.75" or "−1.2". */
export function change(value) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return '';
  const text = grouped.format(Math.abs(value));
  return value > 0 ? `+${text}` : value < 0 ? `−${text}` : text;
}

function pad(n, width = 2) { return String(n).padStart(width, '0'); }

/** `HH:MM:SS.mmm` in local time. */
export function clock(ms) {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** The full ISO time, for a title attribute. */
export function iso(ms) {
  return new Date(ms).toISOString();
}
