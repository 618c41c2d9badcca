// The dashboard's views as HTML strings from API JSON: one innerHTML per table, buttons carry
// data-action attributes for the single delegated listener in app.js. DOM-free (unit-tested
// in node). Every value from the API passes through esc().

import { barChart, intervalBar, scatterChart } from './charts.js';
import {
  byteRate, bytes, clock, duration, esc, gib, gpus, int, isNum, num, pct, perHour, relative,
  stateLabel, usd,
} from './format.js';
import { alertsBanner, instanceAlerts, livePanel, sshBlock, tuneForm } from './ops_views.js';

export const STATES = [
  'renting', 'booting', 'registered', 'fetching_params', 'warming_up', 'benchmarking',
  'proving', 'destroying', 'destroyed',
];

export function isDestroyable(state) {
  return state !== 'destroying' && state !== 'destroyed';
}

function proofs(n) {
  return `${int(n)} ${n === 1 ? 'proof' : 'proofs'}`;
}

export function stateBadge(state) {
  return `<span class="badge st-${esc(state)}">${esc(stateLabel(state))}</span>`;
}

// A live "time since" cell: app.js refreshes every [data-since] once a second.
export function since(epoch, now) {
  if (!isNum(epoch) || epoch <= 0) return '';
  return `<span class="since" data-since="${esc(epoch)}">${esc(duration(now - epoch))}</span>`;
}

function destroyButton(id, label = 'Destroy') {
  return `<button type="button" class="danger small" data-action="destroy" data-testid="destroy-button" data-id="${esc(id)}">${esc(label)}</button>`;
}

// ---- fleet header ---------------------------------------------------------------------------

export function card(label, value, cls = '', testid = '', title = '') {
  return `<div class="card ${cls}"${testid ? ` data-testid="${testid}"` : ''}${title ? ` title="${esc(title)}"` : ''}><div class="card-label">${esc(label)}</div><div class="card-value">${esc(value)}</div></div>`;
}

export function autopilotBlock(autopilot) {
  if (!autopilot || typeof autopilot !== 'object') return '';
  let status;
  let button = '';
  if (!autopilot.enabled) {
    status = '<span class="pill off">autopilot off</span>';
  } else if (autopilot.paused) {
    const by = autopilot.paused_by ? ` by ${esc(autopilot.paused_by)}` : '';
    status = `<span class="pill paused" title="paused${by}">autopilot paused</span>`;
    button = '<button type="button" class="small" data-action="autopilot" data-paused="false" data-testid="autopilot-toggle">Resume</button>';
  } else {
    status = '<span class="pill on">autopilot on</span>';
    button = '<button type="button" class="small" data-action="autopilot" data-paused="true" data-testid="autopilot-toggle">Pause</button>';
  }
  const error = autopilot.last_error
    ? `<span class="pill bad" title="${esc(autopilot.last_error)}">last run failed</span>`
    : '';
  return `<div class="autopilot" data-testid="autopilot-status" data-enabled="${autopilot.enabled ? 'true' : 'false'}" data-paused="${autopilot.paused ? 'true' : 'false'}">${status}${error}${button}</div>`;
}

// What the profit card counts: delivered jobs' revenue once the gateway saw a job, before that
// an estimate from measured proof rates (proofs nobody asked for).
function profitLabel(summary) {
  return summary.profit_basis === 'jobs_delivered' ? 'profit / hour (jobs)' : 'profit / hour (est.)';
}

export function fleetHeader(snapshot) {
  const s = snapshot?.summary ?? {};
  const profit = s.profit_per_hour;
  const cards = [
    card('proofs / hour', num(s.proofs_per_hour, 1), '', 'fleet-proofs-per-hour'),
    card('$ / hour', usd(s.dollars_per_hour), '', 'fleet-dollars-per-hour'),
    card('$ / proof', usd(s.cost_per_proof, 3), '', 'fleet-cost-per-proof'),
    card(profitLabel(s), usd(profit), isNum(profit) ? (profit >= 0 ? 'good' : 'bad') : '',
      'fleet-profit-per-hour', s.profit_reason),
    card('spent', usd(s.spend_usd), 'minor'),
    card('proofs', int(s.proofs), 'minor'),
  ].join('');
  const byState = s.by_state ?? {};
  const chips = STATES.map((state) => {
    const n = byState[state] ?? 0;
    return `<span class="chip st-${state}${n ? '' : ' zero'}" data-testid="state-count" data-state="${state}">${esc(stateLabel(state))} <b>${esc(n)}</b></span>`;
  }).join('');
  return `<div class="cards">${cards}</div><div class="chips">${chips}${hearingBlock(s.hearing)}${termsBlock(s.terms)}${replicaBlock(s.replica, snapshot?.at)}${autopilotBlock(snapshot?.autopilot)}</div>${alertsBanner(snapshot?.alerts, snapshot?.at)}${jobsPanel(s.jobs)}`;
}

// ---- gateway jobs -----------------------------------------------------------------------------

