// The dashboard's page logic: sign-in, hash routes (#/instances, #/instances/ID, #/jobs,
// #/jobs/ID, #/money, #/offers, #/hosts, #/hosts/MACHINE), the live fleet stream, and one
// delegated listener per event type for every button and form (tables are re-rendered whole,
// so rows carry no listeners of their own).

import { api, FleetStream, token } from './api.js';
import { duration, esc } from './format.js';
import * as V from './views.js';
import * as J from './job_views.js';
import { hostPage } from './host_views.js';
import { moneyPage, moneyRangeFromQuery } from './money_views.js';
import { tuneBody } from './ops_views.js';

const $ = (selector) => document.querySelector(selector);

const DETAIL_MIN_INTERVAL_MS = 3000; // an instance page refetches at most this often
const JOBS_MIN_INTERVAL_MS = 5000; // the jobs list and a job's page refetch at most this often
const JOBS_PAGE_SIZE = 50;
const MONEY_MIN_INTERVAL_MS = 15000; // the money page refetches at most this often

const state = {
  snapshot: null,
  offsetS: 0, // server clock − this browser's clock
  route: { page: 'instances' },
  sortKey: 'state',
  sortDir: 1,
  showDestroyed: true,
  instancesKey: '',
  detailId: null,
  detail: null,
  detailRowKey: '',
  detailFetchedAt: 0,
  detailTimer: null,
  offers: null,
  offersParams: { q: '', sort: 'cost', limit: 50 },
  offersRequest: 0,
  hosts: null,
  badHosts: null,
  blockMachine: '',
  jobs: null, // the page of jobs shown
  jobsFilter: null,
  jobsCursors: [], // the cursor of each older page opened (empty: the newest page, kept live)
  jobsRequest: 0,
  jobsFetchedAt: 0,
  job: null, // the open job's page
  jobFetchedAt: 0,
  moneyFetchedAt: 0,
};

let stream = null;

const serverNow = () => Date.now() / 1000 + state.offsetS;

// ---- feedback -------------------------------------------------------------------------------

function toast(message, kind = 'info') {
  const item = document.createElement('div');
  item.className = `toast ${kind}`;
  item.setAttribute('data-testid', 'toast');
  item.textContent = message;
  $('#toasts').append(item);
  setTimeout(() => item.remove(), kind === 'error' ? 8000 : 4000);
}

function handleError(error) {
  if (error.status === 401) {
    signOut('The operator token was refused; sign in again.');
    return;
  }
  toast(error.message, 'error');
}

function confirmDialog({ title, text, ok = 'OK', danger = false }) {
  const dialog = $('#confirm');
  $('#confirm-title').textContent = title;
  $('#confirm-text').textContent = text;
  const okButton = $('#confirm-ok');
  okButton.textContent = ok;
  okButton.classList.toggle('danger', danger);
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
  });
}

function setConnection(status, detail) {
  const el = $('#connection');
  el.dataset.status = status;
  if (status === 'live') el.textContent = 'live';
  else if (status === 'connecting') el.textContent = 'connecting…';
  else el.textContent = `reconnecting in ${Math.ceil(detail.delayMs / 1000)} s`;
  el.title = detail?.reason ?? '';
}

// ---- rendering ------------------------------------------------------------------------------

// A path segment as typed or linked; one that is not valid percent-encoding stays as it is (the
// API then says there is no such job) rather than breaking the page.
function decodeSegment(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function parseRoute(hash) {
  const [path, query = ''] = hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'instances' && /^\d+$/.test(parts[1] ?? '')) return { page: 'instance', id: Number(parts[1]) };
  if (parts[0] === 'jobs' && parts[1]) return { page: 'job', key: decodeSegment(parts[1]) };
  if (parts[0] === 'jobs') return { page: 'jobs', filter: J.jobFilterFromQuery(new URLSearchParams(query)) };
  if (parts[0] === 'money') return { page: 'money', range: moneyRangeFromQuery(new URLSearchParams(query)) };
  if (parts[0] === 'offers') return { page: 'offers' };
  if (parts[0] === 'hosts' && /^\d+$/.test(parts[1] ?? '')) return { page: 'host', machine: Number(parts[1]) };
  if (parts[0] === 'hosts') return { page: 'hosts' };
  return { page: 'instances' };
}

