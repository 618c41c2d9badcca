// The operator's hands-on views, as HTML strings from API JSON (DOM-free, unit-tested in node):
// the fleet watch's alerts (fleet header banner, instance page), the agent's live prover and
// GPU report (cuzk queue, pipelines, per-GPU utilisation and memory), the SSH command and the
// remote tuning form. Every value from the API passes through esc().

import { esc, int, isNum, num, pct, relative } from './format.js';

const ALERT_LABELS = {
  production_drift: 'production drift',
  slow_download: 'slow download',
  stall: 'stalled',
};

function alertLabel(kind) {
  return ALERT_LABELS[kind] ?? String(kind ?? 'alert');
}

// One alert line: kind, severity, reason, since when, and whether the manager acted.
function alertItem(a, now, withLink) {
  const severity = a.drop_warranted ? 'bad' : 'warn';
  const who = withLink
    ? `<a href="#/instances/${esc(a.instance_id)}" data-testid="alert-instance-link">#${esc(a.instance_id)}</a> `
    : '';
  const acted = a.acted ? ' <span class="pill off">destroyed by the manager</span>' : '';
  const since = isNum(a.since) && a.since > 0 ? ` <span class="muted">${esc(relative(a.since, now))}</span>` : '';
  return `<li class="alert ${severity}" data-testid="alert" data-kind="${esc(a.kind)}" data-instance-id="${esc(a.instance_id)}">` +
    `${who}<b>${esc(alertLabel(a.kind))}</b>${a.drop_warranted ? '' : ' (warning)'}: ${esc(a.reason)}${since}${acted}</li>`;
}

// The banner under the fleet header: fleet alerts (spend, jobs) and every instance alert.
// Nothing when all is quiet.
export function alertsBanner(alerts, now) {
  if (!alerts || typeof alerts !== 'object') return '';
  const fleet = Array.isArray(alerts.fleet) ? alerts.fleet : [];
  const instances = Array.isArray(alerts.instances) ? alerts.instances : [];
  if (!fleet.length && !instances.length) return '';
  const fleetItems = fleet.map((a) =>
    `<li class="alert bad" data-testid="alert" data-kind="${esc(a.kind)}"><b>${esc(a.kind)}</b>: ${esc(a.reason)}</li>`).join('');
  const items = instances.map((a) => alertItem(a, now, true)).join('');
  return `<section class="alerts" data-testid="alerts-banner"><h2>Alerts <small>${esc(fleet.length + instances.length)}</small></h2><ul>${fleetItems}${items}</ul></section>`;
}

// The instance page's alerts (those of the fleet watch naming this instance).
export function instanceAlerts(alerts, now) {
  const list = Array.isArray(alerts) ? alerts : [];
  if (!list.length) return '<p class="empty">No alerts.</p>';
  return `<ul class="alerts-list" data-testid="instance-alerts">${list.map((a) => alertItem(a, now, false)).join('')}</ul>`;
}

function fact(label, value) {
  return `<div class="fact"><dt>${esc(label)}</dt><dd>${value}</dd></div>`;
}

// Values of cuzk's /status the agent passes on, in a stable order, then anything else.
const STATUS_ORDER = [
  'queue_depth', 'pending', 'in_progress', 'pipelines', 'synthesis_active', 'gpu_workers',
  'gpu_workers_busy', 'memory_used_gib', 'memory_budget_gib', 'completed', 'failed',
];

function statusValue(key, value) {
  if (typeof value === 'number') return key.endsWith('_gib') ? `${num(value, 1)} GiB` : num(value, Number.isInteger(value) ? 0 : 1);
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (value && typeof value === 'object') return JSON.stringify(value);
  return String(value ?? '—');
}

