// audit.js — the audit view of one conversation: its timeline from the
// ledger, turn by turn and segment by segment, every frame exactly as it
// was sent with its seq and time, each answer, approval, lease change,
// cancel and canvas change, and the replay check's verdict per segment.
// Owns: reading the read-only routes (`…/timeline?raw=true`, `…/check`)
// through the package's StudioClient, and laying them out. Must never: change the conversation, or show a
// frame other than the bytes the log holds.

import { h, replace } from './dom.js';
import { clock, iso } from './format.js';

const VERDICTS = {
  same: 'replays the same',
  differs: 'differs on replay',
  skipped: 'not compared: the server re-planned it',
  unknown: 'not checked',
};

function parse(text) {
  if (typeof text !== 'string') return text ?? null;
  try { return JSON.parse(text); } catch { return null; }
}

function time(record) {
  return h('time', { datetime: iso(record.timestamp_ms), title: iso(record.timestamp_ms) }, clock(record.timestamp_ms));
}

function json(text) {
  return h('pre', {}, typeof text === 'string' ? text : JSON.stringify(text, null, 2));
}

function frameSummary(frame) {
  if (!frame) return '';
  switch (frame.event) {
    case 'message.delta':
    case 'message.complete': return frame.text.length > 80 ? `${frame.text.slice(0, 79)}…` : frame.text;
    case 'activity.step': return `${frame.step_id} ${frame.status}: ${frame.label}`;
    case 'plan.proposed': return `plan v${frame.version}, ${frame.steps?.length ?? 0} steps, pause ${frame.interrupt_id}${frame.switch_failed ? `, switch failed (${frame.switch_failed.code})` : ''}`;
    case 'plan.versioned': return `v${frame.version} replaces ${frame.supersedes}`;
    case 'plan.approved': return frame.title ?? '';
    case 'elicitation.request': return `${frame.questions?.length ?? 0} question(s), pause ${frame.interrupt_id}`;
    case 'component.created':
    case 'component.revised': return `${frame.component_id} r${frame.revision}: ${frame.title ?? ''}`;
    case 'composition.updated': return `canvas r${frame.composition?.revision}, ${frame.composition?.blocks?.length ?? 0} blocks`;
    case 'suggestions': return (frame.suggestions ?? []).join(' · ');
    case 'error': return `${frame.error?.code}: ${frame.error?.detail ?? ''}`;
    case 'done': return `trace ${frame.trace_id}`;
    default: return '';
  }
}

function verdictBadge(check) {
  const kind = check?.live ? 'live' : check?.verdict ?? 'unknown';
  const text = check?.live ? `still streaming; ${VERDICTS[check.verdict] ?? check.verdict} so far` : VERDICTS[kind] ?? kind;
  return h('span', { class: `verdict verdict-${kind}`, dataset: { verdict: check?.verdict ?? 'unknown' } }, text);
}

class SegmentBlock {
  constructor(claim, record, check) {
    this.rows = h('tbody');
    this.renewals = 0;
    this.lastRenewal = null;
    this.tail = h('ul', { class: 'audit-list' });
    this.renewalLine = h('li', { class: 'renewals', hidden: true });
    const diff = check?.verdict === 'differs' && check.differs
      ? h('div', { class: 'audit-diff' }, `First difference at agent frame ${check.differs.index}:`,
        h('div', {}, 'recorded:', json(check.differs.recorded ?? '(none)')), h('div', {}, 'now:', json(check.differs.now ?? '(none)')))
      : null;
    this.el = h('section', { class: 'audit-segment', dataset: { segment: claim.segment } },
      h('h4', {}, `Segment ${claim.segment}`, verdictBadge(check)),
      h('p', {}, 'Claimed at ', time(record), ` by ${claim.owner}, lease ${claim.ttl_ms} ms, first seq ${claim.first_seq} (position ${record.position}).`),
      diff,
      h('table', {}, h('thead', {}, h('tr', {}, ['seq', 'time', 'frame', 'summary', 'as sent'].map((c) => h('th', { scope: 'col' }, c)))), this.rows),
      this.tail);
    this.tail.append(this.renewalLine);
  }

  frame(payload, record) {
    const frame = parse(payload.frame);
    this.rows.append(h('tr', { class: 'audit-frame', dataset: { seq: payload.seq, event: frame?.event ?? '' } },
      h('td', { class: 'num' }, String(payload.seq)),
      h('td', {}, time(record)),
      h('td', {}, frame?.event ?? '?'),
      h('td', {}, frameSummary(frame)),
      h('td', {}, h('details', {}, h('summary', {}, 'JSON'), json(payload.frame)))));
  }

  renewed(record) {
    this.renewals += 1;
    this.renewalLine.hidden = false;
    replace(this.renewalLine, `Lease renewed ${this.renewals} time${this.renewals === 1 ? '' : 's'}, last at `, time(record), '.');
  }

  note(...parts) {
    this.tail.append(h('li', {}, ...parts));
  }
}