const JOB_KINDS = ['porep-c2', 'snap-update', 'window-post', 'winning-post'];

function p50p95(q) {
  if (!q || !isNum(q.p50)) return '—';
  return `${duration(q.p50)} / ${duration(q.p95)}`;
}

// The jobs panel under the fleet header: queue, arrivals, jobs in flight, latency, on-time share
// and money of the gateway's jobs (the fleet summary's "jobs"). Nothing without a gateway.
export function jobsPanel(jobs) {
  if (!jobs || typeof jobs !== 'object') return '';
  const open = jobs.open ?? {};
  const inFlight = (open.assigned ?? 0) + (open.proving ?? 0);
  const share = jobs.on_time_share;
  const queuedKinds = JOB_KINDS.filter((k) => (jobs.queued_by_kind?.[k] ?? 0) > 0)
    .map((k) => `${esc(k)} ${esc(int(jobs.queued_by_kind[k]))}`).join(', ');
  const windowS = isNum(jobs.window?.since) && isNum(jobs.at) ? jobs.at - jobs.window.since : null;
  const settled = (jobs.on_time ?? 0) + (jobs.late ?? 0) + (jobs.missed ?? 0);
  const cards = [
    card('queued', int(open.queued ?? 0), '', 'jobs-queued',
      queuedKinds || 'nothing waiting'),
    card('arrivals / hour', int(jobs.arrivals_last_hour), '', 'jobs-arrivals'),
    card('in flight', int(inFlight), '', 'jobs-in-flight'),
    card('wait p50 / p95', p50p95(jobs.queue_wait_s), 'minor', 'jobs-wait',
      `${jobs.queue_wait_s?.count ?? 0} leases; oldest queued ${duration(jobs.oldest_queued_s ?? 0)}`),
    card('end-to-end p50 / p95', p50p95(jobs.end_to_end_s), 'minor', 'jobs-e2e',
      `${jobs.end_to_end_s?.count ?? 0} proofs`),
    card('on time', pct(isNum(share) ? share * 100 : null),
      isNum(share) ? (share >= 0.95 ? 'good' : 'bad') : '', 'jobs-on-time',
      `${jobs.on_time ?? 0} of ${settled}: ${jobs.late ?? 0} late, ${jobs.missed ?? 0} failed`),
    card('realised $ / proof', usd(jobs.realised_cost_per_proof, 4), 'minor', 'jobs-realised-cost',
      `spend ${usd(jobs.spend_usd)} over ${jobs.delivered_on_time ?? 0} jobs delivered on time`),
    card('revenue / hour', usd(jobs.revenue_per_hour, 3), 'minor', 'jobs-revenue',
      `${usd(jobs.revenue_usd, 3)} in the window` +
        (jobs.delivered_unpriced ? `; ${jobs.delivered_unpriced} delivered jobs have no price` : '')),
    card('idle instance hours', num(jobs.idle_instance_hours, 1), 'minor', 'jobs-idle-hours',
      'accepted instances holding no job, in the window'),
  ].join('');
  const span = isNum(windowS) ? `last ${duration(windowS)}` : '';
  const cut = jobs.window?.truncated ? ' <span class="pill paused" title="more jobs than one report lists: figures cover the newest">truncated</span>' : '';
  return `<section class="jobs" data-testid="jobs-panel"><div class="jobs-title">Jobs <span class="muted">${esc(span)}</span>${cut}</div><div class="cards">${cards}</div></section>`;
}

// While the manager could not hear its agents (restart, stall, most agents silent at once) it
// judges nobody by silence; say so, with why, rather than let quiet rows look healthy.
// Replicas (issue 14): whether the replica serving this page leads, who does and for how long.
export function replicaBlock(replica, now) {
  if (!replica || typeof replica !== 'object') return '';
  const role = replica.leading ? 'leader' : 'follower';
  const leader = replica.leader;
  if (!leader || typeof leader !== 'object') {
    return `<span class="pill bad" data-testid="replica" data-role="${role}" title="this replica: ${esc(replica.replica_id)}">no leader: failover in progress</span>`;
  }
  const who = replica.leading ? 'this replica leads' : `follower; leader ${esc(leader.replica_id)}`;
  const age = isNum(now) ? since(leader.taken_at, now) : '';
  return `<span class="pill on" data-testid="replica" data-role="${role}" title="this replica: ${esc(replica.replica_id)}; epoch ${esc(leader.epoch)}">${who} · ${age}</span>`;
}