function renderInstances() {
  const el = $('#instances-table');
  if (!el) return;
  if (!state.snapshot) {
    el.innerHTML = '<p class="empty">Waiting for the fleet stream…</p>';
    return;
  }
  el.innerHTML = V.instancesTable(state.snapshot.instances, serverNow(), {
    sortKey: state.sortKey,
    sortDir: state.sortDir,
    showDestroyed: state.showDestroyed,
    jobsInFlight: state.snapshot.summary?.jobs?.in_flight_by_instance ?? null,
  });
  const live = state.snapshot.instances.filter((r) => r.state !== 'destroyed').length;
  $('#instances-count').textContent = `${live} live, ${state.snapshot.instances.length - live} destroyed in the last hour`;
}

function renderDetail() {
  const el = $('#instance-detail');
  if (!el || !state.detail) return;
  const oldLogs = el.querySelector('.logs');
  const followLogs = !oldLogs || oldLogs.scrollTop + oldLogs.clientHeight >= oldLogs.scrollHeight - 4;
  const openDetails = new Set([...el.querySelectorAll('details[open][data-key]')].map((d) => d.dataset.key));
  el.innerHTML = V.instancePage(state.detail, serverNow());
  el.querySelectorAll('details').forEach((d, i) => {
    d.dataset.key = String(i);
    if (openDetails.has(d.dataset.key)) d.open = true;
  });
  const logs = el.querySelector('.logs');
  if (logs && followLogs) logs.scrollTop = logs.scrollHeight;
}

async function loadDetail() {
  const id = state.detailId;
  if (id === null) return;
  clearTimeout(state.detailTimer);
  state.detailFetchedAt = Date.now();
  try {
    const detail = await api('GET', `/api/v1/instances/${id}`);
    if (state.route.page !== 'instance' || state.detailId !== id) return;
    state.detail = detail;
    renderDetail();
  } catch (error) {
    const el = $('#instance-detail');
    if (error.status === 404 && el) el.innerHTML = `<p class="empty">There is no instance #${esc(id)}.</p>`;
    else handleError(error);
  }
}

// Refetches the open instance when its row in the stream changed, at most every few seconds.
function maybeRefreshDetail() {
  const row = state.snapshot?.instances.find((r) => r.id === state.detailId) ?? null;
  const key = JSON.stringify(row);
  if (key === state.detailRowKey) return;
  state.detailRowKey = key;
  clearTimeout(state.detailTimer);
  const wait = Math.max(0, state.detailFetchedAt + DETAIL_MIN_INTERVAL_MS - Date.now());
  state.detailTimer = setTimeout(loadDetail, wait);
}

async function loadOffers() {
  const request = ++state.offersRequest;
  const el = $('#offers-results');
  if (el) el.innerHTML = '<p class="empty">Asking the market…</p>';
  const { q, sort, limit } = state.offersParams;
  const query = new URLSearchParams({ sort, limit: String(limit) });
  if (q) query.set('q', q);
  try {
    const offers = await api('GET', `/api/v1/offers?${query}`);
    if (request !== state.offersRequest) return;
    state.offers = offers;
    const target = $('#offers-results');
    if (target) target.innerHTML = V.offersTable(offers);
  } catch (error) {
    if (request !== state.offersRequest) return;
    const target = $('#offers-results');
    if (target) target.innerHTML = `<p class="error" data-testid="offers-error">${esc(error.message)}</p>`;
    if (error.status === 401) handleError(error);
  }
}