export class AuditView {
  /** `studio`: the StudioClient; `root`: where the view goes. */
  constructor({ studio, root }) {
    this.studio = studio;
    this.root = root;
  }

  /** Shows the audit of `conversationId`. */
  async show(conversationId) {
    const status = h('p', { role: 'status' }, 'Reading the log…');
    const refresh = h('button', { type: 'button', onclick: () => this.show(conversationId) }, 'Refresh');
    const back = h('a', { href: `#/c/${encodeURIComponent(conversationId)}` }, 'Back to the chat');
    replace(this.root, h('div', { class: 'audit-head' }, h('span', {}, 'Conversation ', h('code', {}, conversationId)), back, refresh), status);
    const settle = (promise) => promise.then((body) => ({ ok: true, body, ...body }), (error) => {
      if (error?.name !== 'StudioError') throw error;
      return { ok: false, error: error.failure };
    });
    const [read, check] = await Promise.all([
      settle(this.studio.timeline(conversationId, { raw: true })),
      settle(this.studio.check(conversationId)),
    ]);
    if (!read.ok) {
      status.textContent = read.error.code === 'not_found' ? 'The server holds no such conversation for this token yet.' : read.error.detail;
      return;
    }
    const checks = new Map((check.ok ? check.body.segments : []).map((c) => [c.segment, c]));
    status.textContent = check.ok
      ? `${read.records.length} records. Replay check: ${check.body.same} segment(s) the same, ${check.body.differ} differing, ${check.body.skipped} not compared.`
      : `${read.records.length} records. The replay check could not run: ${check.error.detail}`;
    this.root.append(...this.layout(read.records, checks));
  }

  layout(records, checks) {
    const out = [];
    let turn = null;
    let segment = null;
    const turnBlock = (title, record) => {
      const list = h('ul', { class: 'audit-list' });
      const el = h('section', { class: 'audit-turn' }, h('h3', {}, title), h('p', {}, 'At ', time(record), ` (position ${record.position}).`), list);
      out.push(el);
      return { el, list };
    };
    const segments = new Map();
    for (const record of records) {
      const p = record.payload ?? {};
      switch (record.kind) {
        case 'studio.turn_requested': {
          const request = parse(p.request) ?? {};
          turn = turnBlock(`Turn ${p.turn}: ${request.message ?? ''}`, record);
          turn.el.dataset.turn = p.turn;
          turn.list.append(h('li', {}, h('details', {}, h('summary', {}, 'Request as accepted'), json(p.request))));
          segment = null;
          break;
        }
        case 'studio.segment_claimed': {
          turn ??= turnBlock('Before any turn', record);
          segment = new SegmentBlock(p, record, checks.get(p.segment));
          segments.set(p.segment, segment);
          turn.el.append(segment.el);
          break;
        }
        case 'studio.frame_sent':
          (segments.get(p.segment) ?? segment)?.frame(p, record);
          break;
        case 'studio.segment_renewed':
          segments.get(p.segment)?.renewed(record);
          break;
        case 'studio.segment_released':
          segments.get(p.segment)?.note('Released at ', time(record), `: ${p.end.toLowerCase()}.`);
          break;
        case 'studio.cancel_requested':
          (segments.get(p.segment) ?? segment)?.note(h('strong', {}, 'Cancel requested'), ' at ', time(record), '.');
          break;
        case 'studio.interrupt_answered': {
          const response = parse(p.response) ?? {};
          const target = turn ?? turnBlock('Answers', record);
          target.el.append(h('p', { class: 'audit-answer', dataset: { decision: response.decision ?? '' } },
            h('strong', {}, `Answer: ${response.decision ?? '?'}`), ` to ${p.interrupt_id} at `, time(record),
            h('details', {}, h('summary', {}, 'Answer as accepted'), json(p.response))));
          break;
        }
        case 'studio.plan_approved':
          (turn ?? turnBlock('Approvals', record)).el.append(h('p', { class: 'audit-approval' }, h('strong', {}, 'Plan approved'), ` (${p.interrupt_id}) at `, time(record), '.'));
          break;
        case 'studio.composition_mutated': {
          const mutation = parse(p.mutation) ?? {};
          const ops = (mutation.ops ?? []).map((op) => op.op).join(', ');
          (turn ?? turnBlock('Canvas', record)).el.append(h('p', { class: 'audit-mutation' },
            h('strong', {}, 'Canvas changed'), ` (${ops}) from revision ${mutation.expected_revision} at `, time(record),
            h('details', {}, h('summary', {}, 'Mutation as accepted'), json(p.mutation))));
          break;
        }
        case 'studio.request_applied':
          (turn ?? turnBlock('Requests', record)).el.append(h('p', {}, `Keyed request ${p.key} applied at `, time(record), '.'));
          break;
        default:
          (turn ?? turnBlock('Records', record)).list.append(h('li', { class: 'record-kind' }, `${record.kind} at position ${record.position}`));
      }
    }
    if (out.length === 0) out.push(h('p', {}, 'No records.'));
    return out;
  }
}