// The live rentals' terms (vast's interruptible rentals, src/core/rental_terms.h): shown once any
// rental is a bid or the market holds one stopped; storage goes on while stopped.
export function termsBlock(terms) {
  if (!terms || typeof terms !== 'object') return '';
  const bids = isNum(terms.bid_instances) ? terms.bid_instances : 0;
  const stopped = isNum(terms.market_stopped) ? terms.market_stopped : 0;
  if (bids <= 0 && stopped <= 0) return '';
  const onDemand = isNum(terms.on_demand_instances) ? terms.on_demand_instances : 0;
  const stops = isNum(terms.market_stops) ? terms.market_stops : 0;
  const parts = [`${int(bids)} bid · ${int(onDemand)} on-demand`];
  if (stopped > 0) parts.push(`${int(stopped)} stopped by the market`);
  parts.push(`${int(stops)} market stops`);
  if (isNum(terms.storage_usd_per_hour)) parts.push(`storage ${usd(terms.storage_usd_per_hour, 3)}/h`);
  const cls = stopped > 0 ? 'paused' : 'on';
  return `<span class="pill ${cls}" data-testid="terms" title="live rentals by terms; a stopped rental pays its disk only">${esc(parts.join(' · '))}</span>`;
}

export function hearingBlock(hearing) {
  if (!hearing || typeof hearing !== 'object' || hearing.judging_silence !== false) return '';
  return `<span class="pill paused" data-testid="hearing" data-cause="${esc(hearing.cause)}" title="${esc(hearing.reason)}">silence not judged</span>`;
}

// ---- instances ------------------------------------------------------------------------------

const SORTS = {
  id: (r) => r.id,
  state: (r) => STATES.indexOf(r.state) * 1e9 + r.id,
  gpu: (r) => `${r.offer?.gpu_name ?? ''} ${String(r.offer?.num_gpus ?? 0).padStart(3, '0')}`,
  location: (r) => r.offer?.geolocation ?? '',
  dph: (r) => r.offer?.dph_total ?? 0,
  rate: (r) => r.verdict?.rate ?? -1,
  util: (r) => r.gpu_util ?? 0,
  spend: (r) => r.spend_usd ?? 0,
  proofs: (r) => (r.proofs_production ?? 0) + (r.proofs_benchmark ?? 0),
};

export function sortInstances(rows, key = 'state', dir = 1) {
  const by = SORTS[key] ?? SORTS.state;
  return [...rows].sort((a, b) => {
    const x = by(a);
    const y = by(b);
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.id - b.id;
  });
}

function paramsCell(r) {
  const total = r.params_total_bytes;
  const done = r.params_done_bytes ?? 0;
  if (!isNum(total) || total <= 0) {
    return r.state === 'fetching_params' ? '<span class="muted">starting…</span>' : '<span class="muted">—</span>';
  }
  if (done >= total) return `<span class="ok" title="${esc(bytes(total))}">✓ ${esc(bytes(total))}</span>`;
  if (!isDestroyable(r.state)) return `<span class="muted">${esc(pct((done / total) * 100))} fetched</span>`;
  const rate = r.params_rate_bps;
  const eta = isNum(rate) && rate > 0 ? `ETA ${duration((total - done) / rate)}` : 'stalled';
  // A plain bar: hundreds of native <progress> elements are slow to lay out.
  const percent = Math.min(100, (done / total) * 100).toFixed(1);
  return `<span class="pbar" role="progressbar" aria-valuenow="${percent}" aria-valuemin="0" aria-valuemax="100"><span style="width:${percent}%"></span></span>` +
    `<div class="sub">${esc(pct((done / total) * 100))} · ${esc(byteRate(rate))} · ${esc(eta)}</div>`;
}

function benchCell(r) {
  const v = r.verdict;
  if (v && isNum(v.rate)) {
    const decided = v.decision && v.decision !== 'continue'
      ? ` <span class="decision ${esc(v.decision)}">${esc(v.decision)}</span>` : '';
    return `<div>${esc(proofs(v.samples))} · ${esc(perHour(v.rate))}${decided}</div>` +
      `${intervalBar({ rate: v.rate, low: v.low, high: v.high, breakEven: v.break_even_rate })}` +
      `<div class="sub">[${esc(num(v.low))}–${esc(num(v.high))}] vs ${esc(num(v.break_even_rate))}/h</div>`;
  }
  if (r.proofs_benchmark > 0) return esc(proofs(r.proofs_benchmark));
  return '<span class="muted">—</span>';
}

