// The jobs pages (#/jobs, #/jobs/ID) as HTML strings from API JSON: the filter form, the paged
// list and one job's page with its timeline (GET /api/v1/jobs/{id}: every try, where it went
// and why it ended). DOM-free (unit-tested in node); every value from the API passes esc().

import { clock, duration, esc, int, isNum, num, relative, stateLabel, usd } from './format.js';
import { fact, since } from './views.js';

export const JOB_STATES = ['queued', 'assigned', 'proving', 'done', 'failed', 'cancelled'];
export const JOB_KINDS = ['porep-c2', 'snap-update', 'window-post', 'winning-post'];
// The time ranges the list offers, in seconds back from now ('' = all time).
export const JOB_WINDOWS = { '': 'all time', 3600: 'last hour', 86400: 'last 24 h', 604800: 'last 7 days' };

const FILTER_KEYS = ['state', 'kind', 'client', 'request', 'instance', 'machine', 'window', 'late', 'at_risk'];

// The list's filters from the page's query (#/jobs?state=done&late=1): unknown keys and values
// that are not the form's own are dropped, so a hand-edited link cannot make a bad API call.
export function jobFilterFromQuery(query) {
  const get = (key) => (query.get(key) ?? '').trim();
  const id = (key) => (/^[1-9]\d{0,15}$/.test(get(key)) ? get(key) : '');
  return {
    state: JOB_STATES.includes(get('state')) ? get('state') : '',
    kind: JOB_KINDS.includes(get('kind')) ? get('kind') : '',
    client: get('client').slice(0, 256),
    request: get('request').slice(0, 256),
    instance: id('instance'),
    machine: id('machine'),
    window: get('window') in JOB_WINDOWS ? get('window') : '',
    late: get('late') === '1',
    at_risk: get('at_risk') === '1',
  };
}

// The page's own query for a filter (what a link to this view carries).
export function jobFilterQuery(filter) {
  const query = new URLSearchParams();
  for (const key of FILTER_KEYS) {
    const value = filter[key];
    if (value === true) query.set(key, '1');
    else if (value) query.set(key, String(value));
  }
  return query.toString();
}

// GET /api/v1/jobs's query for a filter at `now` (server time), one page after `cursor`.
export function jobsApiQuery(filter, now, { limit = 50, cursor = null } = {}) {
  const query = new URLSearchParams({ limit: String(limit) });
  for (const key of ['state', 'kind', 'client', 'request', 'instance', 'machine']) {
    if (filter[key]) query.set(key, String(filter[key]));
  }
  if (filter.window) query.set('since', String(Math.floor(now - Number(filter.window))));
  if (filter.late) query.set('late', '1');
  if (filter.at_risk) query.set('at_risk', '1');
  if (cursor) query.set('cursor', String(cursor));
  return query.toString();
}

export function jobsFilterForm(filter) {
  const options = (values, selected, any) => [`<option value="">${esc(any)}</option>`,
    ...values.map((v) => `<option value="${esc(v)}"${v === selected ? ' selected' : ''}>${esc(stateLabel(v))}</option>`)].join('');
  const windows = Object.entries(JOB_WINDOWS)
    .map(([v, label]) => `<option value="${esc(v)}"${v === filter.window ? ' selected' : ''}>${esc(label)}</option>`).join('');
  const text = (name, label, size, placeholder) =>
    `<label>${esc(label)} <input name="${name}" size="${size}" value="${esc(filter[name])}" placeholder="${esc(placeholder)}" data-testid="jobs-filter-${name}"></label>`;
  const check = (name, label) =>
    `<label><input type="checkbox" name="${name}" value="1"${filter[name] ? ' checked' : ''} data-testid="jobs-filter-${name}"> ${esc(label)}</label>`;
  return '<form class="toolbar filters" data-form="jobs" data-testid="jobs-filter">' +
    `<label>State <select name="state" data-testid="jobs-filter-state">${options(JOB_STATES, filter.state, 'any')}</select></label>` +
    `<label>Kind <select name="kind">${options(JOB_KINDS, filter.kind, 'any')}</select></label>` +
    text('request', 'Request id', 16, 'starts with…') +
    text('client', 'Client', 12, 'address') +
    text('instance', 'Instance', 6, 'id') +
    text('machine', 'Machine', 8, 'id') +
    `<label>Submitted <select name="window">${windows}</select></label>` +
    check('late', 'late') + check('at_risk', 'at risk') +
    '<button type="submit" data-testid="jobs-filter-apply">Apply</button>' +
    '<a href="#/jobs" class="small">clear</a></form>';
}

