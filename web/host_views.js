// The host page (#/hosts/MACHINE) as an HTML string from GET /api/v1/hosts/{machine_id}: every
// rental of one vast.ai machine with what it cost and proved, its measured rates over time, the
// strikes and block changes with their evidence, and its bad-host entries. DOM-free
// (unit-tested in node); every value from the API passes esc().

import { clock, esc, gpus, int, isNum, num, perHour, relative, stateLabel, usd } from './format.js';
import { badHostForm, badHostsTable, fact, hostChart, stateBadge } from './views.js';

function rentalsTable(rentals, now) {
  if (!rentals.length) return '<p class="empty">Never rented by this fleet.</p>';
  const rows = [...rentals].sort((a, b) => b.id - a.id).map((r) => {
    const o = r.offer ?? {};
    const v = r.verdict;
    const verdict = v && v.decision ? `${esc(v.decision)}${isNum(v.rate) ? ` at ${esc(perHour(v.rate))}` : ''}` : '—';
    const ended = isNum(r.destroyed_at) ? `${esc(relative(r.destroyed_at, now))}` : '<span class="muted">live</span>';
    return `<tr data-testid="host-rental" data-id="${esc(r.id)}" data-state="${esc(r.state)}">` +
      `<td><a href="#/instances/${esc(r.id)}" data-testid="host-rental-link">#${esc(r.id)}</a></td>` +
      `<td>${stateBadge(r.state)}</td><td>${esc(gpus(o.num_gpus, o.gpu_name))}</td>` +
      `<td class="num">${esc(usd(o.dph_total, 3))}</td>` +
      `<td>${esc(clock(r.created_at))}</td><td>${ended}</td>` +
      `<td class="num">${esc(usd(r.spend_usd))}</td><td class="num">${esc(int(r.proofs_production))}</td>` +
      `<td>${verdict}</td>` +
      `<td><a href="#/jobs?instance=${esc(r.id)}">jobs</a></td>` +
      `<td class="error-cell">${esc(r.destroy_reason || (r.close_cause ? stateLabel(r.close_cause) : ''))}</td></tr>`;
  }).join('');
  return '<table class="grid" data-testid="host-rentals"><thead><tr><th>instance</th><th>state</th>' +
    '<th>GPU</th><th class="num">$ / hour</th><th>rented</th><th>ended</th><th class="num">spend</th>' +
    '<th class="num">proofs</th><th>verdict</th><th></th><th>why it ended</th></tr></thead>' +
    `<tbody>${rows}</tbody></table>`;
}

function runsTable(runs) {
  if (!runs.length) return '<p class="empty">No measured run.</p>';
  const rows = [...runs].sort((a, b) => b.at - a.at).map((r) => {
    const marks = [r.contended ? 'contended' : '', r.throttled ? 'throttled' : ''].filter(Boolean).join(', ');
    return `<tr data-testid="host-run"><td>${esc(clock(r.at))}</td>` +
      `<td><a href="#/instances/${esc(r.instance_id)}">#${esc(r.instance_id)}</a></td><td>${esc(r.kind)}</td>` +
      `<td class="num">${esc(perHour(r.rate))}</td><td class="num">${esc(num(r.low))}–${esc(num(r.high))}</td>` +
      `<td class="num">${esc(int(r.samples))}</td><td>${esc(marks || 'clean')}</td></tr>`;
  }).join('');
  return '<table class="grid"><thead><tr><th>at</th><th>instance</th><th>kind</th><th class="num">rate</th>' +
    '<th class="num">interval</th><th class="num">proofs</th><th>run</th></tr></thead>' +
    `<tbody>${rows}</tbody></table>`;
}

// Strikes ("blame": a rental's failures judged against the host) and block changes ("bad_host").
function historyList(history) {
  if (!history.length) return '<p class="empty">No strike, no block.</p>';
  const items = [...history].sort((a, b) => b.at - a.at).map((e) => {
    const hasData = e.data && typeof e.data === 'object' && Object.keys(e.data).length > 0;
    const data = hasData ? `<details><summary>evidence</summary><pre>${esc(JSON.stringify(e.data, null, 2))}</pre></details>` : '';
    return `<li class="ev ev-${esc(e.kind)}" data-testid="host-history-item"><time>${esc(clock(e.at))}</time>` +
      `<span class="kind">${esc(e.kind === 'blame' ? 'strike' : 'block')}</span>` +
      `<span class="msg"><a href="#/instances/${esc(e.instance_id)}">#${esc(e.instance_id)}</a> ${esc(e.message)}${data}</span></li>`;
  }).join('');
  return `<ol class="timeline" data-testid="host-history">${items}</ol>`;
}

function summaryFacts(summaries) {
  if (!summaries.length) return '';
  return summaries.map((s) => '<dl class="facts small">' +
    fact('GPU', esc(gpus(s.num_gpus, s.gpu_name))) +
    fact('runs', esc(int(s.runs))) +
    fact('median', esc(perHour(s.median))) +
    fact('p10', esc(perHour(s.p10))) +
    fact('latest', esc(perHour(s.latest))) +
    fact('EWMA', esc(perHour(s.ewma))) + '</dl>').join('');
}

export function hostPage(detail, now) {
  const machine = detail.machine_id;
  const totals = detail.totals ?? {};
  const rentals = Array.isArray(detail.rentals) ? detail.rentals : [];
  const runs = Array.isArray(detail.runs) ? detail.runs : [];
  const history = Array.isArray(detail.history) ? detail.history : [];
  const entries = Array.isArray(detail.bad_host_entries) ? detail.bad_host_entries : [];
  const status = detail.blocked ? '<span class="pill bad" data-testid="host-blocked">blocked</span>' : '<span class="pill off">not blocked</span>';
  const facts = '<dl class="facts">' +
    fact('rentals', esc(int(totals.rentals))) +
    fact('spend', esc(usd(totals.spend_usd))) +
    fact('production proofs', esc(int(totals.proofs_production))) +
    fact('$ / proof', esc(usd(totals.cost_per_proof_usd, 4))) +
    fact('jobs', `<a href="#/jobs?machine=${esc(machine)}" data-testid="host-jobs-link">jobs on this machine</a>`) +
    '</dl>';
  return `<div class="host-page" data-testid="host-page" data-machine-id="${esc(machine)}">` +
    '<div class="page-head"><a href="#/hosts" class="back">← hosts</a>' +
    `<h1>Machine ${esc(machine)} ${status}</h1></div>` +
    `<section class="panel"><h2>Facts</h2>${facts}${summaryFacts(detail.summaries ?? [])}</section>` +
    `<section class="panel"><h2>Rentals</h2><div class="table-wrap">${rentalsTable(rentals, now)}</div></section>` +
    `<section class="panel"><h2>Measured rates</h2>${hostChart(runs, { width: 640, height: 180, compact: false })}` +
    `<div class="table-wrap">${runsTable(runs)}</div></section>` +
    `<section class="panel"><h2>Strikes and blocks</h2>${historyList(history)}</section>` +
    `<section class="panel"><h2>Bad-host list</h2><div id="bad-host-form">${badHostForm(machine)}</div>` +
    `<div class="table-wrap">${entries.length ? badHostsTable(entries, now) : '<p class="empty">This machine is not on the bad-host list.</p>'}</div></section></div>`;
}
