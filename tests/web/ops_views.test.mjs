// Unit tests of the operator's hands-on views (web/ops_views.js) and their place on the
// instance page and the fleet header, run by ctest as `node --test`.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { alertsBanner, instanceAlerts, livePanel, sshBlock, tuneBody, tuneForm } from '../../web/ops_views.js';
import { fleetHeader, instancePage } from '../../web/views.js';

const NOW = 1_000_000;
const evil = '<img src=x onerror=alert(1)>';

test('alerts banner lists fleet and instance alerts with links, escaped; nothing when quiet', () => {
  assert.equal(alertsBanner({ instances: [], fleet: [] }, NOW), '');
  assert.equal(alertsBanner(null, NOW), '');
  const html = alertsBanner({
    instances: [
      { instance_id: 4, kind: 'stall', drop_warranted: true, reason: evil, since: NOW - 60, acted: true },
      { instance_id: 5, kind: 'production_drift', drop_warranted: false, reason: 'dips', since: NOW - 120 },
    ],
    fleet: [{ kind: 'spend', reason: 'over budget' }],
  }, NOW);
  assert.match(html, /data-testid="alerts-banner"/);
  assert.match(html, /href="#\/instances\/4"/);
  assert.match(html, /stalled/);
  assert.match(html, /production drift<\/b> \(warning\)/);
  assert.match(html, /destroyed by the manager/);
  assert.match(html, /over budget/);
  assert.ok(!html.includes('<img'));
  assert.match(fleetHeader({ summary: {}, alerts: { instances: [{ instance_id: 9, kind: 'stall', reason: 'x', drop_warranted: true }], fleet: [] }, at: NOW }), /alerts-banner/);
});

test('live panel shows cuzk status and a GPU table, bounded to what is there', () => {
  assert.match(livePanel(null, NOW), /No live report/);
  const html = livePanel({
    at: NOW - 5,
    prover: { kind: 'cuzk', in_flight: 3, partitions: 8, completed: 12, failed: 1,
      status: { queue_depth: 5, pipelines: 2, memory_used_gib: 140.25, note: evil } },
    gpus: [
      { util: 97, memory_used_mib: 20480, temp_c: 71, sm_clock_mhz: 2520, throttle: ['hw_slowdown'] },
      { util: 12, memory_used_mib: 1024, memory_total_mib: 24576, temp_c: 40, sm_clock_mhz: 1200, throttle: [] },
    ],
  }, NOW);
  assert.match(html, /data-testid="cuzk-status"/);
  assert.match(html, /queue depth<\/dt><dd>5/);
  assert.match(html, /pipelines<\/dt><dd>2/);
  assert.match(html, /140\.3 GiB/);
  assert.equal((html.match(/data-testid="gpu-row"/g) ?? []).length, 2);
  assert.match(html, /97%/);
  assert.match(html, /hw_slowdown/);
  assert.match(html, /1\.0 \/ 24\.0 GiB/);
  assert.ok(!html.includes('<img'));
});

test('SSH commands are shown escaped, or a note when the market said nothing', () => {
  assert.match(sshBlock(null), /not reported/);
  const html = sshBlock({ commands: ['ssh -p 31234 root@ssh5.vast.ai', evil] });
  assert.match(html, /ssh -p 31234 root@ssh5\.vast\.ai/);
  assert.ok(!html.includes('<img'));
});

test('tune form for live instances, and its values checked before they are sent', () => {
  assert.match(tuneForm({ id: 3, state: 'proving', plan: { proofs_in_flight: 4, partitions: 8 } }), /data-form="tune" data-id="3"/);
  assert.match(tuneForm({ id: 3, state: 'destroyed' }), /Only a live instance/);
  assert.deepEqual(tuneBody('4', ''), { body: { concurrency: 4 } });
  assert.deepEqual(tuneBody('', '6'), { body: { partitions: 6 } });
  assert.deepEqual(tuneBody('2', '6'), { body: { concurrency: 2, partitions: 6 } });
  assert.ok(tuneBody('', '').error);
  assert.ok(tuneBody('0', '').error);
  assert.ok(tuneBody('257', '').error);
  assert.ok(tuneBody('', '1.5').error);
  assert.ok(tuneBody('', '641').error);
});

test('the instance page carries alerts, live report, SSH and the tune form', () => {
  const page = instancePage({
    instance: { id: 7, state: 'proving', state_since: NOW - 100, created_at: NOW - 900, offer: {}, origin: 'deploy' },
    events: [], samples: [], logs: '',
    alerts: [{ instance_id: 7, kind: 'stall', drop_warranted: true, reason: 'no proof for 40 min', since: NOW - 60 }],
    live: { at: NOW - 3, prover: { kind: 'cuzk' }, gpus: [{ util: 50 }] },
    ssh: { commands: ['ssh -p 2222 root@ssh1.vast.ai'] },
  }, NOW);
  assert.match(page, /data-testid="instance-alerts"/);
  assert.match(page, /no proof for 40 min/);
  assert.match(page, /data-testid="live-panel"/);
  assert.match(page, /data-testid="ssh-command"/);
  assert.match(page, /data-testid="tune-form"/);
  assert.match(instanceAlerts([], NOW), /No alerts/);
});