export function instanceRow(r, now, jobsInFlight = null) {
  const o = r.offer ?? {};
  const stateSince = r.state === 'destroyed' && isNum(r.destroyed_at) ? r.destroyed_at : r.state_since;
  const reason = r.destroy_reason ? ` title="${esc(r.destroy_reason)}"` : '';
  const deadline = isNum(r.deadline_at) ? `<div class="sub">deadline ${esc(relative(r.deadline_at, now))}</div>` : '';
  const running = ['warming_up', 'benchmarking', 'proving'].includes(r.state);
  return `<tr data-testid="instance-row" data-id="${esc(r.id)}" data-state="${esc(r.state)}">` +
    `<td><a href="#/instances/${esc(r.id)}" data-testid="instance-link">#${esc(r.id)}</a>` +
    `<div class="sub">${r.market_id ? `vast ${esc(r.market_id)}` : 'no market id'}</div></td>` +
    `<td${reason}>${stateBadge(r.state)}<div class="sub">${since(stateSince, now)}</div>${deadline}` +
    `${r.destroy_reason ? `<div class="sub reason">${esc(r.destroy_reason)}</div>` : ''}</td>` +
    `<td>${esc(gpus(o.num_gpus, o.gpu_name))}<div class="sub">machine ${esc(o.machine_id ?? '—')}</div></td>` +
    `<td>${esc(o.geolocation || '—')}</td>` +
    `<td class="num">${esc(usd(o.dph_total, 3))}${termsSub(r)}</td>` +
    `<td class="params">${paramsCell(r)}</td>` +
    `<td class="bench">${benchCell(r)}</td>` +
    `<td class="num">${r.state === 'proving' && r.verdict ? esc(perHour(r.verdict.rate)) : '<span class="muted">—</span>'}</td>` +
    `<td class="num">${running || r.gpu_util > 0 ? esc(pct(r.gpu_util)) : '<span class="muted">—</span>'}</td>` +
    `<td class="num">${esc(usd(r.spend_usd))}</td>` +
    `<td class="num">${esc(int(r.proofs_production))}${r.proofs_benchmark ? `<div class="sub">+${esc(r.proofs_benchmark)} bench</div>` : ''}` +
    `${jobsCell(r, jobsInFlight)}</td>` +
    `<td class="actions">${isDestroyable(r.state) ? destroyButton(r.id) : ''}</td></tr>`;
}

// Jobs an instance holds now (the fleet summary's jobs.in_flight_by_instance); an accepted one
// holding none is idle and says so.
function jobsCell(r, jobsInFlight) {
  if (!jobsInFlight || typeof jobsInFlight !== 'object') return '';
  const n = jobsInFlight[String(r.id)] ?? 0;
  if (n > 0) return `<div class="sub" data-testid="instance-jobs" data-jobs="${esc(n)}">${esc(n)} ${n === 1 ? 'job' : 'jobs'} in flight</div>`;
  if (r.state === 'proving') return '<div class="sub muted" data-testid="instance-jobs" data-jobs="0">idle</div>';
  return '';
}

const INSTANCE_COLUMNS = [
  ['id', 'Instance'], ['state', 'State'], ['gpu', 'GPU'], ['location', 'Location'],
  ['dph', '$/hour'], [null, 'Parameters'], [null, 'Benchmark'], ['rate', 'Rate'],
  ['util', 'GPU util'], ['spend', 'Spend'], ['proofs', 'Proofs'], [null, ''],
];

