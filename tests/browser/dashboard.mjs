// Browser test of the dashboard during a real `proverfleet demo` run, in Debian's headless
// Chromium driven by playwright-core: sign in, see instances appear and change state, open an
// instance page, deploy an offer, destroy an instance, block a host, follow a proved job from
// the jobs list to its timeline, the machine and the instance that proved it, read the money
// page and follow a machine from it. Screenshots go to $PF_ARTIFACT_DIR.
// Run by ctest (CMakeLists.txt passes PF_BINARY, PF_SOURCE_DIR, PF_ARTIFACT_DIR); exits 1 with
// the step that failed.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const bin = process.env.PF_BINARY;
const source = process.env.PF_SOURCE_DIR;
const artifacts = process.env.PF_ARTIFACT_DIR ?? 'build/browser-artifacts';
const chromiumPath = process.env.PF_CHROMIUM ?? '/usr/bin/chromium';
if (!bin || !source) fail('set PF_BINARY and PF_SOURCE_DIR (ctest does)');
if (!existsSync(chromiumPath)) fail(`no Chromium at ${chromiumPath}: run scripts/install-deps`);

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  fail('playwright-core is not installed in tests/browser: run scripts/install-deps');
}

mkdirSync(artifacts, { recursive: true });
const data = mkdtempSync(join(tmpdir(), 'proverfleet-browser-'));
let step = 'starting the demo';
let demo;
let browser;
let page;

function fail(message) {
  console.error(`browser test failed: ${message}`);
  process.exit(1);
}

function log(message) {
  console.log(`[browser] ${message}`);
}

