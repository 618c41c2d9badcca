// Small SVG charts, returned as markup strings (one innerHTML per view, no chart library).
// DOM-free (unit-tested in node). Colours come from CSS classes (style.css), so the charts
// follow the light/dark theme.

import { esc, isNum, num } from './format.js';

// Round tick values covering [lo, hi], about `count` of them.
export function niceTicks(lo, hi, count = 4) {
  if (!isNum(lo) || !isNum(hi)) return [];
  if (hi <= lo) hi = lo + 1;
  const rough = (hi - lo) / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].find((m) => m * magnitude >= rough) * magnitude;
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push(Number(v.toPrecision(12)));
  }
  return ticks;
}

const f = (x) => Number(x.toFixed(1)); // coordinates: one decimal is plenty

// A rate, its interval and the break-even rate on one line: the band is green when all of it
// clears break-even, red when all of it is below, amber while undecided.
export function intervalBar({ rate, low, high, breakEven, width = 120, height = 16 } = {}) {
  if (!isNum(rate)) return '';
  const lo = isNum(low) ? low : rate;
  const hi = isNum(high) ? high : rate;
  const be = isNum(breakEven) ? breakEven : null;
  const top = Math.max(hi, rate, be ?? 0) * 1.15 || 1;
  const pad = 3;
  const x = (v) => f(pad + (Math.max(0, v) / top) * (width - 2 * pad));
  const mid = f(height / 2);
  const verdict = be === null ? 'open' : lo >= be ? 'good' : hi < be ? 'bad' : 'open';
  const title =
    `${num(rate)}/h (${num(lo)}–${num(hi)})` + (be === null ? '' : `, break-even ${num(be)}/h`);
  return (
    `<svg class="ibar" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
    `role="img" aria-label="${esc(title)}"><title>${esc(title)}</title>` +
    `<line class="track" x1="${pad}" x2="${width - pad}" y1="${mid}" y2="${mid}"/>` +
    `<rect class="band ${verdict}" x="${x(lo)}" y="${f(mid - 4)}" width="${f(Math.max(1.5, x(hi) - x(lo)))}" height="8" rx="2"/>` +
    (be === null ? '' : `<line class="be" x1="${x(be)}" x2="${x(be)}" y1="1" y2="${height - 1}"/>`) +
    `<circle class="pt" cx="${x(rate)}" cy="${mid}" r="2.5"/></svg>`
  );
}

function marker(shape, cx, cy, cls, title) {
  const t = title ? `<title>${esc(title)}</title>` : '';
  const c = `class="mk ${esc(cls || '')}"`;
  if (shape === 'triangle') {
    return `<path ${c} d="M${cx},${f(cy - 4)} L${f(cx + 4)},${f(cy + 3)} L${f(cx - 4)},${f(cy + 3)} Z">${t}</path>`;
  }
  if (shape === 'square') {
    return `<rect ${c} x="${f(cx - 3)}" y="${f(cy - 3)}" width="6" height="6">${t}</rect>`;
  }
  if (shape === 'ring') return `<circle ${c} cx="${cx}" cy="${cy}" r="4" fill="none">${t}</circle>`;
  return `<circle ${c} cx="${cx}" cy="${cy}" r="3">${t}</circle>`;
}

// Points {x, y, lo?, hi?, cls?, shape?, title?} with optional whiskers (lo..hi) and dashed
// horizontal reference lines {y, label, cls}. The y axis starts at 0 unless yFromZero is false
// (then it spans the data, so the spread between runs shows); xIntegers drops fractional x
// ticks (proof numbers).
export function scatterChart({
  points = [],
  hLines = [],
  width = 560,
  height = 220,
  xFormat = (v) => num(v, 0),
  yFormat = (v) => num(v, 0),
  xLabel = '',
  yLabel = '',
  compact = false,
  yFromZero = true,
  xIntegers = false,
  emptyText = 'No data yet',
} = {}) {
  const pts = points.filter((p) => isNum(p.x) && isNum(p.y));
  if (pts.length === 0) return `<p class="empty">${esc(emptyText)}</p>`;
  const m = compact
    ? { l: 4, r: 4, t: 4, b: 4 }
    : { l: 48, r: hLines.length ? 70 : 12, t: yLabel ? 22 : 10, b: xLabel ? 34 : 22 };
  let x0 = Math.min(...pts.map((p) => p.x));
  let x1 = Math.max(...pts.map((p) => p.x));
  if (x1 === x0) {
    x0 -= 1;
    x1 += 1;
  }
  const tops = pts.map((p) => (isNum(p.hi) ? Math.max(p.hi, p.y) : p.y));
  const bottoms = pts.map((p) => (isNum(p.lo) ? Math.min(p.lo, p.y) : p.y));
  hLines.forEach((h) => isNum(h.y) && tops.push(h.y) && bottoms.push(h.y));
  let y0 = 0;
  let y1 = Math.max(...tops) * 1.1 || 1;
  if (!yFromZero) {
    const lowest = Math.min(...bottoms);
    const highest = Math.max(...tops);
    const pad = (highest - lowest) * 0.1 || Math.abs(highest) * 0.1 || 1;
    y0 = Math.max(0, lowest - pad);
    y1 = highest + pad;
  }
  const w = width - m.l - m.r;
  const h = height - m.t - m.b;
  const sx = (v) => f(m.l + ((v - x0) / (x1 - x0)) * w);
  const sy = (v) => f(m.t + h - ((Math.max(y0, v) - y0) / (y1 - y0)) * h);
  let out = `<svg class="chart${compact ? ' compact' : ''}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img"`;
  out += ` aria-label="${esc(yLabel || 'chart')}">`;
  if (!compact) {
    for (const t of niceTicks(y0, y1, 4)) {
      if (t < y0) continue;
      out += `<line class="grid" x1="${m.l}" x2="${width - m.r}" y1="${sy(t)}" y2="${sy(t)}"/>`;
      out += `<text class="tick" x="${m.l - 6}" y="${f(sy(t) + 4)}" text-anchor="end">${esc(yFormat(t))}</text>`;
    }
    for (const t of niceTicks(x0, x1, Math.max(2, Math.floor(w / 90)))) {
      if (t < x0 || t > x1 || (xIntegers && !Number.isInteger(t))) continue;
      out += `<text class="tick" x="${sx(t)}" y="${height - m.b + 14}" text-anchor="middle">${esc(xFormat(t))}</text>`;
    }
    out += `<line class="axis" x1="${m.l}" x2="${width - m.r}" y1="${m.t + h}" y2="${m.t + h}"/>`;
    if (xLabel) {
      out += `<text class="label" x="${f(m.l + w / 2)}" y="${height - 4}" text-anchor="middle">${esc(xLabel)}</text>`;
    }
    if (yLabel) {
      out += `<text class="label" x="${m.l - 6}" y="12" text-anchor="end">${esc(yLabel)}</text>`;
    }
  } else {
    out += `<line class="axis" x1="${m.l}" x2="${width - m.r}" y1="${m.t + h}" y2="${m.t + h}"/>`;
  }
  for (const line of hLines) {
    if (!isNum(line.y)) continue;
    out += `<line class="ref ${esc(line.cls || '')}" x1="${m.l}" x2="${width - m.r}" y1="${sy(line.y)}" y2="${sy(line.y)}"/>`;
    if (!compact && line.label) {
      out += `<text class="ref-label ${esc(line.cls || '')}" x="${width - m.r + 4}" y="${f(sy(line.y) + 4)}">${esc(line.label)}</text>`;
    }
  }
  for (const p of pts) {
    if (isNum(p.lo) && isNum(p.hi)) {
      out += `<line class="whisker ${esc(p.cls || '')}" x1="${sx(p.x)}" x2="${sx(p.x)}" y1="${sy(p.lo)}" y2="${sy(p.hi)}"/>`;
    }
  }
  for (const p of pts) out += marker(p.shape, sx(p.x), sy(p.y), p.cls, p.title);
  return `${out}</svg>`;
}

// Horizontal bars {label, value, cls} against a limit line (e.g. usable RAM).
export function barChart({ bars = [], limit = null, limitLabel = '', unit = '', width = 480 } = {}) {
  const rows = bars.filter((b) => isNum(b.value));
  if (rows.length === 0) return '<p class="empty">No data yet</p>';
  const rowH = 22;
  const m = { l: 130, r: 70, t: 6, b: isNum(limit) ? 18 : 6 };
  const height = m.t + rows.length * rowH + m.b;
  const top = Math.max(...rows.map((b) => b.value), isNum(limit) ? limit : 0) * 1.08 || 1;
  const w = width - m.l - m.r;
  const sx = (v) => f(m.l + (Math.max(0, v) / top) * w);
  let out = `<svg class="chart bars" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="bars">`;
  rows.forEach((b, i) => {
    const y = m.t + i * rowH;
    out += `<text class="tick" x="${m.l - 6}" y="${y + 15}" text-anchor="end">${esc(b.label)}</text>`;
    out += `<rect class="bar ${esc(b.cls || '')}" x="${m.l}" y="${y + 4}" width="${f(Math.max(1, sx(b.value) - m.l))}" height="${rowH - 8}" rx="2"/>`;
    out += `<text class="value" x="${f(sx(b.value) + 4)}" y="${y + 15}">${esc(num(b.value, 1))}${esc(unit)}</text>`;
  });
  if (isNum(limit)) {
    out += `<line class="ref limit" x1="${sx(limit)}" x2="${sx(limit)}" y1="${m.t}" y2="${height - m.b + 2}"/>`;
    out += `<text class="ref-label limit" x="${sx(limit)}" y="${height - 3}" text-anchor="middle">${esc(limitLabel)}</text>`;
  }
  return `${out}</svg>`;
}

// Money per bucket (the money page): revenue up from zero, spend down (compute, storage and
// bandwidth stacked), profit as a line through the buckets. `buckets`: [{from, revenue_usd,
// spend: {compute_usd, storage_usd, bandwidth_usd}, profit_usd}], oldest first.
export function moneyChart({ buckets = [], width = 720, height = 220, xFormat = (v) => num(v, 0) } = {}) {
  if (!buckets.length) return '<p class="empty">No data yet</p>';
  const m = { l: 56, r: 10, t: 10, b: 22 };
  const spendOf = (b) => b.spend?.total_usd ?? 0;
  const top = Math.max(...buckets.map((b) => Math.max(b.revenue_usd ?? 0, spendOf(b))), 0.01) * 1.1;
  const w = width - m.l - m.r;
  const h = height - m.t - m.b;
  const zero = m.t + h / 2;
  const sy = (v) => f(zero - (v / top) * (h / 2));
  const step = w / buckets.length;
  const barW = Math.max(1, step * 0.7);
  let out = `<svg class="chart money" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="revenue, spend and profit over time">`;
  for (const v of [top / 1.1, top / 2.2, 0, -top / 2.2, -top / 1.1]) {
    out += `<line class="grid" x1="${m.l}" x2="${width - m.r}" y1="${sy(v)}" y2="${sy(v)}"/>`;
    out += `<text class="tick" x="${m.l - 6}" y="${f(sy(v) + 4)}" text-anchor="end">${esc(`${v < 0 ? '−' : ''}$${num(Math.abs(v), 2)}`)}</text>`;
  }
  const line = [];
  buckets.forEach((b, i) => {
    const x = f(m.l + i * step + (step - barW) / 2);
    const revenue = b.revenue_usd ?? 0;
    if (revenue > 0) out += `<rect class="bar revenue" x="${x}" y="${sy(revenue)}" width="${f(barW)}" height="${f(zero - sy(revenue))}"><title>${esc(`revenue $${num(revenue, 3)}`)}</title></rect>`;
    let below = 0;
    for (const [key, cls] of [['compute_usd', 'compute'], ['storage_usd', 'storage'], ['bandwidth_usd', 'bandwidth']]) {
      const v = b.spend?.[key] ?? 0;
      if (v <= 0) continue;
      out += `<rect class="bar spend ${cls}" x="${x}" y="${sy(-below)}" width="${f(barW)}" height="${f(sy(-(below + v)) - sy(-below))}"><title>${esc(`${cls} $${num(v, 3)}`)}</title></rect>`;
      below += v;
    }
    line.push(`${f(m.l + i * step + step / 2)},${sy(b.profit_usd ?? 0)}`);
  });
  out += `<polyline class="profit-line" points="${line.join(' ')}"/>`;
  const every = Math.max(1, Math.ceil(buckets.length / 8));
  buckets.forEach((b, i) => {
    if (i % every) return;
    out += `<text class="tick" x="${f(m.l + i * step + step / 2)}" y="${height - 6}" text-anchor="middle">${esc(xFormat(b.from))}</text>`;
  });
  return `${out}</svg>`;
}
