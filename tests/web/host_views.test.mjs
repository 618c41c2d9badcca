// Unit tests of the host page (web/host_views.js): one machine's rentals, runs, strikes and
// blocks from GET /api/v1/hosts/{machine_id}.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { hostPage } from '../../web/host_views.js';

const NOW = 3_000_000;

function host(overrides = {}) {
  return {
    machine_id: 555,
    rentals: [
      { id: 7, state: 'destroyed', created_at: NOW - 9000, destroyed_at: NOW - 3600, spend_usd: 1.2, proofs_production: 40,
        offer: { gpu_name: 'RTX 4090', num_gpus: 1, dph_total: 0.4 }, verdict: { decision: 'accept', rate: 52 },
        destroy_reason: 'prover <crashed> 3 times', close_cause: 'prover_failed' },
      { id: 9, state: 'proving', created_at: NOW - 600, spend_usd: 0.1, proofs_production: 2,
        offer: { gpu_name: 'RTX 4090', num_gpus: 1, dph_total: 0.4 } },
    ],
    runs: [{ at: NOW - 8000, instance_id: 7, kind: 'benchmark', rate: 52, low: 48, high: 55, samples: 10, contended: false, throttled: false }],
    summaries: [{ gpu_name: 'RTX 4090', num_gpus: 1, runs: 1, median: 52, p10: 52, latest: 52, ewma: 52 }],
    history: [{ at: NOW - 3700, instance_id: 7, kind: 'blame', message: 'strike: 3 failed proofs', data: { machine_id: 555 } }],
    bad_host_entries: [{ machine_id: 555, reason: 'flaky', source: 'auto', strikes: 2, added_at: NOW - 3600, active: true }],
    blocked: true,
    totals: { rentals: 2, spend_usd: 1.3, proofs_production: 42, cost_per_proof_usd: 1.3 / 42 },
    ...overrides,
  };
}

test('a host page lists every rental, run, strike and block, escaping market text', () => {
  const html = hostPage(host(), NOW);
  assert.match(html, /data-testid="host-page" data-machine-id="555"/);
  assert.equal((html.match(/data-testid="host-rental"/g) ?? []).length, 2);
  assert.equal((html.match(/data-testid="host-run"/g) ?? []).length, 1);
  assert.equal((html.match(/data-testid="host-history-item"/g) ?? []).length, 1);
  assert.match(html, /data-testid="host-blocked"/);
  assert.match(html, /href="#\/jobs\?machine=555"/);
  assert.match(html, /prover &lt;crashed&gt; 3 times/);
  assert.doesNotMatch(html, /<crashed>/);
  assert.match(html, /\$0\.0310/); // $1.30 over 42 proofs
});

test('a machine only blocked shows no rental and no run', () => {
  const html = hostPage(host({ rentals: [], runs: [], summaries: [], history: [], totals: { rentals: 0, spend_usd: 0, proofs_production: 0 } }), NOW);
  assert.match(html, /Never rented by this fleet/);
  assert.match(html, /No measured run/);
  assert.match(html, /No strike, no block/);
});
