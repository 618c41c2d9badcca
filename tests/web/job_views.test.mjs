// Unit tests of the jobs pages' views (web/job_views.js): filters from and to the page's query,
// the API query they make, the list and a job's page with its timeline.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  dueText, jobFilterFromQuery, jobFilterQuery, jobPage, jobsApiQuery, jobsTable, jobTimeline,
} from '../../web/job_views.js';

const NOW = 2_000_000;

function job(overrides = {}) {
  return {
    id: 12,
    client: '10.0.0.7',
    request_id: 'sector-42',
    kind: 'porep-c2',
    state: 'done',
    attempts: 2,
    instance_id: 5,
    machine_id: 555,
    submitted_at: NOW - 1000,
    deadline_at: NOW + 800,
    delivered_at: NOW - 100,
    queue_wait_s: 30,
    end_to_end_s: 880,
    prove_ms: 600000,
    earned_usd: 0.05,
    timeliness: 'on_time',
    error: '',
    input_bytes: 1024,
    input_digest: 'ab'.repeat(32),
    proof_digest: 'cd'.repeat(32),
    timeline: [
      { at: NOW - 1000, kind: 'recorded', attempt: 0, instance_id: null, machine_id: null, detail: '1024 bytes of input' },
      { at: NOW - 990, kind: 'leased', attempt: 1, instance_id: 4, machine_id: 444, detail: 'earliest finish' },
      { at: NOW - 900, kind: 'prover_failed', attempt: 1, instance_id: 4, machine_id: 444, detail: 'synthesis <crashed>' },
      { at: NOW - 880, kind: 'leased', attempt: 2, instance_id: 5, machine_id: 555, detail: '' },
      { at: NOW - 120, kind: 'proved', attempt: 2, instance_id: 5, machine_id: 555, detail: 'ok' },
      { at: NOW - 100, kind: 'delivered', attempt: 2, instance_id: 5, machine_id: null, detail: '' },
    ],
    timeline_truncated: false,
    instance_cost_per_proof_usd: 0.0123,
    ...overrides,
  };
}

test('a filter survives the page query and drops what the form cannot hold', () => {
  const filter = jobFilterFromQuery(new URLSearchParams('state=done&kind=bogus&instance=12&machine=0&late=1&window=3600&x=1'));
  assert.deepEqual(filter, {
    state: 'done', kind: '', client: '', request: '', instance: '12', machine: '', window: '3600', late: true, at_risk: false,
  });
  assert.equal(jobFilterQuery(filter), 'state=done&instance=12&window=3600&late=1');
  assert.deepEqual(jobFilterFromQuery(new URLSearchParams(jobFilterQuery(filter))), filter);
});

test('the API query turns the time range into a since and carries the cursor', () => {
  const filter = jobFilterFromQuery(new URLSearchParams('window=86400&at_risk=1&request=sec tor'));
  const query = new URLSearchParams(jobsApiQuery(filter, NOW, { limit: 50, cursor: 77 }));
  assert.equal(query.get('since'), String(NOW - 86400));
  assert.equal(query.get('at_risk'), '1');
  assert.equal(query.get('request'), 'sec tor');
  assert.equal(query.get('cursor'), '77');
  assert.equal(query.get('limit'), '50');
  assert.equal(query.has('late'), false);
});

test('the deadline reads as time to spare, overdue or late', () => {
  assert.equal(dueText(job(), NOW), '15m 00s to spare');
  assert.equal(dueText(job({ delivered_at: NOW + 860 }), NOW), '1m 00s late');
  assert.equal(dueText(job({ state: 'queued', delivered_at: null }), NOW), 'due in 13m 20s');
  assert.equal(dueText(job({ state: 'queued', delivered_at: null, deadline_at: NOW - 60 }), NOW), '1m 00s overdue');
  assert.equal(dueText(job({ deadline_at: null }), NOW), 'no deadline');
});

test('the list links each job and its instance, escaping what clients sent', () => {
  const html = jobsTable([job({ request_id: '<img src=x>' })], NOW);
  assert.match(html, /href="#\/jobs\/12"/);
  assert.match(html, /href="#\/instances\/5"/);
  assert.match(html, /&lt;img src=x&gt;/);
  assert.doesNotMatch(html, /<img/);
  assert.match(jobsTable([], NOW), /No jobs match/);
});

test("a job's page shows every try with its instance and host", () => {
  const html = jobPage(job(), NOW);
  assert.match(html, /data-testid="job-page" data-id="12"/);
  const steps = html.match(/data-testid="job-step"/g) ?? [];
  assert.equal(steps.length, 6);
  assert.match(html, /href="#\/hosts\/444"/);
  assert.match(html, /href="#\/hosts\/555"/);
  assert.match(html, /synthesis &lt;crashed&gt;/);
  assert.match(html, /\$0\.0123/);
  assert.match(html, /class="step bad"[^>]*data-kind="prover_failed"/);
  assert.match(jobTimeline(job({ timeline: [] })), /No steps recorded/);
  assert.match(jobTimeline(job({ timeline_truncated: true })), /newest steps/);
});

test("a hedged job's page names its second prover and the step that started it", () => {
  const html = jobPage(job({
    state: 'proving', hedge_instance_id: 9,
    timeline: [{ at: NOW - 100, kind: 'hedged', attempt: 1, instance_id: 9, detail: 'its proof has run 230 s' }],
  }), NOW);
  assert.match(html, /a second copy on<\/span> <a[^>]*href="#\/instances\/9"/);
  assert.match(html, /second prover started/);
  assert.doesNotMatch(html, /class="step bad"[^>]*data-kind="hedged"/);
  assert.doesNotMatch(jobPage(job(), NOW), /second copy/);
});