async function loadJobs() {
  const request = ++state.jobsRequest;
  state.jobsFetchedAt = Date.now();
  const cursor = state.jobsCursors.at(-1) ?? null;
  const query = J.jobsApiQuery(state.jobsFilter, serverNow(), { limit: JOBS_PAGE_SIZE, cursor });
  try {
    const rows = await api('GET', `/api/v1/jobs?${query}`);
    if (request !== state.jobsRequest || state.route.page !== 'jobs') return;
    state.jobs = rows;
    renderJobs();
  } catch (error) {
    if (request !== state.jobsRequest) return;
    const el = $('#jobs-table');
    if (el) el.innerHTML = `<p class="error" data-testid="jobs-error">${esc(error.message)}</p>`;
    if (error.status === 401) handleError(error);
  }
}

function renderJobs() {
  const el = $('#jobs-table');
  if (!el) return;
  el.innerHTML = J.jobsTable(state.jobs, serverNow());
  const full = Array.isArray(state.jobs) && state.jobs.length === JOBS_PAGE_SIZE;
  const page = state.jobsCursors.length;
  $('#jobs-pager').innerHTML =
    (page ? '<button type="button" class="small" data-action="jobs-newest">newest</button>' : '') +
    (full ? '<button type="button" class="small" data-action="jobs-older" data-testid="jobs-older">older →</button>' : '') +
    `<span class="muted">${page ? `page ${page + 1}` : 'newest first, live'}</span>`;
}

async function loadJob() {
  const key = state.route.key;
  state.jobFetchedAt = Date.now();
  try {
    const job = await api('GET', `/api/v1/jobs/${encodeURIComponent(key)}`);
    if (state.route.page !== 'job' || state.route.key !== key) return;
    state.job = job;
    const el = $('#job-detail');
    if (el) el.innerHTML = J.jobPage(job, serverNow());
  } catch (error) {
    const el = $('#job-detail');
    if (error.status === 404 && el) el.innerHTML = `<p class="empty">There is no job ${esc(key)}.</p>`;
    else if (el && error.status === 409) el.innerHTML = `<p class="empty">${esc(error.message)}</p>`;
    else handleError(error);
  }
}

async function loadMoney() {
  const range = state.route.range;
  state.moneyFetchedAt = Date.now();
  try {
    const ledger = await api('GET', `/api/v1/money?range=${encodeURIComponent(range)}`);
    if (state.route.page !== 'money' || state.route.range !== range) return;
    const el = $('#money');
    if (el) el.innerHTML = moneyPage(ledger, range);
  } catch (error) {
    const el = $('#money');
    if (el) el.innerHTML = `<p class="error" data-testid="money-error">${esc(error.message)}</p>`;
    if (error.status === 401) handleError(error);
  }
}

async function loadHost() {
  const machine = state.route.machine;
  try {
    const detail = await api('GET', `/api/v1/hosts/${machine}`);
    if (state.route.page !== 'host' || state.route.machine !== machine) return;
    const el = $('#host-detail');
    if (el) el.innerHTML = hostPage(detail, serverNow());
  } catch (error) {
    const el = $('#host-detail');
    if (error.status === 404 && el) el.innerHTML = `<p class="empty">${esc(error.message)}</p>`;
    else handleError(error);
  }
}

// After a block or unblock: whichever hosts view is open shows it.
async function reloadHostViews() {
  if (state.route.page === 'host') await loadHost();
  else await loadHosts();
}

function renderHosts() {
  const now = serverNow();
  if ($('#hosts-table')) $('#hosts-table').innerHTML = V.hostsTable(state.hosts, now);
  if ($('#bad-hosts-table')) $('#bad-hosts-table').innerHTML = V.badHostsTable(state.badHosts, now);
}

async function loadHosts() {
  try {
    const [hosts, badHosts] = await Promise.all([api('GET', '/api/v1/hosts'), api('GET', '/api/v1/bad-hosts')]);
    state.hosts = hosts;
    state.badHosts = badHosts;
    if (state.route.page === 'hosts') renderHosts();
  } catch (error) {
    handleError(error);
  }
}