export function instancesTable(instances, now, { sortKey = 'state', sortDir = 1, showDestroyed = true, jobsInFlight = null } = {}) {
  const rows = sortInstances(
    (instances ?? []).filter((r) => showDestroyed || r.state !== 'destroyed'), sortKey, sortDir);
  const head = INSTANCE_COLUMNS.map(([key, label]) => {
    if (!key) return `<th>${esc(label)}</th>`;
    const mark = key === sortKey ? (sortDir > 0 ? ' ▲' : ' ▼') : '';
    return `<th class="sortable" data-action="sort" data-sort="${key}">${esc(label)}${mark}</th>`;
  }).join('');
  const body = rows.length
    ? rows.map((r) => instanceRow(r, now, jobsInFlight)).join('')
    : `<tr class="empty-row"><td colspan="${INSTANCE_COLUMNS.length}">No instances. Rent one from <a href="#/offers">Offers</a>.</td></tr>`;
  return `<table class="grid instances" data-testid="instances-table"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

// ---- one instance ---------------------------------------------------------------------------

// An instance's spend with what vast billed besides compute: its disk (every second it exists,
// loading and stopped included) and bandwidth (src/core/billing.h).
export function spendParts(r) {
  const storage = isNum(r.storage_spend_usd) ? r.storage_spend_usd : 0;
  const bandwidth = isNum(r.bandwidth_spend_usd) ? r.bandwidth_spend_usd : 0;
  if (storage <= 0 && bandwidth <= 0) return esc(usd(r.spend_usd));
  const disk = isNum(r.disk_gb) && r.disk_gb > 0 ? ` (${r.disk_gb} GB)` : '';
  return `${esc(usd(r.spend_usd))} <span class="muted">storage ${esc(usd(storage))}${esc(disk)}, ` +
    `bandwidth ${esc(usd(bandwidth))}</span>`;
}

export function fact(label, value) {
  return `<div class="fact"><dt>${esc(label)}</dt><dd>${value}</dd></div>`;
}

export function proofChart(samples) {
  const sorted = [...(samples ?? [])].sort((a, b) => a.seq - b.seq);
  const points = sorted.map((s, i) => ({
    x: i + 1,
    y: s.seconds,
    cls: s.phase,
    shape: s.phase === 'warmup' ? 'ring' : s.phase === 'production' ? 'square' : 'circle',
    title: `proof ${i + 1} (${s.phase}): ${num(s.seconds, 1)} s at ${clock(s.at)}`,
  }));
  const measured = sorted.filter((s) => s.phase !== 'warmup').map((s) => s.seconds).sort((a, b) => a - b);
  const median = measured.length ? measured[Math.floor(measured.length / 2)] : null;
  const chart = scatterChart({
    points,
    hLines: median === null ? [] : [{ y: median, label: `median ${num(median, 0)} s`, cls: 'median' }],
    xLabel: 'proof',
    yLabel: 'seconds',
    xIntegers: true,
    emptyText: 'No proofs yet',
  });
  const legend = '<div class="legend"><span class="lg warmup">○ warm-up</span><span class="lg benchmark">● benchmark</span><span class="lg production">■ production</span></div>';
  return `<div data-testid="proof-chart">${chart}${points.length ? legend : ''}</div>`;
}

export function memoryPanel(instance) {
  const plan = instance.plan && typeof instance.plan === 'object' ? instance.plan : null;
  const observed = isNum(instance.peak_memory_gib) && instance.peak_memory_gib > 0 ? instance.peak_memory_gib : null;
  if (!plan && observed === null) return '<p class="empty">The agent has not reported a plan or memory use yet.</p>';
  const bars = [];
  if (plan) {
    bars.push({ label: 'planned peak', value: plan.expected_peak_gib, cls: 'plan' });
    bars.push({ label: 'cuzk budget', value: plan.total_budget_gib, cls: 'budget' });
  }
  if (observed !== null) {
    const over = plan && isNum(plan.expected_peak_gib) && observed > plan.expected_peak_gib;
    bars.push({ label: 'observed peak', value: observed, cls: over ? 'over' : 'observed' });
  }
  const chart = barChart({ bars, limit: plan?.usable_ram_gib, limitLabel: 'usable RAM', unit: ' GiB' });
  let facts = '';
  if (plan) {
    facts = '<dl class="facts small">' +
      fact('partitions', `${esc(int(plan.partitions))} <span class="muted">(warm-up ${esc(int(plan.warmup_partitions))})</span>`) +
      fact('usable RAM', esc(gib(plan.usable_ram_gib, 1))) +
      fact('GPUs', esc(int(plan.gpus))) +
      fact('GPU workers / device', esc(int(plan.gpu_workers_per_device))) +
      fact('synthesis threads', esc(int(plan.synthesis_threads))) +
      fact('proofs in flight', esc(int(plan.proofs_in_flight))) +
      '</dl>';
    if (Array.isArray(plan.reasons) && plan.reasons.length) {
      facts += `<ul class="reasons">${plan.reasons.map((r) => `<li>${esc(r)}</li>`).join('')}</ul>`;
    }
  }
  return `<div data-testid="memory-panel">${chart}${facts}</div>`;
}

export function eventTimeline(events) {
  const list = [...(events ?? [])].sort((a, b) => b.at - a.at || b.id - a.id);
  if (!list.length) return '<p class="empty">No events.</p>';
  const items = list.map((e) => {
    const hasData = e.data && typeof e.data === 'object' && Object.keys(e.data).length > 0;
    const data = hasData ? `<details><summary>data</summary><pre>${esc(JSON.stringify(e.data, null, 2))}</pre></details>` : '';
    return `<li class="ev ev-${esc(e.kind)}"><time>${esc(clock(e.at))}</time><span class="kind">${esc(e.kind)}</span><span class="msg">${esc(e.message)}${data}</span></li>`;
  }).join('');
  return `<ol class="timeline" data-testid="event-timeline">${items}</ol>`;
}

// An interruptible rental's bid under its listed price (core/rental_terms.h); on-demand shows none.
function termsSub(r) {
  if (!isNum(r.bid_price)) return '';
  const stops = r.market_stops ? ` · ${int(r.market_stops)} stops` : '';
  return `<div class="sub" data-testid="bid-terms">bid ${esc(usd(r.bid_price, 3))}${esc(stops)}</div>`;
}

export function instancePage(detail, now) {
  const r = detail.instance;
  const o = r.offer ?? {};
  const v = r.verdict;
  const facts = '<dl class="facts">' +
    fact('GPU', esc(gpus(o.num_gpus, o.gpu_name))) +
    fact('machine / host', `${isNum(o.machine_id) ? `<a href="#/hosts/${esc(o.machine_id)}" data-testid="instance-host-link">${esc(o.machine_id)}</a>` : '—'} / ${esc(o.host_id ?? '—')}`) +
    fact('location', esc(o.geolocation || '—')) +
    fact('$ / hour', esc(usd(o.dph_total, 3))) +
    fact('terms', isNum(r.bid_price)
      ? `interruptible: bid ${esc(usd(r.bid_price, 3))}/h · ${esc(int(r.market_stops ?? 0))} market stops`
      : 'on-demand') +
    fact('RAM (usable)', esc(gib(o.usable_ram_gib, 0))) +
    fact('vast instance', esc(r.market_id ?? '—')) +
    fact('market status', `${esc(r.market_status || '—')} ${r.market_status_since ? `<span class="muted">${since(r.market_status_since, now)}</span>` : ''}`) +
    fact('created', esc(clock(r.created_at))) +
    fact('origin', esc(r.origin)) +
    fact('last heartbeat', r.last_heartbeat_at > 0 ? `${since(r.last_heartbeat_at, now)} ago` : '—') +
    fact('spend', spendParts(r)) +
    fact('proofs', `${esc(int(r.proofs_production))} production, ${esc(int(r.proofs_benchmark))} benchmark` +
      ` <a href="#/jobs?instance=${esc(r.id)}" data-testid="instance-jobs-link">its jobs</a>`) +
    fact('crashes / OOMs', `${esc(int(r.prover_crashes))} / ${esc(int(r.ooms))}`) +
    fact('GPU util', esc(pct(r.gpu_util))) +
    fact('SSH', sshBlock(detail.ssh)) +
    (r.destroy_reason ? fact('destroy reason', esc(r.destroy_reason)) : '') +
    '</dl>';
  const verdict = v && isNum(v.rate)
    ? `<div class="verdict"><div>${esc(perHour(v.rate))} over ${esc(proofs(v.samples))}, interval ${esc(num(v.low))}–${esc(num(v.high))}/h, break-even ${esc(num(v.break_even_rate))}/h: <span class="decision ${esc(v.decision)}">${esc(v.decision)}</span></div>` +
      `${intervalBar({ rate: v.rate, low: v.low, high: v.high, breakEven: v.break_even_rate, width: 360, height: 22 })}` +
      `${v.reason ? `<div class="sub">${esc(v.reason)}</div>` : ''}</div>`
    : '<p class="empty">No benchmark verdict yet.</p>';
  const logs = detail.logs
    ? `<pre class="logs" data-testid="instance-logs">${esc(detail.logs)}</pre>`
    : '<p class="empty">No logs received.</p>';
  return `<div class="instance-page" data-testid="instance-page" data-id="${esc(r.id)}" data-state="${esc(r.state)}">` +
    `<div class="page-head"><a href="#/instances" class="back">← instances</a>` +
    `<h1>Instance #${esc(r.id)} ${stateBadge(r.state)} <small>${since(r.state === 'destroyed' && r.destroyed_at ? r.destroyed_at : r.state_since, now)}</small></h1>` +
    `<div class="spacer"></div><button type="button" class="small" data-action="refresh-instance">Refresh</button>` +
    `${isDestroyable(r.state) ? destroyButton(r.id, 'Destroy instance') : ''}</div>` +
    `<section class="panel"><h2>Facts</h2>${facts}</section>` +
    `<section class="panel"><h2>Alerts</h2>${instanceAlerts(detail.alerts, now)}</section>` +
    `<section class="panel"><h2>Live prover and GPUs</h2>${livePanel(detail.live, now)}</section>` +
    `<section class="panel"><h2>Tune</h2>${tuneForm(r)}</section>` +
    `<section class="panel"><h2>Benchmark</h2>${verdict}</section>` +
    `<section class="panel"><h2>Proof times</h2>${proofChart(detail.samples)}</section>` +
    `<section class="panel"><h2>Memory: plan vs observed</h2>${memoryPanel(r)}</section>` +
    `<section class="panel"><h2>Events</h2>${eventTimeline(detail.events)}</section>` +
    `<section class="panel"><h2>Recent logs</h2>${logs}</section></div>`;
}