async function stopDemo() {
  if (!demo || demo.exitCode !== null) return;
  demo.kill('SIGTERM');
  await new Promise((resolve) => {
    const timer = setTimeout(() => {
      demo.kill('SIGKILL');
      resolve();
    }, 30_000);
    demo.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

async function main() {
  demo = spawn(bin, ['demo', '--listen', '127.0.0.1:0', '--data', data, '--time-scale', '120',
    '--quiet', '--scenario', join(source, 'scenarios', 'demo-small.json')],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  demo.stderr.on('data', (chunk) => { stderr += chunk; });
  const started = await new Promise((resolve, reject) => {
    const found = {};
    const lines = createInterface({ input: demo.stdout });
    const timer = setTimeout(() => reject(new Error(`demo printed no URL in 60 s\n${stderr}`)), 60_000);
    lines.on('line', (line) => {
      const url = line.match(/dashboard:\s+(http:\/\/\S+?)\/?$/);
      const token = line.match(/operator token:\s+(\S+)/);
      if (url) found.url = url[1];
      if (token) found.token = token[1];
      if (found.url && found.token) {
        clearTimeout(timer);
        resolve(found);
      }
    });
    demo.once('exit', (code) => reject(new Error(`demo exited (${code})\n${stderr}`)));
  });
  log(`demo at ${started.url}`);

  step = 'launching Chromium';
  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
  page = await browser.newPage({ viewport: { width: 1440, height: 960 } });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('dialog', (d) => d.accept());  // native confirms, if any

  step = 'signing in with a wrong token';
  await page.goto(`${started.url}/`);
  await page.fill('[data-testid=token-input]', 'not-the-token');
  await page.click('[data-testid=sign-in-submit]');
  await page.waitForSelector('[data-testid=sign-in-error]:not(:empty)', { timeout: 10_000 });

  step = 'signing in';
  await page.fill('[data-testid=token-input]', started.token);
  await page.click('[data-testid=sign-in-submit]');
  await page.waitForSelector('[data-testid=fleet-header]', { state: 'visible', timeout: 15_000 });
  await page.screenshot({ path: join(artifacts, '01-signed-in.png'), fullPage: true });

  step = 'waiting for instances to appear';
  await page.click('[data-testid=nav-instances]');
  await page.waitForSelector('[data-testid=instance-row]', { timeout: 120_000 });
  const states = async () => page.$$eval('[data-testid=instance-row]',
    (rows) => Object.fromEntries(rows.map((r) => [r.dataset.id, r.dataset.state])));
  const first = await states();
  log(`instances: ${JSON.stringify(first)}`);
  await page.screenshot({ path: join(artifacts, '02-instances.png'), fullPage: true });

  step = 'waiting for an instance to change state (live updates)';
  const changed = await (async () => {
    const deadline = Date.now() + 150_000;
    while (Date.now() < deadline) {
      const now = await states();
      for (const [id, state] of Object.entries(now)) {
        if (first[id] !== undefined && first[id] !== state) return { id, from: first[id], to: state };
      }
      await page.waitForTimeout(500);
    }
    return null;
  })();
  if (!changed) throw new Error(`no instance changed state; still ${JSON.stringify(await states())}`);
  log(`instance ${changed.id}: ${changed.from} -> ${changed.to} without a reload`);
  await page.screenshot({ path: join(artifacts, '03-state-changed.png'), fullPage: true });

  step = 'opening an instance page';
  await page.click(`[data-testid=instance-row][data-id="${changed.id}"] [data-testid=instance-link]`);
  await page.waitForSelector('[data-testid=instance-page]', { timeout: 15_000 });
  await page.waitForSelector('[data-testid=event-timeline]', { timeout: 15_000 });
  const timeline = await page.textContent('[data-testid=event-timeline]');
  if (!timeline || !/rent|boot|regist/i.test(timeline)) {
    throw new Error(`the event timeline shows no lifecycle events: ${timeline}`);
  }
  await page.screenshot({ path: join(artifacts, '04-instance-page.png'), fullPage: true });

  // The autopilot rents the best offers itself: paused, it cannot take the offer this test
  // deploys between the list and the click (which the manager would refuse with a 409).
  step = 'pausing the autopilot';
  await page.click('[data-testid=autopilot-status][data-paused=false] [data-testid=autopilot-toggle]');
  await page.waitForSelector('[data-testid=autopilot-status][data-paused=true]', { timeout: 15_000 });
  // A round that had already started stops before its next rental, but its paced create may
  // still be on the way: wait until the autopilot says no round is in progress.
  for (const until = Date.now() + 30_000; ;) {
    const inRound = await page.evaluate(async () => {
      const token = sessionStorage.getItem('proverfleet.operator-token');
      const reply = await fetch('/api/v1/autopilot', { headers: { Authorization: `Bearer ${token}` } });
      return reply.ok ? (await reply.json()).in_round : null;
    });
    if (inRound === false) break;
    if (Date.now() > until) throw new Error(`the autopilot's round did not end (in_round: ${inRound})`);
    await page.waitForTimeout(250);
  }

  step = 'deploying an offer';
  await page.click('[data-testid=nav-offers]');
  await page.waitForSelector('[data-testid=deploy-button]', { timeout: 60_000 });
  await page.screenshot({ path: join(artifacts, '05-offers.png'), fullPage: true });
  const offerId = await page.getAttribute('[data-testid=deploy-button] >> nth=0', 'data-offer-id');
  await page.click('[data-testid=deploy-button] >> nth=0');
  await page.waitForSelector('[data-testid=confirm-dialog]', { state: 'visible', timeout: 5_000 });
  await page.click('[data-testid=confirm-ok]');
  // The dashboard opens the new instance's page once the manager has answered (app.js deploy):
  // wait for it before going back to the list, or that navigation lands after the click and
  // leaves the test on the instance page.
  step = `waiting for the deployed offer ${offerId} to open as an instance`;
  await page.waitForFunction(() => /^#\/instances\/\d+$/.test(location.hash), null, { timeout: 60_000 });
  const deployedId = (await page.evaluate(() => location.hash)).split('/').pop();
  step = `waiting for instance ${deployedId} (offer ${offerId}) in the list`;
  await page.click('[data-testid=nav-instances]');
  await page.waitForSelector(`[data-testid=instance-row][data-id="${deployedId}"]`, { timeout: 60_000 });
  log(`deployed offer ${offerId} as instance ${deployedId}`);

  step = 'resuming the autopilot';
  await page.click('[data-testid=autopilot-status][data-paused=true] [data-testid=autopilot-toggle]');
  await page.waitForSelector('[data-testid=autopilot-status][data-paused=false]', { timeout: 15_000 });

  step = 'destroying an instance';
  // Rows re-render as the fleet changes (and a booting one may be closed by its deadline right
  // then): pick a live row and click its button, picking again if it went away meanwhile.
  // The search has a time budget (a loaded machine re-renders slowly) and remembers why each
  // try failed, so that a failure says what the page showed.
  let victim = null;
  const tries = [];
  const destroyBy = Date.now() + 60_000;
  while (!victim && Date.now() < destroyBy) {
    const id = await page.$eval(
      '[data-testid=instance-row]:not([data-state=destroyed]):not([data-state=destroying]) [data-testid=destroy-button]',
      (b) => b.dataset.id).catch(() => null);
    if (!id) {
      tries.push(`no button; rows ${JSON.stringify(await states().catch(() => ({})))}`);
      await page.waitForTimeout(500);
      continue;
    }
    try {
      await page.click(`[data-testid=destroy-button][data-id="${id}"]`, { timeout: 3_000 });
      victim = id;
    } catch (e) {  // gone or re-rendered: pick again
      tries.push(`instance ${id}: ${String(e.message ?? e).split('\n')[0]}`);
    }
  }
  if (!victim) {
    throw new Error(`no live instance with a destroy button; tries:\n${tries.slice(-10).join('\n')}`);
  }
  await page.waitForSelector('[data-testid=confirm-dialog]', { state: 'visible', timeout: 5_000 });
  await page.click('[data-testid=confirm-ok]');
  await page.waitForSelector(
    `[data-testid=instance-row][data-id="${victim}"][data-state=destroying], ` +
    `[data-testid=instance-row][data-id="${victim}"][data-state=destroyed]`, { timeout: 60_000 });
  log(`destroyed instance ${victim}`);
  await page.screenshot({ path: join(artifacts, '06-destroyed.png'), fullPage: true });

  step = 'hosts page: blocking a machine';
  await page.click('[data-testid=nav-hosts]');
  await page.waitForSelector('[data-testid=bad-host-form]', { timeout: 15_000 });
  await page.fill('[data-testid=bad-host-machine]', '4242');
  await page.fill('[data-testid=bad-host-reason]', 'blocked by the browser test');
  await page.click('[data-testid=bad-host-add]');
  const blocked = '[data-testid=bad-host-row][data-machine-id="4242"]';
  await page.waitForSelector(blocked, { timeout: 15_000 });
  await page.screenshot({ path: join(artifacts, '07-hosts.png'), fullPage: true });

  step = 'hosts page: unblocking the machine';
  await page.click(`${blocked} [data-testid=remove-bad-host-button]`);
  const dialog = await page.waitForSelector('[data-testid=confirm-dialog]', { state: 'visible', timeout: 2_000 })
    .catch(() => null);
  if (dialog) await page.click('[data-testid=confirm-ok]');
  await page.waitForSelector(blocked, { state: 'detached', timeout: 15_000 });

  step = 'jobs page: the gateway\'s jobs, live';
  await page.click('[data-testid=nav-jobs]');
  await page.waitForSelector('[data-testid=jobs-filter]', { timeout: 15_000 });
  await page.waitForSelector('[data-testid=job-row]', { timeout: 120_000 });
  await page.screenshot({ path: join(artifacts, '08-jobs.png'), fullPage: true });

  step = 'jobs page: filtering on done jobs';
  await page.selectOption('[data-testid=jobs-filter-state]', 'done');
  await page.click('[data-testid=jobs-filter-apply]');
  await page.waitForFunction(() => location.hash.includes('state=done'), null, { timeout: 5_000 });
  // Done and delivered (its client took the proof), so its timeline is whole.
  const delivered = '[data-testid=job-row][data-state=done][data-delivered="1"]';
  await page.waitForSelector(delivered, { timeout: 150_000 });
  const shown = await page.$$eval('[data-testid=job-row]', (rows) => rows.map((r) => r.dataset.state));
  if (shown.some((s) => s !== 'done')) throw new Error(`the done filter shows ${JSON.stringify(shown)}`);

  step = 'following a job to its timeline';
  const jobId = await page.getAttribute(`${delivered} >> nth=0`, 'data-id');
  await page.click(`[data-testid=job-row][data-id="${jobId}"] [data-testid=job-link]`);
  await page.waitForSelector(`[data-testid=job-page][data-id="${jobId}"]`, { timeout: 15_000 });
  const steps = await page.$$eval('[data-testid=job-step]', (items) => items.map((i) => i.dataset.kind));
  for (const kind of ['recorded', 'leased', 'proved', 'delivered']) {
    if (!steps.includes(kind)) throw new Error(`job ${jobId}'s timeline has no '${kind}' step: ${JSON.stringify(steps)}`);
  }
  log(`job ${jobId}: ${steps.join(' -> ')}`);
  await page.screenshot({ path: join(artifacts, '09-job.png'), fullPage: true });

  step = 'from the job to the machine that proved it';
  const hostHref = await page.getAttribute('[data-testid=job-page] .facts [data-testid=job-host-link]', 'href');
  await page.click('[data-testid=job-page] .facts [data-testid=job-host-link]');
  const machine = hostHref.split('/').pop();
  await page.waitForSelector(`[data-testid=host-page][data-machine-id="${machine}"]`, { timeout: 15_000 });
  await page.waitForSelector('[data-testid=host-rental]', { timeout: 15_000 });
  await page.screenshot({ path: join(artifacts, '10-host.png'), fullPage: true });
  await page.click('[data-testid=host-jobs-link]');
  await page.waitForSelector(`[data-testid=job-row][data-id="${jobId}"]`, { timeout: 30_000 });
  await page.goBack();
  await page.waitForSelector(`[data-testid=host-page][data-machine-id="${machine}"]`, { timeout: 15_000 });
  await page.goBack();
  await page.waitForSelector(`[data-testid=job-page][data-id="${jobId}"]`, { timeout: 15_000 });

  step = 'from the job to the instance that proved it';
  await page.click('[data-testid=job-page] .facts [data-testid=job-instance-link]');
  await page.waitForSelector('[data-testid=instance-page]', { timeout: 15_000 });
  await page.click('[data-testid=instance-jobs-link]');
  await page.waitForSelector(`[data-testid=job-row][data-id="${jobId}"]`, { timeout: 30_000 });

  step = 'money page: the day, then the week';
  await page.click('[data-testid=nav-money]');
  await page.waitForSelector('[data-testid=money-page][data-range=day] [data-testid=money-revenue]', { timeout: 15_000 });
  await page.waitForSelector('[data-testid=money-host-row]', { timeout: 15_000 });
  await page.screenshot({ path: join(artifacts, '11-money.png'), fullPage: true });
  await page.click('[data-testid=money-range-week]');
  await page.waitForSelector('[data-testid=money-page][data-range=week]', { timeout: 15_000 });
  await page.click('[data-testid=money-host-link] >> nth=0');
  await page.waitForSelector('[data-testid=host-page]', { timeout: 15_000 });

  if (pageErrors.length) throw new Error(`script errors on the page:\n${pageErrors.join('\n')}`);
}

try {
  await main();
  log(`passed; screenshots in ${artifacts}`);
} catch (e) {
  console.error(`browser test failed while ${step}: ${e.stack ?? e}`);
  if (page) {
    await page.screenshot({ path: join(artifacts, 'failure.png'), fullPage: true })
      .then(() => console.error(`screenshot of the page: ${join(artifacts, 'failure.png')}`))
      .catch(() => {});
  }
  try {
    const serveLog = readFileSync(join(data, 'serve.log'), 'utf8');
    console.error(`--- serve.log (tail) ---\n${serveLog.split('\n').slice(-40).join('\n')}`);
  } catch { /* no log yet */ }
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  await stopDemo();
  rmSync(data, { recursive: true, force: true });
}