function jobStateBadge(state) {
  return `<span class="badge job-${esc(state)}">${esc(stateLabel(state))}</span>`;
}

// "on time", "late", … as core/job_latency.h settles it.
function timelinessBadge(t) {
  return `<span class="timeliness t-${esc(t)}">${esc(stateLabel(t))}</span>`;
}

// The deadline as the operator needs it: how long is left, or how late it is.
export function dueText(job, now) {
  if (!isNum(job.deadline_at)) return 'no deadline';
  const end = isNum(job.delivered_at) ? job.delivered_at : now;
  const left = job.deadline_at - end;
  if (isNum(job.delivered_at)) return left >= 0 ? `${duration(left)} to spare` : `${duration(-left)} late`;
  if (['failed', 'cancelled'].includes(job.state)) return `was due ${relative(job.deadline_at, now)}`;
  return left >= 0 ? `due in ${duration(left)}` : `${duration(-left)} overdue`;
}

function instanceLink(id) {
  return isNum(id) ? `<a href="#/instances/${esc(id)}" data-testid="job-instance-link">#${esc(id)}</a>` : '—';
}

export function hostLink(machineId) {
  return isNum(machineId) ? `<a href="#/hosts/${esc(machineId)}" data-testid="job-host-link">machine ${esc(machineId)}</a>` : '—';
}

export function jobsTable(rows, now) {
  if (!Array.isArray(rows)) return '<p class="empty">Loading jobs…</p>';
  if (!rows.length) return '<p class="empty" data-testid="jobs-empty">No jobs match.</p>';
  const body = rows.map((j) => `<tr data-testid="job-row" data-id="${esc(j.id)}" data-state="${esc(j.state)}" data-timeliness="${esc(j.timeliness)}" data-delivered="${isNum(j.delivered_at) ? 1 : 0}">` +
    `<td class="num"><a href="#/jobs/${esc(j.id)}" data-testid="job-link">${esc(j.id)}</a></td>` +
    `<td class="mono">${esc(j.request_id)}</td>` +
    `<td>${esc(j.kind)}</td>` +
    `<td>${jobStateBadge(j.state)}</td>` +
    `<td>${timelinessBadge(j.timeliness)}</td>` +
    `<td>${esc(j.client || '—')}</td>` +
    `<td class="num">${esc(int(j.attempts))}</td>` +
    `<td>${instanceLink(j.instance_id)}</td>` +
    `<td title="${esc(clock(j.submitted_at))}">${since(j.submitted_at, now)} ago</td>` +
    `<td class="num">${esc(isNum(j.queue_wait_s) ? duration(j.queue_wait_s) : '—')}</td>` +
    `<td class="num">${esc(isNum(j.end_to_end_s) ? duration(j.end_to_end_s) : '—')}</td>` +
    `<td>${esc(dueText(j, now))}</td>` +
    `<td class="num">${esc(j.state === 'done' ? usd(j.earned_usd, 4) : '—')}</td>` +
    `<td class="error-cell">${esc(j.error || '')}</td></tr>`).join('');
  return '<table class="grid" data-testid="jobs-table"><thead><tr>' +
    '<th class="num">id</th><th>request</th><th>kind</th><th>state</th><th>timeliness</th><th>client</th>' +
    '<th class="num">tries</th><th>instance</th><th>submitted</th><th class="num">wait</th>' +
    '<th class="num">end-to-end</th><th>deadline</th><th class="num">earned</th><th>error</th>' +
    `</tr></thead><tbody>${body}</tbody></table>`;
}

// What each step of a job's timeline is called on its page.
const STEP_LABELS = {
  recorded: 'recorded', resubmitted: 'asked again', leased: 'leased', hedged: 'second prover started',
  input_fetched: 'input fetched',
  proving: 'proving', proved: 'proof accepted', proof_rejected: 'proof rejected',
  prover_failed: 'prover failed', requeued: 'back in queue', failed: 'failed', cancelled: 'cancelled',
  delivered: 'delivered', undelivered: 'not delivered',
};
const BAD_STEPS = new Set(['proof_rejected', 'prover_failed', 'requeued', 'failed', 'undelivered', 'resubmitted']);

