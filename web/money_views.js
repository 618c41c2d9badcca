// The money page (#/money?range=day) as an HTML string from GET /api/v1/money: revenue, spend
// by what vast.ai billed and profit per bucket, realised $/proof against the target and the
// revenue per proof, and the P&L of every host and instance in the range. DOM-free
// (unit-tested in node); every value from the API passes esc().

import { moneyChart } from './charts.js';
import { clock, esc, int, isNum, usd } from './format.js';
import { card } from './views.js';

export const MONEY_RANGES = ['hour', 'day', 'week', 'month'];

export function moneyRangeFromQuery(query) {
  const range = query.get('range') ?? '';
  return MONEY_RANGES.includes(range) ? range : 'day';
}

// An axis label: the day for daily buckets ("12-06"), the local time for finer ones ("13:05").
export function tickLabel(epoch, bucketS) {
  if (!isNum(epoch)) return '';
  const d = new Date(epoch * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return bucketS >= 86400 ? `${pad(d.getMonth() + 1)}-${pad(d.getDate())}` : `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function signed(x, digits = 2) {
  return `<span class="${x < 0 ? 'neg' : 'pos'}">${esc(usd(x, digits))}</span>`;
}

function spendCell(spend) {
  const s = spend ?? {};
  return `${esc(usd(s.total_usd, 3))}<div class="sub">compute ${esc(usd(s.compute_usd, 3))} · storage ${esc(usd(s.storage_usd, 3))} · bandwidth ${esc(usd(s.bandwidth_usd, 3))}</div>`;
}

function plTable(rows, kind) {
  if (!rows.length) return `<p class="empty">No ${kind === 'host' ? 'machine' : 'instance'} earned or cost anything in this range.</p>`;
  // Worst first: what loses money is what the operator acts on.
  const sorted = [...rows].sort((a, b) => (a.profit_usd ?? 0) - (b.profit_usd ?? 0));
  const body = sorted.map((r) => {
    const head = kind === 'host'
      ? `<td><a href="#/hosts/${esc(r.machine_id)}" data-testid="money-host-link">machine ${esc(r.machine_id)}</a></td><td class="num">${esc(int(r.rentals))}</td>`
      : `<td><a href="#/instances/${esc(r.instance_id)}">#${esc(r.instance_id)}</a></td><td><a href="#/hosts/${esc(r.machine_id)}">${esc(r.machine_id)}</a></td>`;
    return `<tr data-testid="money-${kind}-row">${head}` +
      `<td class="num">${esc(usd(r.revenue_usd, 3))}</td><td class="num">${spendCell(r.spend)}</td>` +
      `<td class="num">${signed(r.profit_usd, 3)}</td>` +
      `<td class="num">${esc(int(r.delivered_on_time))}${r.delivered_late ? ` <span class="bad">+${esc(int(r.delivered_late))} late</span>` : ''}</td>` +
      `<td class="num">${esc(usd(r.cost_per_proof_usd, 4))}</td></tr>`;
  }).join('');
  const head = kind === 'host' ? '<th>machine</th><th class="num">rentals</th>' : '<th>instance</th><th>machine</th>';
  return `<table class="grid" data-testid="money-${kind}s">` +
    `<thead><tr>${head}<th class="num">revenue</th><th class="num">spend</th><th class="num">profit</th>` +
    `<th class="num">on-time proofs</th><th class="num">$ / proof</th></tr></thead><tbody>${body}</tbody></table>`;
}

export function moneyPage(ledger, range) {
  const t = ledger.total ?? {};
  const spend = t.spend ?? {};
  const perProof = t.cost_per_proof_usd;
  const target = ledger.target_cost_per_proof_usd;
  const revenuePerProof = ledger.revenue_per_proof_usd;
  const perProofClass = isNum(perProof) ? (perProof <= target ? 'good' : perProof <= revenuePerProof ? '' : 'bad') : '';
  const ranges = MONEY_RANGES.map((r) => (r === range
    ? `<span class="pill" data-testid="money-range-current">${esc(r)}</span>`
    : `<a href="#/money?range=${esc(r)}" data-testid="money-range-${esc(r)}">${esc(r)}</a>`)).join(' ');
  const cards = [
    card('revenue', usd(t.revenue_usd), '', 'money-revenue', `${t.delivered_on_time ?? 0} jobs delivered on time`),
    card('spend', usd(spend.total_usd), 'minor', 'money-spend',
      `compute ${usd(spend.compute_usd)}, storage ${usd(spend.storage_usd)}, bandwidth ${usd(spend.bandwidth_usd)}`),
    card('profit', usd(t.profit_usd), (t.profit_usd ?? 0) < 0 ? 'bad' : 'good', 'money-profit'),
    card('realised $ / proof', usd(perProof, 4), perProofClass, 'money-per-proof',
      `target ${usd(target, 4)}, revenue per proof ${usd(revenuePerProof, 4)}`),
    card('late deliveries', int(t.delivered_late ?? 0), (t.delivered_late ?? 0) > 0 ? 'bad' : '', 'money-late', 'delivered after the deadline: earned nothing'),
  ].join('');
  const step = ledger.bucket_s >= 86400 ? 'day' : ledger.bucket_s >= 3600 ? 'hour' : `${Math.round(ledger.bucket_s / 60)} min`;
  const legend = '<div class="legend"><span class="lg revenue">■ revenue</span><span class="lg compute">■ compute</span>' +
    '<span class="lg storage">■ storage</span><span class="lg bandwidth">■ bandwidth</span><span>— profit</span></div>';
  const unpriced = t.delivered_unpriced ? `<p class="bad">${esc(int(t.delivered_unpriced))} delivered jobs have no price ([prices]).</p>` : '';
  return `<div class="money-page" data-testid="money-page" data-range="${esc(range)}">` +
    `<div class="toolbar"><h1>Money</h1><span class="muted">${esc(clock(ledger.since))} – ${esc(clock(ledger.until))}, by the ${esc(step)}</span>` +
    `<div class="spacer"></div>${ranges}</div>` +
    `<div class="cards">${cards}</div>${unpriced}` +
    `<section class="panel"><h2>Over time</h2>${moneyChart({ buckets: ledger.buckets ?? [], xFormat: (v) => tickLabel(v, ledger.bucket_s) })}${legend}</section>` +
    `<section class="panel"><h2>By machine</h2><div class="table-wrap">${plTable(ledger.hosts ?? [], 'host')}</div></section>` +
    `<section class="panel"><h2>By instance</h2><div class="table-wrap">${plTable(ledger.instances ?? [], 'instance')}</div></section></div>`;
}
