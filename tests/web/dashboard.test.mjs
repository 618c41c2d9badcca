// Unit tests of the dashboard's DOM-free modules (web/format.js, sse.js, charts.js, views.js),
// run by ctest as `node --test` when node is installed.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { intervalBar, niceTicks, scatterChart } from '../../web/charts.js';
import { duration, esc, usd } from '../../web/format.js';
import { backoffDelay, SseParser } from '../../web/sse.js';
import {
  autopilotBlock, badHostsTable, fleetHeader, hearingBlock, termsBlock, replicaBlock, hostsTable, instancePage, instancesTable,
  jobsPanel, machineHistory, offersTable, sortInstances, spendParts,
} from '../../web/views.js';

const NOW = 1_000_000;

function instance(overrides = {}) {
  return {
    id: 7,
    state: 'benchmarking',
    state_since: NOW - 125,
    created_at: NOW - 900,
    deadline_at: null,
    destroy_reason: '',
    destroyed_at: null,
    market_id: 5001,
    params_done_bytes: 0,
    params_total_bytes: 0,
    params_rate_bps: 0,
    proofs_benchmark: 3,
    proofs_production: 0,
    gpu_util: 91,
    spend_usd: 0.42,
    verdict: { decision: 'continue', rate: 52.1, low: 40, high: 60.2, samples: 3, break_even_rate: 30, reason: '' },
    offer: { id: 101, machine_id: 11, gpu_name: 'RTX 4090', num_gpus: 1, geolocation: 'Norway', dph_total: 0.4 },
    ...overrides,
  };
}

// ---- sse ---------------------------------------------------------------------------------------

test('SSE parser reassembles events split anywhere', () => {
  const text = ': keep-alive\n\nevent: fleet\ndata: {"a":1}\n\nevent: fleet\r\ndata: {"b":\r\ndata: 2}\r\n\r\n';
  for (let cut = 0; cut <= text.length; cut += 1) {
    const parser = new SseParser();
    const events = [...parser.push(text.slice(0, cut)), ...parser.push(text.slice(cut))];
    assert.deepEqual(events, [
      { event: 'fleet', data: '{"a":1}' },
      { event: 'fleet', data: '{"b":\n2}' },
    ], `cut at ${cut}`);
    assert.equal(parser.comments, 1);
  }
});

test('SSE parser ignores comment-only blocks and unknown fields', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push(': ping\n\nid: 4\nretry: 100\n\n'), []);
  assert.deepEqual(parser.push('data:x\n\n'), [{ event: 'message', data: 'x' }]);
});

test('reconnect backoff grows, is capped and jittered', () => {
  const low = (n) => backoffDelay(n, { random: () => 0 });
  const high = (n) => backoffDelay(n, { random: () => 1 });
  assert.equal(high(0), 1000);
  assert.equal(low(0), 500);
  assert.equal(high(3), 8000);
  assert.equal(high(20), 30000);
  assert.ok(low(20) >= 15000);
});

// ---- format ------------------------------------------------------------------------------------

test('esc neutralises markup', () => {
  assert.equal(esc('<img src=x onerror="a()">&\''), '&lt;img src=x onerror=&quot;a()&quot;&gt;&amp;&#39;');
  assert.equal(esc(null), '');
});

test('durations and money read naturally', () => {
  assert.equal(duration(45), '45s');
  assert.equal(duration(125), '2m 05s');
  assert.equal(duration(3 * 3600 + 300), '3h 05m');
  assert.equal(duration(2 * 86400 + 4 * 3600), '2d 04h');
  assert.equal(usd(-1.5), '−$1.50');
  assert.equal(usd(null), '—');
});

// ---- charts ------------------------------------------------------------------------------------

test('nice ticks cover the range with round steps', () => {
  assert.deepEqual(niceTicks(0, 100, 4), [0, 50, 100]);
  assert.deepEqual(niceTicks(0, 66, 4), [0, 20, 40, 60]);
});

test('interval bar colours the band against break-even', () => {
  assert.match(intervalBar({ rate: 50, low: 45, high: 55, breakEven: 30 }), /band good/);
  assert.match(intervalBar({ rate: 20, low: 15, high: 25, breakEven: 30 }), /band bad/);
  assert.match(intervalBar({ rate: 30, low: 20, high: 40, breakEven: 30 }), /band open/);
  assert.equal(intervalBar({ rate: null }), '');
});

