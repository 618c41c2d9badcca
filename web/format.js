// Text for numbers, money, sizes and times, and HTML escaping. DOM-free (unit-tested in node).

const DASH = '—';

// Every string that reaches innerHTML goes through esc(): market strings (GPU names,
// locations) and agent logs are not ours.
const ENTITIES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const SPECIAL = /[&<>"']/;

export function esc(value) {
  if (value === null || value === undefined) return '';
  const text = String(value);
  return SPECIAL.test(text) ? text.replace(/[&<>"']/g, (c) => ENTITIES[c]) : text;
}

export function isNum(x) {
  return typeof x === 'number' && Number.isFinite(x);
}

// toLocaleString builds a formatter per call, far too slow for tables of hundreds of rows.
const formatters = new Map();

export function num(x, digits = 1) {
  if (!isNum(x)) return DASH;
  let formatter = formatters.get(digits);
  if (!formatter) {
    formatter = new Intl.NumberFormat('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
    formatters.set(digits, formatter);
  }
  return formatter.format(x);
}

export function int(x) {
  return num(x, 0);
}

export function usd(x, digits = 2) {
  if (!isNum(x)) return DASH;
  const text = num(Math.abs(x), digits);
  return (x < 0 ? '−$' : '$') + text;
}

export function pct(x) {
  return isNum(x) ? `${num(x, 0)}%` : DASH;
}

// Proofs per hour.
export function perHour(x, digits = 1) {
  return isNum(x) ? `${num(x, digits)}/h` : DASH;
}

// Decimal units, as link speeds and vast's disk sizes are quoted.
export function bytes(n) {
  if (!isNum(n)) return DASH;
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = Math.abs(n);
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${num(value, unit === 0 || value >= 100 ? 0 : 1)} ${units[unit]}`;
}

export function byteRate(bps) {
  return isNum(bps) ? `${bytes(bps)}/s` : DASH;
}

export function gib(x, digits = 0) {
  return isNum(x) ? `${num(x, digits)} GiB` : DASH;
}

// "45s", "12m 03s", "3h 05m", "2d 04h".
export function duration(seconds) {
  if (!isNum(seconds)) return DASH;
  const s = Math.max(0, Math.floor(seconds));
  const pad = (n) => String(n).padStart(2, '0');
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d ${pad(Math.floor((s % 86400) / 3600))}h`;
}

// Epoch seconds as local time; the date is added when it is not today.
export function clock(epoch, today = new Date()) {
  if (!isNum(epoch) || epoch <= 0) return DASH;
  const d = new Date(epoch * 1000);
  const time = d.toLocaleTimeString('en-GB', { hour12: false });
  if (d.toDateString() === today.toDateString()) return time;
  return `${d.toISOString().slice(0, 10)} ${time}`;
}

// "5m ago" / "in 2h 10m".
export function relative(epoch, now) {
  if (!isNum(epoch) || !isNum(now) || epoch <= 0) return DASH;
  const delta = epoch - now;
  return delta >= 0 ? `in ${duration(delta)}` : `${duration(-delta)} ago`;
}

export function gpus(count, name) {
  if (!name) return DASH;
  return `${isNum(count) && count > 0 ? count : 1}× ${name}`;
}

export function stateLabel(state) {
  return String(state ?? '').replace(/_/g, ' ');
}