function renderRoute() {
  const route = parseRoute(location.hash);
  state.route = route;
  const section = { instance: 'instances', job: 'jobs', host: 'hosts' }[route.page] ?? route.page;
  document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('active', a.dataset.nav === section));
  const view = $('#view');
  clearTimeout(state.detailTimer);
  if (route.page === 'instances') {
    view.innerHTML =
      '<div class="toolbar"><h1>Instances</h1><span id="instances-count" class="muted"></span><div class="spacer"></div>' +
      `<label><input type="checkbox" id="show-destroyed"${state.showDestroyed ? ' checked' : ''}> show destroyed (last hour)</label></div>` +
      '<div id="instances-table" class="table-wrap"></div>';
    renderInstances();
  } else if (route.page === 'instance') {
    view.innerHTML = '<div id="instance-detail"><p class="empty">Loading…</p></div>';
    state.detailId = route.id;
    state.detail = null;
    state.detailRowKey = JSON.stringify(state.snapshot?.instances.find((r) => r.id === route.id) ?? null);
    loadDetail();
  } else if (route.page === 'jobs') {
    const filterKey = J.jobFilterQuery(route.filter);
    if (!state.jobsFilter || J.jobFilterQuery(state.jobsFilter) !== filterKey) {
      state.jobsCursors = [];
      state.jobs = null;
    }
    state.jobsFilter = route.filter;
    view.innerHTML = '<div class="toolbar"><h1>Jobs</h1><span class="muted">every proof request the gateway took, newest first</span></div>' +
      J.jobsFilterForm(route.filter) +
      '<div id="jobs-table" class="table-wrap"></div><div id="jobs-pager" class="toolbar pager"></div>';
    renderJobs();
    loadJobs();
  } else if (route.page === 'job') {
    view.innerHTML = '<div id="job-detail"><p class="empty">Loading…</p></div>';
    state.job = null;
    loadJob();
  } else if (route.page === 'money') {
    view.innerHTML = '<div id="money"><p class="empty">Loading…</p></div>';
    loadMoney();
  } else if (route.page === 'host') {
    view.innerHTML = '<div id="host-detail"><p class="empty">Loading…</p></div>';
    loadHost();
  } else if (route.page === 'offers') {
    view.innerHTML = '<div class="toolbar"><h1>Offers</h1></div>' + V.offersForm(state.offersParams) +
      '<div id="offers-results" class="table-wrap"></div>';
    if (state.offers) $('#offers-results').innerHTML = V.offersTable(state.offers);
    else loadOffers();
  } else {
    view.innerHTML =
      '<section class="panel"><h2>Hosts</h2><p class="muted">Every measured run per machine: rate with its interval; contended and throttled runs are marked and left out of the statistics when clean runs exist.</p><div id="hosts-table" class="table-wrap"></div></section>' +
      `<section class="panel"><h2>Blocked machines</h2><div id="bad-host-form">${V.badHostForm(state.blockMachine)}</div><div id="bad-hosts-table" class="table-wrap"></div></section>`;
    renderHosts();
    loadHosts();
  }
}

function onSnapshot(snapshot) {
  state.snapshot = snapshot;
  if (typeof snapshot.at === 'number') state.offsetS = snapshot.at - Date.now() / 1000;
  $('#fleet').innerHTML = V.fleetHeader(snapshot);
  // An event may change only the header (autopilot, totals): the table, the costly part with
  // hundreds of rows, is rebuilt only when a row changed.
  const instancesKey = JSON.stringify([snapshot.instances, snapshot.summary?.jobs?.in_flight_by_instance ?? null]);
  const rowsChanged = instancesKey !== state.instancesKey;
  state.instancesKey = instancesKey;
  if (state.route.page === 'instances' && rowsChanged) renderInstances();
  else if (state.route.page === 'instance') maybeRefreshDetail();
  // Jobs are not in the stream: the newest page and an open job follow it by refetching.
  else if (state.route.page === 'jobs' && !state.jobsCursors.length &&
    Date.now() - state.jobsFetchedAt >= JOBS_MIN_INTERVAL_MS) loadJobs();
  else if (state.route.page === 'money' && Date.now() - state.moneyFetchedAt >= MONEY_MIN_INTERVAL_MS) loadMoney();
  else if (state.route.page === 'job' && state.job && !['done', 'failed', 'cancelled'].includes(state.job.state) &&
    Date.now() - state.jobFetchedAt >= JOBS_MIN_INTERVAL_MS) loadJob();
}

