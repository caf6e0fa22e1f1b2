// charts.js — a card's component drawn from its data: line charts and bar
// charts as SVG written here, tables, and single values.
// Owns: reading a component body (`series`, `points`, `rows`/`columns`,
// `value`) into something drawable, scales, ticks and the drawing.
// Must never: fetch anything, or draw a value it was not given (a
// component it cannot read says so instead of guessing).

import { h, s } from './dom.js';
import { axisX, full, short } from './format.js';

/** Rows a table card shows; the rest are counted. */
export const MAX_TABLE_ROWS = 200;
/** Bars a bar chart draws; the rest are counted. */
export const MAX_BARS = 60;
/** Series a line chart draws; the rest are counted. */
export const MAX_SERIES = 24;
/** Columns a bar chart of a series draws (the latest ones). */
export const MAX_COLUMNS = 200;
/** Points one line draws at most; a longer line is thinned evenly. */
export const MAX_LINE_POINTS = 5_000;

const WIDTH = 640;
const HEIGHT = 300;
const MARGIN = { top: 12, right: 16, bottom: 44, left: 64 };
const PALETTE = 8;

const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);

/** The drawable model of a component body, by shape (the type is a hint). */
export function model(component, type) {
  const c = component && typeof component === 'object' ? component : {};
  if (Array.isArray(c.series) && c.series.length > 0) {
    const series = c.series.map((line, index) => ({
      label: String(line?.label ?? `Series ${index + 1}`),
      points: (Array.isArray(line?.points) ? line.points : [])
        .filter((p) => Array.isArray(p) && isNumber(Number(p[0])) && isNumber(p[1]))
        .map((p) => [Number(p[0]), p[1]]),
    })).filter((line) => line.points.length > 0);
    if (series.length > 0) return { kind: (type ?? c.type) === 'bar_chart' ? 'columns' : 'line', series, unit: c.unit };
  }
  if (Array.isArray(c.rows)) {
    return { kind: 'table', columns: Array.isArray(c.columns) ? c.columns.map(String) : null, rows: c.rows };
  }
  if (isNumber(c.value)) return { kind: 'value', value: c.value, period: c.period, unit: c.unit };
  if (Array.isArray(c.points) && c.points.length > 0) {
    const pairs = c.points.filter((p) => Array.isArray(p) && p.length >= 2 && isNumber(p[1]));
    const numericX = pairs.every((p) => isNumber(p[0]));
    if (numericX && (type ?? c.type) !== 'bar_chart') {
      return { kind: 'line', series: [{ label: String(c.title ?? 'value'), points: pairs.map((p) => [p[0], p[1]]) }], unit: c.unit };
    }
    return { kind: 'bar', bars: pairs.map((p) => ({ label: String(p[0]), value: p[1] })), unit: c.unit, period: c.period };
  }
  return { kind: 'none' };
}

/** "Nice" ticks covering [lo, hi]: 1, 2 or 5 times a power of ten apart. */
export function ticks(lo, hi, count = 5) {
  if (!isNumber(lo) || !isNumber(hi)) return [];
  if (lo === hi) { lo -= 1; hi += 1; }
  const raw = (hi - lo) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((m) => m >= raw) ?? 10 * power;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9 && out.length < 50; v += step) {
    out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
  }
  return out;
}

function extent(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return [lo, hi];
}

function thin(points) {
  if (points.length <= MAX_LINE_POINTS) return points;
  const step = points.length / MAX_LINE_POINTS;
  const out = [];
  for (let i = 0; i < MAX_LINE_POINTS; i += 1) out.push(points[Math.floor(i * step)]);
  out.push(points[points.length - 1]);
  return out;
}

function axisLabels(meta, unit) {
  return { x: meta?.x_label ?? '', y: meta?.y_label ?? unit ?? '' };
}