// ---- offers ---------------------------------------------------------------------------------

export function offersForm({ q = '', sort = 'cost', limit = 50 } = {}) {
  const option = (value, label) => `<option value="${value}"${sort === value ? ' selected' : ''}>${label}</option>`;
  return `<form class="toolbar" data-form="offers" data-testid="offers-form">` +
    `<label>Query <input name="q" size="48" value="${esc(q)}" placeholder="num_gpus>=1 gpu_ram>=20 reliability>0.98" data-testid="offers-query"></label>` +
    `<label>Sort <select name="sort">${option('cost', '$ / proof')}${option('profit', 'profit / hour')}</select></label>` +
    `<label>Limit <input name="limit" type="number" min="1" max="1000" value="${esc(limit)}"></label>` +
    `<button type="submit" data-testid="offers-search">Search</button></form>`;
}

// "Did this machine fail before?": its rentals, runs, median rate, last verdict and an active
// bad-host entry with its reason (the row's `history`, from the manager's store).
export function machineHistory(h) {
  if (!h || (!h.rentals && !h.bad_host)) return '<span class="muted">never rented</span>';
  const parts = [];
  if (h.rentals) parts.push(`${int(h.rentals)} rental${h.rentals === 1 ? '' : 's'}`);
  if (h.runs) parts.push(`${int(h.runs)} run${h.runs === 1 ? '' : 's'}`);
  if (isNum(h.median_rate)) parts.push(`median ${num(h.median_rate)}/h`);
  const verdict = h.last_verdict
    ? `<div class="sub ${h.last_verdict === 'accept' ? 'good' : 'bad'}" data-testid="offer-last-verdict" title="${esc(h.last_verdict_reason ?? '')}">last: ${esc(h.last_verdict)}</div>`
    : '';
  const trouble = [h.ooms ? `${int(h.ooms)} OOM` : '', h.crashes ? `${int(h.crashes)} crash${h.crashes === 1 ? '' : 'es'}` : '']
    .filter(Boolean).join(', ');
  const blocked = h.bad_host
    ? `<div class="sub bad" data-testid="offer-bad-host">blocked (${esc(h.bad_host.source ?? '')}): ${esc(h.bad_host.reason ?? '')}</div>`
    : '';
  return `${esc(parts.join(' · '))}${verdict}${trouble ? `<div class="sub bad">${esc(trouble)}</div>` : ''}${blocked}`;
}

