// Unit tests of the money page (web/money_views.js, charts.js moneyChart).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { moneyChart } from '../../web/charts.js';
import { moneyPage, moneyRangeFromQuery, tickLabel } from '../../web/money_views.js';

const spend = (compute, storage = 0, bandwidth = 0) => ({
  compute_usd: compute, storage_usd: storage, bandwidth_usd: bandwidth, total_usd: compute + storage + bandwidth,
});

function ledger(overrides = {}) {
  return {
    since: 1_000_000,
    until: 1_007_200,
    bucket_s: 3600,
    range: 'day',
    total: { revenue_usd: 1.5, spend: spend(1, 0.2, 0.05), profit_usd: 0.25, delivered_on_time: 30, delivered_late: 2, delivered_unpriced: 0, cost_per_proof_usd: 0.0417 },
    buckets: [
      { from: 1_000_000, until: 1_003_600, revenue_usd: 1, spend: spend(0.5, 0.1), profit_usd: 0.4 },
      { from: 1_003_600, until: 1_007_200, revenue_usd: 0.5, spend: spend(0.5, 0.1, 0.05), profit_usd: -0.15 },
    ],
    hosts: [
      { machine_id: 555, rentals: 2, revenue_usd: 1.4, spend: spend(0.6), profit_usd: 0.8, delivered_on_time: 28, delivered_late: 0, cost_per_proof_usd: 0.02 },
      { machine_id: 777, rentals: 1, revenue_usd: 0.1, spend: spend(0.4, 0.2, 0.05), profit_usd: -0.55, delivered_on_time: 2, delivered_late: 2, cost_per_proof_usd: 0.325 },
    ],
    instances: [
      { instance_id: 9, machine_id: 777, revenue_usd: 0.1, spend: spend(0.4, 0.2, 0.05), profit_usd: -0.55, delivered_on_time: 2, delivered_late: 2, cost_per_proof_usd: 0.325 },
    ],
    target_cost_per_proof_usd: 0.008,
    revenue_per_proof_usd: 0.05,
    ...overrides,
  };
}

test('the range comes from the page query, a day unless it is one the page offers', () => {
  assert.equal(moneyRangeFromQuery(new URLSearchParams('range=week')), 'week');
  assert.equal(moneyRangeFromQuery(new URLSearchParams('range=year')), 'day');
  assert.equal(moneyRangeFromQuery(new URLSearchParams('')), 'day');
});

test('the page shows the totals, the losing machine first, and every range but the current as a link', () => {
  const html = moneyPage(ledger(), 'day');
  assert.match(html, /data-testid="money-page" data-range="day"/);
  assert.match(html, /data-testid="money-profit"/);
  assert.match(html, /\$0\.25/);
  const hosts = [...html.matchAll(/href="#\/hosts\/(\d+)" data-testid="money-host-link"/g)].map((m) => m[1]);
  assert.deepEqual(hosts, ['777', '555']);
  assert.match(html, /href="#\/money\?range=week"/);
  assert.doesNotMatch(html, /href="#\/money\?range=day"/);
  assert.match(html, /\+2 late/);
});

test('the chart draws revenue up, each spend part down and the profit line', () => {
  const svg = moneyChart({ buckets: ledger().buckets });
  assert.equal((svg.match(/class="bar revenue"/g) ?? []).length, 2);
  assert.equal((svg.match(/class="bar spend storage"/g) ?? []).length, 2);
  assert.equal((svg.match(/class="bar spend bandwidth"/g) ?? []).length, 1);
  assert.match(svg, /<polyline class="profit-line" points="[^"]+ [^"]+"/);
  assert.match(moneyChart({ buckets: [] }), /No data yet/);
});

test('axis labels say the day for daily buckets and the time for finer ones', () => {
  const epoch = new Date(2026, 11, 6, 13, 5).getTime() / 1000;
  assert.equal(tickLabel(epoch, 86400), '12-06');
  assert.equal(tickLabel(epoch, 3600), '13:05');
  assert.equal(tickLabel(null, 3600), '');
});