function lineChart(m, title, meta) {
  const shown = m.series.slice(0, MAX_SERIES).map((line) => ({ ...line, points: thin([...line.points].sort((a, b) => a[0] - b[0])) }));
  const [x0, x1] = extent(shown.flatMap((l) => l.points.map((p) => p[0])));
  let [y0, y1] = extent(shown.flatMap((l) => l.points.map((p) => p[1])));
  const pad = (y1 - y0) * 0.05 || Math.abs(y0) * 0.05 || 1;
  y0 -= pad; y1 += pad;
  if (y0 < 0 && extent(shown.flatMap((l) => l.points.map((p) => p[1])))[0] >= 0) y0 = 0;
  const years = shown.every((l) => l.points.every((p) => Number.isInteger(p[0]) && p[0] >= 1000 && p[0] <= 2999));
  const xTicks = ticks(x0, x1, 6).filter((t) => t >= x0 && t <= x1 && (!years || Number.isInteger(t)));
  const yTicks = ticks(y0, y1, 5).filter((t) => t >= y0 && t <= y1);
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const sx = (x) => MARGIN.left + (x1 === x0 ? plotW / 2 : ((x - x0) / (x1 - x0)) * plotW);
  const sy = (y) => MARGIN.top + plotH - ((y - y0) / (y1 - y0)) * plotH;
  const labels = axisLabels(meta, m.unit);
  const titleId = `t-${Math.random().toString(36).slice(2, 10)}`;
  const svg = s('svg', { class: 'chart line-chart', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-labelledby': titleId },
    s('title', { id: titleId }, `${title}: line chart of ${shown.length} series from ${axisX(x0, years)} to ${axisX(x1, years)}`),
    s('g', { class: 'grid' }, yTicks.map((t) => s('line', { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: sy(t).toFixed(1), y2: sy(t).toFixed(1) }))),
    s('g', { class: 'axis' },
      s('line', { x1: MARGIN.left, x2: MARGIN.left, y1: MARGIN.top, y2: MARGIN.top + plotH }),
      s('line', { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: MARGIN.top + plotH, y2: MARGIN.top + plotH }),
      yTicks.map((t) => s('text', { x: MARGIN.left - 6, y: sy(t) + 4, 'text-anchor': 'end' }, short(t))),
      xTicks.map((t) => s('text', { x: sx(t), y: MARGIN.top + plotH + 16, 'text-anchor': 'middle' }, axisX(t, years)))),
    labels.x ? s('text', { class: 'axis-label', x: MARGIN.left + plotW / 2, y: HEIGHT - 6, 'text-anchor': 'middle' }, labels.x) : null,
    labels.y ? s('text', { class: 'axis-label', x: 12, y: MARGIN.top + plotH / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${MARGIN.top + plotH / 2})` }, labels.y) : null,
    shown.map((line, index) => {
      const d = line.points.map((p, k) => `${k === 0 ? 'M' : 'L'}${sx(p[0]).toFixed(1)} ${sy(p[1]).toFixed(1)}`).join('');
      const path = s('path', { class: `series s${index % PALETTE}`, d });
      if (line.points.length === 1) {
        return s('circle', { class: `s${index % PALETTE}`, cx: sx(line.points[0][0]), cy: sy(line.points[0][1]), r: 3 });
      }
      return path;
    }));
  const parts = [svg];
  if (shown.length > 1) {
    parts.push(h('ul', { class: 'legend' }, shown.map((line, index) => h('li', {}, h('span', { class: `swatch s${index % PALETTE}`, 'aria-hidden': 'true' }), line.label))));
  }
  if (m.series.length > shown.length) parts.push(h('p', { class: 'chart-note' }, `${m.series.length - shown.length} more series not drawn.`));
  return parts;
}

function barChart(m, title, meta) {
  const shown = m.bars.slice(0, MAX_BARS);
  const rowH = 22;
  const labelW = 150;
  const height = MARGIN.top + shown.length * rowH + 30;
  const [lo, hi] = extent(shown.map((b) => b.value));
  const min = Math.min(0, lo);
  const max = Math.max(0, hi) || 1;
  const plotW = WIDTH - labelW - 70;
  const sx = (v) => labelW + ((v - min) / (max - min || 1)) * plotW;
  const titleId = `t-${Math.random().toString(36).slice(2, 10)}`;
  const labels = axisLabels(meta, m.unit);
  const svg = s('svg', { class: 'chart bar-chart', viewBox: `0 0 ${WIDTH} ${height}`, role: 'img', 'aria-labelledby': titleId },
    s('title', { id: titleId }, `${title}: bar chart of ${shown.length} bars`),
    s('g', { class: 'axis' }, s('line', { x1: sx(0), x2: sx(0), y1: MARGIN.top - 4, y2: MARGIN.top + shown.length * rowH })),
    shown.map((bar, index) => {
      const y = MARGIN.top + index * rowH;
      const x = Math.min(sx(0), sx(bar.value));
      const w = Math.max(1, Math.abs(sx(bar.value) - sx(0)));
      const name = bar.label.length > 22 ? `${bar.label.slice(0, 21)}…` : bar.label;
      return s('g', {},
        s('title', {}, `${bar.label}: ${full(bar.value)}`),
        s('text', { x: labelW - 6, y: y + 15, 'text-anchor': 'end' }, name),
        s('rect', { class: 'bar s0', x: x.toFixed(1), y: y + 3, width: w.toFixed(1), height: rowH - 6 }),
        s('text', { x: Math.max(sx(0), sx(bar.value)) + 4, y: y + 15 }, short(bar.value)));
    }),
    labels.y ? s('text', { class: 'axis-label', x: labelW + plotW / 2, y: height - 8, 'text-anchor': 'middle' }, labels.y) : null);
  const parts = [svg];
  if (m.bars.length > shown.length) parts.push(h('p', { class: 'chart-note' }, `${m.bars.length - shown.length} more bars not drawn.`));
  if (m.period) parts.push(h('p', { class: 'chart-note' }, `Values for ${m.period}.`));
  return parts;
}

/** Columns along x for each series (a bar chart of a time series). */
function columnChart(m, title, meta) {
  const shown = m.series.slice(0, MAX_SERIES);
  const xs = [...new Set(shown.flatMap((l) => l.points.map((p) => p[0])))].sort((a, b) => a - b).slice(-MAX_COLUMNS);
  const at = shown.map((line) => new Map(line.points.map((p) => [p[0], p[1]])));
  const values = shown.flatMap((l) => l.points.filter((p) => xs.includes(p[0])).map((p) => p[1]));
  const [lo, hi] = extent(values);
  const y0 = Math.min(0, lo);
  const y1 = Math.max(0, hi) || 1;
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const slot = plotW / Math.max(1, xs.length);
  const barW = (slot * 0.8) / shown.length;
  const sy = (y) => MARGIN.top + plotH - ((y - y0) / (y1 - y0 || 1)) * plotH;
  const years = xs.every((x) => Number.isInteger(x) && x >= 1000 && x <= 2999);
  const every = Math.max(1, Math.ceil(xs.length / 10));
  const yTicks = ticks(y0, y1, 5).filter((t) => t >= y0 && t <= y1);
  const labels = axisLabels(meta, m.unit);
  const titleId = `t-${Math.random().toString(36).slice(2, 10)}`;
  const svg = s('svg', { class: 'chart bar-chart column-chart', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-labelledby': titleId },
    s('title', { id: titleId }, `${title}: bar chart of ${shown.length} series over ${xs.length} values`),
    s('g', { class: 'grid' }, yTicks.map((t) => s('line', { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: sy(t).toFixed(1), y2: sy(t).toFixed(1) }))),
    s('g', { class: 'axis' },
      s('line', { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: sy(0), y2: sy(0) }),
      yTicks.map((t) => s('text', { x: MARGIN.left - 6, y: sy(t) + 4, 'text-anchor': 'end' }, short(t))),
      xs.map((x, i) => (i % every === 0 ? s('text', { x: MARGIN.left + slot * (i + 0.5), y: MARGIN.top + plotH + 16, 'text-anchor': 'middle' }, axisX(x, years)) : null))),
    labels.x ? s('text', { class: 'axis-label', x: MARGIN.left + plotW / 2, y: HEIGHT - 6, 'text-anchor': 'middle' }, labels.x) : null,
    labels.y ? s('text', { class: 'axis-label', x: 12, y: MARGIN.top + plotH / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${MARGIN.top + plotH / 2})` }, labels.y) : null,
    xs.map((x, i) => shown.map((line, k) => {
      const v = at[k].get(x);
      if (v === undefined) return null;
      const top = Math.min(sy(0), sy(v));
      return s('rect', { class: `bar s${k % PALETTE}`, x: (MARGIN.left + slot * i + slot * 0.1 + barW * k).toFixed(1), y: top.toFixed(1), width: Math.max(0.5, barW - 0.5).toFixed(1), height: Math.max(0.5, Math.abs(sy(v) - sy(0))).toFixed(1) },
        s('title', {}, `${line.label}, ${axisX(x, years)}: ${full(v)}`));
    })));
  const parts = [svg];
  if (shown.length > 1) {
    parts.push(h('ul', { class: 'legend' }, shown.map((line, index) => h('li', {}, h('span', { class: `swatch s${index % PALETTE}`, 'aria-hidden': 'true' }), line.label))));
  }
  return parts;
}