// "12m 03s" cells count up between events without re-rendering the tables.
function tick() {
  const now = serverNow();
  document.querySelectorAll('[data-since]').forEach((el) => {
    el.textContent = duration(now - Number(el.dataset.since));
  });
}

// ---- actions (one delegated listener) -------------------------------------------------------

async function withBusy(button, work) {
  button.disabled = true;
  try {
    await work();
  } catch (error) {
    handleError(error);
  } finally {
    button.disabled = false;
  }
}

const actions = {
  sort(el) {
    const key = el.dataset.sort;
    if (state.sortKey === key) state.sortDir = -state.sortDir;
    else {
      state.sortKey = key;
      state.sortDir = 1;
    }
    renderInstances();
  },
  async destroy(el) {
    const id = el.dataset.id;
    const ok = await confirmDialog({
      title: `Destroy instance #${id}?`,
      text: 'The machine is released at the market and billing stops. This cannot be undone.',
      ok: 'Destroy',
      danger: true,
    });
    if (!ok) return;
    await withBusy(el, async () => {
      await api('DELETE', `/api/v1/instances/${id}`);
      toast(`Instance #${id} is being destroyed`);
    });
  },
  async deploy(el) {
    const offerId = Number(el.dataset.offerId);
    const ok = await confirmDialog({
      title: `Rent offer ${offerId}?`,
      text: `${el.dataset.label}. Billing starts when the machine runs; the manager benchmarks it and keeps it only if it pays.`,
      ok: 'Deploy',
    });
    if (!ok) return;
    await withBusy(el, async () => {
      const instance = await api('POST', '/api/v1/instances', { offer_id: offerId });
      toast(`Instance #${instance.id} created for offer ${offerId}`);
      state.offers = null; // the rented offer is gone from the market
      location.hash = `#/instances/${instance.id}`;
    });
  },
  async autopilot(el) {
    const paused = el.dataset.paused === 'true';
    await withBusy(el, async () => {
      const status = await api('POST', '/api/v1/autopilot', { paused });
      if (state.snapshot) {
        state.snapshot.autopilot = status;
        $('#fleet').innerHTML = V.fleetHeader(state.snapshot);
      }
      toast(paused ? 'Autopilot paused' : 'Autopilot resumed');
    });
  },
  'refresh-instance': () => loadDetail(),
  'refresh-job': () => loadJob(),
  'jobs-older'() {
    const last = state.jobs?.at(-1);
    if (!last) return;
    state.jobsCursors.push(last.id);
    loadJobs();
  },
  'jobs-newest'() {
    state.jobsCursors = [];
    loadJobs();
  },
  async 'remove-bad-host'(el) {
    const machine = el.dataset.machineId;
    const ok = await confirmDialog({
      title: `Unblock machine ${machine}?`,
      text: 'Its operator and automatic entries are removed; the autopilot may rent it again.',
      ok: 'Remove',
      danger: true,
    });
    if (!ok) return;
    await withBusy(el, async () => {
      await api('DELETE', `/api/v1/bad-hosts/${machine}`);
      toast(`Machine ${machine} unblocked`);
      await reloadHostViews();
    });
  },
  'block-host'(el) {
    state.blockMachine = el.dataset.machineId;
    $('#bad-host-form').innerHTML = V.badHostForm(state.blockMachine);
    $('#bad-host-form input[name="reason"]').focus();
  },
  'sign-out': () => signOut(''),
};

document.addEventListener('click', (event) => {
  const el = event.target.closest('[data-action]');
  if (!el || !(el.dataset.action in actions)) return;
  event.preventDefault();
  actions[el.dataset.action](el);
});