// The agent's live report: prover counters, cuzk's /status (queue, pipelines, workers, memory)
// and a table of GPUs (utilisation, memory, temperature, clock, throttling).
export function livePanel(live, now) {
  if (!live || typeof live !== 'object') {
    return '<p class="empty">No live report from the agent since the manager started.</p>';
  }
  const p = live.prover && typeof live.prover === 'object' ? live.prover : {};
  const status = p.status && typeof p.status === 'object' ? p.status : null;
  const head = '<dl class="facts small">' +
    fact('reported', esc(relative(live.at, now))) +
    fact('prover', esc(p.kind || '—')) +
    fact('in flight', esc(int(p.in_flight))) +
    fact('partitions', esc(int(p.partitions))) +
    fact('completed / failed', `${esc(int(p.completed))} / ${esc(int(p.failed))}`) +
    '</dl>';
  let statusHtml = '<p class="empty">The prover reports no status.</p>';
  if (status) {
    const keys = [...STATUS_ORDER.filter((k) => k in status), ...Object.keys(status).filter((k) => !STATUS_ORDER.includes(k)).sort()];
    statusHtml = `<dl class="facts small" data-testid="cuzk-status">${keys.map((k) => fact(k.replaceAll('_', ' '), esc(statusValue(k, status[k])))).join('')}</dl>`;
  }
  const gpus = Array.isArray(live.gpus) ? live.gpus : [];
  let gpuHtml = '<p class="empty">No GPU readings.</p>';
  if (gpus.length) {
    const rows = gpus.map((g, i) => {
      const throttle = Array.isArray(g.throttle) ? g.throttle.join(', ') : g.throttle === true ? 'yes' : '';
      const memory = isNum(g.memory_total_mib) && g.memory_total_mib > 0
        ? `${num(g.memory_used_mib / 1024, 1)} / ${num(g.memory_total_mib / 1024, 1)} GiB`
        : isNum(g.memory_used_mib) ? `${num(g.memory_used_mib / 1024, 1)} GiB` : '—';
      return `<tr data-testid="gpu-row"><td class="num">${i}</td><td>${esc(g.name ?? '')}</td>` +
        `<td class="num">${esc(pct(g.util))}</td><td class="num">${esc(memory)}</td>` +
        `<td class="num">${isNum(g.temp_c) ? `${esc(num(g.temp_c, 0))} °C` : '—'}</td>` +
        `<td class="num">${isNum(g.sm_clock_mhz) ? `${esc(num(g.sm_clock_mhz, 0))} MHz` : '—'}</td>` +
        `<td class="${throttle ? 'bad' : ''}">${esc(throttle || '—')}</td></tr>`;
    }).join('');
    gpuHtml = `<table class="grid gpus" data-testid="gpu-table"><thead><tr><th>#</th><th>GPU</th><th>Util</th><th>Memory</th><th>Temp</th><th>SM clock</th><th>Throttle</th></tr></thead><tbody>${rows}</tbody></table>`;
  }
  return `<div data-testid="live-panel">${head}<h3>cuzk</h3>${statusHtml}<h3>GPUs</h3>${gpuHtml}</div>`;
}

// How to reach the machine: the commands the market's instance record allows (the manager
// keeps only plain host names and valid ports).
export function sshBlock(ssh) {
  const commands = Array.isArray(ssh?.commands) ? ssh.commands : [];
  if (!commands.length) return '<span class="muted">not reported by the market yet</span>';
  return commands.map((c) => `<code class="ssh" data-testid="ssh-command">${esc(c)}</code>`).join('<br>');
}

// Remote tuning: proofs in flight and a partition cap, sent with the agent's next heartbeat.
export function tuneForm(instance) {
  const plan = instance?.plan && typeof instance.plan === 'object' ? instance.plan : {};
  const live = instance?.state !== 'destroying' && instance?.state !== 'destroyed';
  if (!live) return '<p class="empty">Only a live instance can be tuned.</p>';
  return `<form class="toolbar" data-form="tune" data-id="${esc(instance.id)}" data-testid="tune-form">` +
    `<label>Proofs in flight <input name="concurrency" type="number" min="1" max="256" step="1" placeholder="${esc(plan.proofs_in_flight ?? '')}" data-testid="tune-concurrency"></label>` +
    `<label>Partition cap (re-plan) <input name="partitions" type="number" min="1" max="640" step="1" placeholder="${esc(plan.partitions ?? '')}" data-testid="tune-partitions"></label>` +
    `<button type="submit" data-testid="tune-submit">Send to agent</button></form>` +
    '<p class="muted small">Sent with the agent\'s next heartbeat. A partition cap restarts the prover; the memory model and any OOM back-off still bound the plan.</p>';
}

// The tune form's values as the API's body, or an error message.
export function tuneBody(concurrency, partitions) {
  const body = {};
  const c = String(concurrency ?? '').trim();
  const p = String(partitions ?? '').trim();
  if (c) body.concurrency = Number(c);
  if (p) body.partitions = Number(p);
  if (!c && !p) return { error: 'Give proofs in flight and/or a partition cap.' };
  for (const [key, max] of [['concurrency', 256], ['partitions', 640]]) {
    if (key in body && !(Number.isInteger(body[key]) && body[key] >= 1 && body[key] <= max)) {
      return { error: `${key} must be a whole number from 1 to ${max}` };
    }
  }
  return { body };
}