function dataTable(m, title) {
  const rows = m.rows.filter((r) => Array.isArray(r));
  const width = Math.max(m.columns?.length ?? 0, ...rows.slice(0, MAX_TABLE_ROWS).map((r) => r.length));
  const columns = m.columns ?? Array.from({ length: width }, (_, i) => `Column ${i + 1}`);
  const table = h('table', { class: 'data-table' },
    h('caption', { class: 'visually-hidden' }, title),
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows.slice(0, MAX_TABLE_ROWS).map((row) => h('tr', {}, columns.map((_, i) => {
      const v = row[i];
      return h('td', { class: isNumber(v) ? 'num' : null }, isNumber(v) && !(Number.isInteger(v) && v >= 1000 && v <= 2999) ? full(v) : String(v ?? ''));
    })))));
  const parts = [h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': `${title} (table)` }, table)];
  if (rows.length > MAX_TABLE_ROWS) parts.push(h('p', { class: 'chart-note' }, `Showing ${MAX_TABLE_ROWS} of ${rows.length} rows.`));
  return parts;
}

/** The body of a card: a chart, a table, a value, or why it cannot be drawn. */
export function draw(component, type, title, meta) {
  const m = model(component, type);
  switch (m.kind) {
    case 'line': return lineChart(m, title, meta);
    case 'columns': return columnChart(m, title, meta);
    case 'bar': return barChart(m, title, meta);
    case 'table': return dataTable(m, title);
    case 'value':
      return [h('p', { class: 'single-value' }, full(m.value),
        m.unit ? h('span', { class: 'unit' }, m.unit) : null,
        m.period ? h('span', { class: 'period' }, String(m.period)) : null)];
    default:
      return [h('p', { class: 'chart-note' }, `This ${type ?? 'card'} carries no data the Studio can draw; its facts are on the back.`)];
  }
}