// The break-even every decision uses, and the other one where the two differ.
export function breakEvenCell(o) {
  const rate = isNum(o.break_even_rate) ? o.break_even_rate : o.min_rate;
  if (!o.break_evens_differ) return `${esc(num(rate))}/h`;
  const other = o.break_even_objective === 'target'
    ? `revenue ${num(o.revenue_break_even_rate)}/h`
    : `target $/proof ${num(o.target_break_even_rate)}/h`;
  return `${esc(num(rate))}/h <span class="muted">(${esc(o.break_even_objective ?? '')})</span><div class="sub" data-testid="offer-other-break-even">${esc(other)}</div>`;
}

export function offersTable(offers) {
  if (!offers) return '<p class="empty">Search the market to see ranked offers.</p>';
  if (!offers.length) return '<p class="empty">No offers match.</p>';
  const rows = offers.map((o, i) => {
    const reasons = Array.isArray(o.reasons) ? o.reasons : [];
    const flags = Array.isArray(o.data_flags) ? o.data_flags : [];
    const why = reasons.length || flags.length
      ? `<details><summary>${esc(reasons.length)} reasons${flags.length ? `, ${esc(flags.length)} data flags` : ''}</summary><ul class="reasons">${reasons.map((r) => `<li>${esc(r)}</li>`).join('')}${flags.map((f) => `<li class="flag">data: ${esc(f)}</li>`).join('')}</ul></details>`
      : '';
    const profit = o.expected_profit_per_hour;
    return `<tr data-testid="offer-row" data-offer-id="${esc(o.id)}">` +
      `<td class="num">${i + 1}</td>` +
      `<td>${esc(o.id)}<div class="sub">machine ${esc(o.machine_id)}</div></td>` +
      `<td>${esc(gpus(o.num_gpus, o.gpu_name))}<div class="sub">${esc(gib(o.usable_ram_gib))} · ${esc(num(o.usable_cores, 0))} cores</div></td>` +
      `<td>${esc(o.geolocation || '—')}<div class="sub">reliability ${esc(num((o.reliability ?? 0) * 100, 1))}%</div></td>` +
      `<td class="num">${esc(usd(o.dph_total, 3))}</td>` +
      `<td>${esc(perHour(o.predicted_rate))} <span class="muted">${esc(o.prediction_source ?? '')}</span>` +
      `${intervalBar({ rate: o.predicted_rate, low: o.predicted_rate_low, high: o.predicted_rate_high, breakEven: isNum(o.break_even_rate) ? o.break_even_rate : o.min_rate })}` +
      `<div class="sub">[${esc(num(o.predicted_rate_low))}–${esc(num(o.predicted_rate_high))}]</div></td>` +
      `<td class="num" data-testid="offer-break-even">${breakEvenCell(o)}</td>` +
      `<td data-testid="offer-history">${machineHistory(o.history)}</td>` +
      `<td class="num">${esc(int(o.partitions))}<span class="muted">/${esc(int(o.partitions_full))}</span></td>` +
      `<td class="num">${esc(num(o.setup_hours, 1))} h<div class="sub">${esc(usd(o.setup_cost_usd))}</div></td>` +
      `<td class="num">${esc(usd(o.expected_cost_per_proof, 3))}</td>` +
      `<td class="num ${isNum(profit) ? (profit >= 0 ? 'good' : 'bad') : ''}">${esc(usd(profit))}</td>` +
      `<td class="why">${why}</td>` +
      `<td class="actions"><button type="button" class="small primary" data-action="deploy" data-testid="deploy-button" data-offer-id="${esc(o.id)}" data-label="${esc(`${gpus(o.num_gpus, o.gpu_name)} at ${usd(o.dph_total, 3)}/h`)}">Deploy</button></td></tr>`;
  }).join('');
  return `<table class="grid offers" data-testid="offers-table"><thead><tr><th>#</th><th>Offer</th><th>GPU</th><th>Location</th><th>$/hour</th><th>Predicted rate</th><th>Break-even</th><th>Machine history</th><th>Partitions</th><th>Setup</th><th>$/proof</th><th>Profit/hour</th><th>Why</th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
}

// ---- hosts ----------------------------------------------------------------------------------

export function hostChart(history, { width = 220, height = 44, compact = true } = {}) {
  const runs = [...(history ?? [])].sort((a, b) => a.at - b.at);
  const points = runs.map((r) => {
    const marks = [r.contended ? 'contended' : '', r.throttled ? 'throttled' : ''].filter(Boolean);
    return {
      x: r.at,
      y: r.rate,
      lo: r.low,
      hi: r.high,
      cls: r.throttled ? 'throttled' : r.contended ? 'contended' : 'clean',
      shape: r.throttled ? 'triangle' : r.contended ? 'ring' : 'circle',
      title: `${clock(r.at)}: ${num(r.rate)}/h [${num(r.low)}–${num(r.high)}], ${r.samples} proofs, ${r.kind}${marks.length ? `, ${marks.join(', ')}` : ''}`,
    };
  });
  return scatterChart({
    points, width, height, compact, yFromZero: false, xFormat: (t) => clock(t), yFormat: (v) => num(v, 0),
    yLabel: compact ? '' : 'proofs/hour', emptyText: 'no runs',
  });
}

export function hostsTable(hosts, now) {
  if (!hosts) return '<p class="empty">Loading…</p>';
  if (!hosts.length) return '<p class="empty">No host has been measured yet.</p>';
  const rows = [...hosts].sort((a, b) => (b.last_at ?? 0) - (a.last_at ?? 0)).map((h) => {
    const history = h.history ?? [];
    const marked = history.filter((r) => r.contended || r.throttled).length;
    return `<tr data-testid="host-row" data-machine-id="${esc(h.machine_id)}">` +
      `<td><a href="#/hosts/${esc(h.machine_id)}" data-testid="host-link">${esc(h.machine_id)}</a></td><td>${esc(gpus(h.num_gpus, h.gpu_name))}</td>` +
      `<td class="num">${esc(int(h.runs))}${marked ? `<div class="sub">${esc(marked)} marked</div>` : ''}</td>` +
      `<td class="num">${esc(perHour(h.median))}</td><td class="num">${esc(perHour(h.p10))}</td>` +
      `<td class="num">${esc(perHour(h.latest))}</td><td class="num">${esc(perHour(h.ewma))}</td>` +
      `<td>${esc(relative(h.last_at, now))}</td>` +
      `<td class="history">${hostChart(history)}</td>` +
      `<td class="actions"><button type="button" class="small" data-action="block-host" data-machine-id="${esc(h.machine_id)}" data-testid="block-host-button">Block…</button></td></tr>`;
  }).join('');
  return `<table class="grid hosts" data-testid="hosts-table"><thead><tr><th>Machine</th><th>GPU</th><th>Runs</th><th>Median</th><th>p10</th><th>Latest</th><th>EWMA</th><th>Last run</th><th>Every run <span class="legend inline"><span class="lg clean">● clean</span><span class="lg contended">○ contended</span><span class="lg throttled">▲ throttled</span></span></th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
}