export function jobTimeline(job) {
  const steps = Array.isArray(job.timeline) ? job.timeline : [];
  if (!steps.length) return '<p class="empty">No steps recorded (a job from before timelines were kept).</p>';
  const items = steps.map((s) => {
    const where = isNum(s.instance_id)
      ? ` on ${instanceLink(s.instance_id)}${isNum(s.machine_id) ? ` (${hostLink(s.machine_id)})` : ''}`
      : '';
    const attempt = s.attempt > 0 ? `<span class="muted">try ${esc(s.attempt)}</span>` : '';
    const offset = isNum(job.submitted_at) ? `+${duration(s.at - job.submitted_at)}` : '';
    return `<li class="step${BAD_STEPS.has(s.kind) ? ' bad' : ''}" data-testid="job-step" data-kind="${esc(s.kind)}">` +
      `<time title="${esc(clock(s.at))}">${esc(offset)}</time>` +
      `<span class="kind">${esc(STEP_LABELS[s.kind] ?? s.kind)}</span>` +
      `<span class="msg">${attempt}${where}${s.detail ? `${attempt || where ? ' — ' : ''}${esc(s.detail)}` : ''}</span></li>`;
  }).join('');
  const cut = job.timeline_truncated ? '<p class="muted">Only the newest steps are shown.</p>' : '';
  return `${cut}<ol class="timeline job-timeline" data-testid="job-timeline">${items}</ol>`;
}

export function jobPage(job, now) {
  const proveS = isNum(job.prove_ms) && job.prove_ms > 0 ? job.prove_ms / 1000 : null;
  const facts = '<dl class="facts">' +
    fact('request id', `<span class="mono">${esc(job.request_id)}</span>`) +
    fact('kind', esc(job.kind)) +
    fact('client', esc(job.client || '—')) +
    fact('submitted', `${esc(clock(job.submitted_at))} <span class="muted">${since(job.submitted_at, now)} ago</span>`) +
    fact('deadline', `${esc(clock(job.deadline_at))} <span class="muted">${esc(dueText(job, now))}</span>`) +
    fact('queue wait', esc(isNum(job.queue_wait_s) ? duration(job.queue_wait_s) : '—')) +
    fact('proving', esc(isNum(proveS) ? `${num(proveS, 1)} s` : '—')) +
    fact('end-to-end', esc(isNum(job.end_to_end_s) ? duration(job.end_to_end_s) : '—')) +
    fact('delivered', esc(clock(job.delivered_at))) +
    fact('tries', `${esc(int(job.attempts))}${job.rejections ? ` <span class="bad">${esc(int(job.rejections))} rejected by the client</span>` : ''}`) +
    fact('instance', instanceLink(job.instance_id) +
      (isNum(job.hedge_instance_id) ? ` <span class="muted">and a second copy on</span> ${instanceLink(job.hedge_instance_id)}` : '')) +
    fact('host', hostLink(job.machine_id)) +
    fact('earned', esc(usd(job.earned_usd, 4))) +
    fact('cost', isNum(job.instance_cost_per_proof_usd)
      ? `${esc(usd(job.instance_cost_per_proof_usd, 4))} <span class="muted">its instance's spend per proof</span>`
      : '—') +
    fact('input', `${esc(int(job.input_bytes))} bytes <span class="muted mono" title="sha256">${esc(String(job.input_digest ?? '').slice(0, 16))}</span>`) +
    (job.proof_digest ? fact('proof sha256', `<span class="mono">${esc(job.proof_digest.slice(0, 16))}…</span>`) : '') +
    (job.error ? fact('error', `<span class="bad">${esc(job.error)}</span>`) : '') +
    '</dl>';
  return `<div class="job-page" data-testid="job-page" data-id="${esc(job.id)}" data-state="${esc(job.state)}">` +
    '<div class="page-head"><a href="#/jobs" class="back">← jobs</a>' +
    `<h1>Job ${esc(job.id)} ${jobStateBadge(job.state)} ${timelinessBadge(job.timeliness)}</h1>` +
    '<div class="spacer"></div><button type="button" class="small" data-action="refresh-job">Refresh</button></div>' +
    `<section class="panel"><h2>Facts</h2>${facts}</section>` +
    `<section class="panel"><h2>Timeline</h2>${jobTimeline(job)}</section></div>`;
}