test('scatter chart can span the data instead of starting at zero', () => {
  const points = [{ x: 1, y: 50, lo: 48, hi: 52 }, { x: 2, y: 40, lo: 38, hi: 42 }];
  const y = (svg) => [...svg.matchAll(/class="mk [^"]*" cx="[\d.]+" cy="([\d.]+)"/g)].map((m) => Number(m[1]));
  const [a0, b0] = y(scatterChart({ points, height: 100, compact: true }));
  const [a1, b1] = y(scatterChart({ points, height: 100, compact: true, yFromZero: false }));
  // The same 10/h apart is drawn much further apart when the axis spans only the data.
  assert.ok(b1 - a1 > 3 * (b0 - a0), `${b0 - a0} vs ${b1 - a1}`);
  const xTicks = (svg) => (svg.match(/class="tick"[^>]*text-anchor="middle"/g) ?? []).length;
  const two = [{ x: 1, y: 5 }, { x: 2, y: 6 }];
  assert.equal(xTicks(scatterChart({ points: two, xIntegers: true })), 2);
  assert.ok(xTicks(scatterChart({ points: two })) > 2);
});

test('scatter chart draws one marker per point and whiskers', () => {
  const svg = scatterChart({ points: [{ x: 1, y: 10, lo: 8, hi: 12 }, { x: 2, y: 20 }] });
  assert.equal((svg.match(/class="mk /g) ?? []).length, 2);
  assert.equal((svg.match(/class="whisker /g) ?? []).length, 1);
  assert.match(scatterChart({ points: [] }), /No data yet/);
});

// ---- views -------------------------------------------------------------------------------------

test('instance rows are addressable and carry their state', () => {
  const html = instancesTable([instance(), instance({ id: 8, state: 'destroyed', destroyed_at: NOW - 60 })], NOW);
  assert.match(html, /<tr data-testid="instance-row" data-id="7" data-state="benchmarking">/);
  assert.match(html, /<tr data-testid="instance-row" data-id="8" data-state="destroyed">/);
  assert.match(html, /data-testid="instance-link"/);
  // Only live instances can be destroyed.
  assert.equal((html.match(/data-testid="destroy-button"/g) ?? []).length, 1);
  assert.match(html, /data-since="999875"/);
  const hidden = instancesTable([instance(), instance({ id: 8, state: 'destroyed' })], NOW, { showDestroyed: false });
  assert.doesNotMatch(hidden, /data-id="8"/);
});

test('market strings cannot inject markup', () => {
  const evil = '<script>alert(1)</script>';
  const html = instancesTable([instance({ offer: { gpu_name: evil, geolocation: evil, num_gpus: 1 } })], NOW);
  assert.doesNotMatch(html, /<script>/);
  assert.match(html, /&lt;script&gt;/);
  const offers = offersTable([{ id: 1, gpu_name: evil, reasons: [evil], data_flags: [evil], predicted_rate: 10 }]);
  assert.doesNotMatch(offers, /<script>/);
  const page = instancePage({ instance: instance(), events: [{ id: 1, at: NOW, kind: 'agent', message: evil, data: null }], samples: [], logs: evil }, NOW);
  assert.doesNotMatch(page, /<script>/);
});

test('parameter download shows progress, rate and ETA', () => {
  const html = instancesTable([instance({ state: 'fetching_params', params_done_bytes: 25e9, params_total_bytes: 50e9, params_rate_bps: 100e6 })], NOW);
  assert.match(html, /role="progressbar" aria-valuenow="50.0"/);
  assert.match(html, /style="width:50.0%"/);
  assert.match(html, /50%/);
  assert.match(html, /100 MB\/s/);
  assert.match(html, /ETA 4m 10s/);
});

test('sorting by state follows the lifecycle', () => {
  const rows = [instance({ id: 1, state: 'proving' }), instance({ id: 2, state: 'booting' }), instance({ id: 3, state: 'destroyed' })];
  assert.deepEqual(sortInstances(rows, 'state', 1).map((r) => r.id), [2, 1, 3]);
  assert.deepEqual(sortInstances(rows, 'state', -1).map((r) => r.id), [3, 1, 2]);
});

test('fleet header shows the economics and the autopilot switch', () => {
  const html = fleetHeader({
    summary: { proofs_per_hour: 61.4, dollars_per_hour: 0.4, cost_per_proof: 0.0066, profit_per_hour: -0.1, by_state: { proving: 1 } },
    autopilot: { enabled: true, paused: false },
  });
  assert.match(html, /61\.4/);
  assert.match(html, /\$0\.007/);
  assert.match(html, /card bad/);
  assert.match(html, /data-state="proving">proving <b>1<\/b>/);
  assert.match(html, /data-action="autopilot" data-paused="true" data-testid="autopilot-toggle">Pause/);
  assert.match(autopilotBlock({ enabled: true, paused: true }), /data-paused="false"[^>]*>Resume/);
  assert.doesNotMatch(autopilotBlock({ enabled: false, paused: false }), /autopilot-toggle/);
  assert.equal(autopilotBlock(null), '');
});

test('an interruptible rental shows its bid and market stops; an on-demand one shows neither', () => {
  const bid = instancesTable([instance({ bid_price: 0.13, market_stops: 2 })], NOW);
  assert.match(bid, /data-testid="bid-terms">bid \$0\.130 · 2 stops/);
  assert.doesNotMatch(instancesTable([instance()], NOW), /bid-terms/);
  const page = instancePage({ instance: instance({ bid_price: 0.13, market_stops: 2 }), events: [], samples: [], logs: '' }, NOW);
  assert.match(page, /interruptible: bid \$0\.130\/h · 2 market stops/);
  assert.match(instancePage({ instance: instance(), events: [], samples: [], logs: '' }, NOW), /on-demand/);
});

test('spend shows the storage and bandwidth vast billed besides compute', () => {
  assert.equal(spendParts({ spend_usd: 1.5 }), '$1.50');
  const parts = spendParts({ spend_usd: 1.5, storage_spend_usd: 0.25, bandwidth_spend_usd: 0.05, disk_gb: 200 });
  assert.match(parts, /^\$1\.50 /);
  assert.match(parts, /storage \$0\.25 \(200 GB\)/);
  assert.match(parts, /bandwidth \$0\.05/);
  assert.doesNotMatch(spendParts({ spend_usd: 1, storage_spend_usd: '<b>' }), /<b>/);
});

test('instance page marks warm-up proofs and compares memory with the plan', () => {
  const page = instancePage({
    instance: instance({ peak_memory_gib: 250, plan: { expected_peak_gib: 210, total_budget_gib: 200, usable_ram_gib: 240, partitions: 10, reasons: ['ten partitions fit'] } }),
    events: [],
    samples: [
      { seq: 1, seconds: 300, phase: 'warmup', at: NOW - 600 },
      { seq: 2, seconds: 60, phase: 'benchmark', at: NOW - 500 },
      { seq: 3, seconds: 62, phase: 'benchmark', at: NOW - 400 },
    ],
    logs: '',
  }, NOW);
  assert.equal((page.match(/class="mk warmup"/g) ?? []).length, 1);
  assert.equal((page.match(/class="mk benchmark"/g) ?? []).length, 2);
  assert.match(page, /median 62 s/);
  assert.match(page, /class="bar over"/); // observed above the planned peak
  assert.match(page, /usable RAM/);
  assert.match(page, /ten partitions fit/);
});

test('offers and hosts carry their action buttons', () => {
  const offers = offersTable([{ id: 42, gpu_name: 'RTX 4090', num_gpus: 1, dph_total: 0.3, predicted_rate: 60, reasons: ['prior'] }]);
  assert.match(offers, /data-action="deploy" data-testid="deploy-button" data-offer-id="42"/);
  const hosts = hostsTable([{ machine_id: 11, gpu_name: 'RTX 4090', num_gpus: 1, runs: 2, history: [
    { at: NOW - 100, rate: 50, low: 45, high: 55, samples: 8, kind: 'benchmark', contended: true, throttled: false },
    { at: NOW - 50, rate: 40, low: 30, high: 50, samples: 8, kind: 'benchmark', contended: false, throttled: true },
  ] }], NOW);
  assert.match(hosts, /class="mk contended"/);
  assert.match(hosts, /class="mk throttled"/);
  assert.equal((hosts.match(/class="whisker /g) ?? []).length, 2);
  const bad = badHostsTable([{ machine_id: 11, reason: 'slow', evidence: { rate: 3 }, source: 'operator', strikes: 1, added_at: NOW - 60, expires_at: null, active: true }], NOW);
  assert.match(bad, /data-action="remove-bad-host" data-machine-id="11"/);
  assert.match(bad, /never/);
});

test('the header says when silence is not judged, with the reason', () => {
  const deaf = { judging_silence: false, cause: 'settling', reason: 'the manager has listened for only 12 s <x>' };
  const html = fleetHeader({ summary: { hearing: deaf } });
  assert.match(html, /data-testid="hearing" data-cause="settling"/);
  assert.match(html, /listened for only 12 s &lt;x&gt;/);
  assert.equal(hearingBlock({ judging_silence: true, cause: 'listening', reason: '' }), '');
  assert.equal(hearingBlock(undefined), '');
});

test('the header counts bid and on-demand rentals, the market\'s stops and storage per hour', () => {
  const terms = { bid_instances: 3, on_demand_instances: 5, market_stopped: 1, market_stops: 4, storage_usd_per_hour: 0.12 };
  const html = fleetHeader({ summary: { terms } });
  assert.match(html, /data-testid="terms"/);
  assert.match(html, /3 bid · 5 on-demand · 1 stopped by the market · 4 market stops · storage \$0\.120\/h/);
  assert.match(termsBlock(terms), /class="pill paused"/);
  assert.match(termsBlock({ ...terms, market_stopped: 0 }), /class="pill on"/);
  // An all on-demand fleet that the market never stopped: nothing to say.
  assert.equal(termsBlock({ bid_instances: 0, on_demand_instances: 4, market_stopped: 0, market_stops: 0 }), '');
  assert.equal(termsBlock(undefined), '');
});

test('the header names the leader and how long it has led, or a failover in progress', () => {
  const follower = {
    replica_id: 'b-2-x', leading: false,
    leader: { replica_id: 'a-1-<y>', url: 'http://a', epoch: 7, taken_at: 1000 },
  };
  const html = fleetHeader({ at: 1090, summary: { replica: follower } });
  assert.match(html, /data-testid="replica" data-role="follower"/);
  assert.match(html, /leader a-1-&lt;y&gt;/);
  assert.match(html, /data-since="1000"/);
  assert.match(replicaBlock({ replica_id: 'a', leading: true, leader: { replica_id: 'a', epoch: 1, taken_at: 5 } }, 10),
    /this replica leads/);
  assert.match(replicaBlock({ replica_id: 'a', leading: false, leader: null }, 10), /failover in progress/);
  assert.equal(replicaBlock(undefined, 10), '');
});

// ---- gateway jobs ------------------------------------------------------------------------------

function jobsSection(overrides = {}) {
  return {
    at: NOW,
    window: { since: NOW - 3600, until: NOW, truncated: false },
    has_jobs: true,
    open: { queued: 4, assigned: 1, proving: 2 },
    queued_by_kind: { 'porep-c2': 3, 'snap-update': 1, 'window-post': 0, 'winning-post': 0 },
    arrivals_last_hour: 37,
    in_flight_by_instance: { 7: 2, 9: 1 },
    queue_wait_s: { count: 30, p50: 12, p95: 95 },
    end_to_end_s: { count: 28, p50: 310, p95: 720 },
    oldest_queued_s: 40,
    on_time: 27, late: 1, missed: 0, on_time_share: 27 / 28,
    revenue_usd: 1.35, revenue_per_hour: 1.35, delivered_on_time: 27, delivered_unpriced: 0,
    spend_usd: 0.81, realised_cost_per_proof: 0.03, idle_instance_hours: 0.25,
    ...overrides,
  };
}

test('jobs panel shows queue, arrivals, in flight, latency, on-time share and money', () => {
  const html = jobsPanel(jobsSection());
  assert.match(html, /data-testid="jobs-panel"/);
  assert.match(html, /data-testid="jobs-queued"[^>]*title="porep-c2 3, snap-update 1"><div class="card-label">queued<\/div><div class="card-value">4</);
  assert.match(html, /data-testid="jobs-arrivals"[^>]*>.*?card-value">37</);
  assert.match(html, /data-testid="jobs-in-flight"[^>]*>.*?card-value">3</);
  assert.match(html, /data-testid="jobs-wait"[^>]*>.*?card-value">12s \/ 1m 35s</);
  assert.match(html, /data-testid="jobs-e2e"[^>]*>.*?card-value">5m 10s \/ 12m 00s</);
  assert.match(html, /card good" data-testid="jobs-on-time"[^>]*>.*?card-value">96%</);
  assert.match(html, /data-testid="jobs-realised-cost"[^>]*>.*?card-value">\$0\.0300</);
  assert.match(html, /data-testid="jobs-idle-hours"[^>]*>.*?card-value">0\.3</);
  assert.match(html, /last 1h 00m/);
  // Nothing measured yet reads as a dash, not as 0 % or $0.
  const empty = jobsPanel(jobsSection({ on_time_share: null, realised_cost_per_proof: null, queue_wait_s: { count: 0, p50: null, p95: null } }));
  assert.match(empty, /data-testid="jobs-on-time"[^>]*>.*?card-value">—</);
  assert.match(empty, /data-testid="jobs-realised-cost"[^>]*>.*?card-value">—</);
  assert.match(empty, /data-testid="jobs-wait"[^>]*>.*?card-value">—</);
  // No gateway: no panel.
  assert.equal(jobsPanel(null), '');
  assert.doesNotMatch(fleetHeader({ summary: { jobs: null } }), /jobs-panel/);
});

test('the fleet header names its profit basis and carries the jobs panel', () => {
  const jobs = fleetHeader({ summary: { profit_per_hour: 0.5, profit_basis: 'jobs_delivered', profit_reason: 'revenue of jobs', jobs: jobsSection() } });
  assert.match(jobs, /title="revenue of jobs"><div class="card-label">profit \/ hour \(jobs\)/);
  assert.match(jobs, /data-testid="jobs-panel"/);
  const estimate = fleetHeader({ summary: { profit_per_hour: 0.5, profit_basis: 'proofs_measured' } });
  assert.match(estimate, /profit \/ hour \(est\.\)/);
});

test('instance rows show the jobs each instance holds, and idle accepted ones', () => {
  const rows = [instance({ id: 7, state: 'proving' }), instance({ id: 8, state: 'proving' }), instance({ id: 9 })];
  const html = instancesTable(rows, NOW, { jobsInFlight: { 7: 2 } });
  assert.match(html, /data-id="7"[^]*?data-testid="instance-jobs" data-jobs="2">2 jobs in flight/);
  assert.match(html, /data-id="8"[^]*?data-testid="instance-jobs" data-jobs="0">idle/);
  const row9 = html.slice(html.indexOf('data-id="9"'));
  assert.doesNotMatch(row9.slice(0, row9.indexOf('</tr>')), /instance-jobs/);
  assert.doesNotMatch(instancesTable(rows, NOW), /instance-jobs/);
});

test('offers show each machine history and both break-evens', () => {
  const row = {
    id: 42, machine_id: 7, gpu_name: 'RTX 4090', num_gpus: 1, dph_total: 0.24, predicted_rate: 21,
    prediction_source: 'host', reasons: [], min_rate: 20, break_even_rate: 20, break_even_objective: 'revenue',
    revenue_break_even_rate: 20, target_break_even_rate: 30, break_evens_differ: true,
    history: {
      machine_id: 7, rentals: 2, runs: 3, median_rate: 21, last_verdict: 'reject', last_verdict_reason: 'below break-even',
      ooms: 1, crashes: 0, bad_host: { machine_id: 7, reason: 'slow benchmark <b>', source: 'auto' },
    },
  };
  const html = offersTable([row]);
  assert.match(html, /2 rentals · 3 runs · median 21.0\/h/);
  assert.match(html, /last: reject/);
  assert.match(html, /title="below break-even"/);
  assert.match(html, /1 OOM/);
  assert.match(html, /blocked \(auto\): slow benchmark &lt;b&gt;/);
  assert.match(html, /20.0\/h <span class="muted">\(revenue\)<\/span>/);
  assert.match(html, /target \$\/proof 30.0\/h/);
  // Equal break-evens show one figure; a machine never rented says so.
  const plain = offersTable([{ ...row, break_evens_differ: false, history: { rentals: 0, runs: 0 } }]);
  assert.doesNotMatch(plain, /offer-other-break-even/);
  assert.match(plain, /never rented/);
  assert.match(machineHistory(null), /never rented/);
});