document.addEventListener('change', (event) => {
  if (event.target.id === 'show-destroyed') {
    state.showDestroyed = event.target.checked;
    renderInstances();
  }
});

document.addEventListener('submit', async (event) => {
  const form = event.target;
  if (form.method === 'dialog') return; // the confirm dialog closes itself
  event.preventDefault();
  const data = new FormData(form);
  if (form.id === 'sign-in') {
    await signIn(String(data.get('token') ?? '').trim());
  } else if (form.dataset.form === 'offers') {
    state.offersParams = {
      q: String(data.get('q') ?? '').trim(),
      sort: String(data.get('sort') ?? 'cost'),
      limit: Number(data.get('limit')) || 50,
    };
    await loadOffers();
  } else if (form.dataset.form === 'jobs') {
    const filter = {};
    for (const [key, value] of data.entries()) filter[key] = String(value).trim();
    const query = J.jobFilterQuery(J.jobFilterFromQuery(new URLSearchParams(filter)));
    const hash = `#/jobs${query ? `?${query}` : ''}`;
    // The same filter again is a refresh: no hashchange comes for an unchanged address.
    if (location.hash === hash) loadJobs();
    else location.hash = hash;
  } else if (form.dataset.form === 'tune') {
    const parsed = tuneBody(data.get('concurrency'), data.get('partitions'));
    if (parsed.error) {
      toast(parsed.error, 'error');
      return;
    }
    const id = form.dataset.id;
    const button = form.querySelector('button[type="submit"]');
    await withBusy(button, async () => {
      const reply = await api('POST', `/api/v1/instances/${id}/tune`, parsed.body);
      toast(`Instance ${id}: ${(reply?.commands ?? []).join(', ')} sent with the next heartbeat`);
      form.reset();
      await loadDetail();
    });
  } else if (form.dataset.form === 'bad-host') {
    const body = { machine_id: Number(data.get('machine_id')), reason: String(data.get('reason') ?? '').trim() };
    const ttl = String(data.get('ttl_hours') ?? '').trim();
    if (ttl) body.ttl_hours = Number(ttl);
    const button = form.querySelector('button[type="submit"]');
    await withBusy(button, async () => {
      await api('POST', '/api/v1/bad-hosts', body);
      toast(`Machine ${body.machine_id} blocked`);
      state.blockMachine = '';
      form.reset();
      await reloadHostViews();
    });
  }
});

window.addEventListener('hashchange', renderRoute);

// ---- session --------------------------------------------------------------------------------

function showApp() {
  $('#signin').hidden = true;
  $('#app').hidden = false;
  $('#sign-out').hidden = false;
  stream = new FleetStream({
    onSnapshot,
    onStatus: setConnection,
    onUnauthorized: (message) => signOut(`The operator token was refused (${message}).`),
  });
  stream.start();
  renderRoute();
}

function signOut(message) {
  if (stream) stream.stop();
  stream = null;
  token.clear();
  Object.assign(state, {
    snapshot: null, detail: null, detailId: null, offers: null, hosts: null, badHosts: null, jobs: null, job: null,
  });
  clearTimeout(state.detailTimer);
  $('#app').hidden = true;
  $('#sign-out').hidden = true;
  $('#signin').hidden = false;
  $('#fleet').innerHTML = '';
  $('#view').innerHTML = '';
  $('#sign-in-error').textContent = message ?? '';
  $('#token').value = '';
  $('#token').focus();
}

async function signIn(value) {
  const error = $('#sign-in-error');
  if (!value) {
    error.textContent = 'Paste the operator token.';
    return;
  }
  token.set(value);
  const button = $('#sign-in button[type="submit"]');
  button.disabled = true;
  try {
    await api('GET', '/api/v1/fleet');
    error.textContent = '';
    $('#token').value = '';
    showApp();
  } catch (e) {
    token.clear();
    error.textContent = e.status === 401 ? 'That token was refused.' : e.message;
  } finally {
    button.disabled = false;
  }
}

setInterval(tick, 1000);
if (token.get()) showApp();
else signOut('');