export function badHostsTable(entries, now) {
  if (!entries) return '<p class="empty">Loading…</p>';
  if (!entries.length) return '<p class="empty">No machine is blocked.</p>';
  const rows = [...entries].sort((a, b) => b.added_at - a.added_at).map((b) => {
    const evidence = b.evidence && typeof b.evidence === 'object'
      ? `<details><summary>evidence</summary><pre>${esc(JSON.stringify(b.evidence, null, 2))}</pre></details>`
      : b.evidence ? esc(b.evidence) : '<span class="muted">—</span>';
    const expires = isNum(b.expires_at) ? esc(relative(b.expires_at, now)) : 'never';
    return `<tr data-testid="bad-host-row" data-machine-id="${esc(b.machine_id)}" data-active="${b.active ? 'true' : 'false'}">` +
      `<td>${esc(b.machine_id)}</td><td>${esc(b.reason)}</td><td>${evidence}</td>` +
      `<td>${esc(b.source)}</td><td class="num">${esc(int(b.strikes))}</td>` +
      `<td>${esc(relative(b.added_at, now))}</td><td>${expires}</td>` +
      `<td>${b.active ? '<span class="pill bad">active</span>' : '<span class="pill off">expired</span>'}</td>` +
      `<td class="actions"><button type="button" class="small danger" data-action="remove-bad-host" data-machine-id="${esc(b.machine_id)}" data-testid="remove-bad-host-button">Remove</button></td></tr>`;
  }).join('');
  return `<table class="grid bad-hosts" data-testid="bad-hosts-table"><thead><tr><th>Machine</th><th>Reason</th><th>Evidence</th><th>Source</th><th>Strikes</th><th>Added</th><th>Expires</th><th>Status</th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
}

export function badHostForm(machineId = '') {
  return `<form class="toolbar" data-form="bad-host" data-testid="bad-host-form">` +
    `<label>Machine <input name="machine_id" type="number" min="1" required value="${esc(machineId)}" data-testid="bad-host-machine"></label>` +
    `<label>Reason <input name="reason" required size="36" maxlength="1000" data-testid="bad-host-reason"></label>` +
    `<label>Expires after <input name="ttl_hours" type="number" min="0.1" step="any" placeholder="never" size="6"> hours</label>` +
    `<button type="submit" data-testid="bad-host-add">Block machine</button></form>`;
}
