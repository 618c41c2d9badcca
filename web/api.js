// The operator API from the browser: the token (sessionStorage: it goes when the tab closes),
// JSON calls, and the live fleet stream read with fetch() so it can send the token.

import { backoffDelay, SseParser } from './sse.js';

const TOKEN_KEY = 'proverfleet.operator-token';

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Calls the operator API; resolves to the reply's JSON, rejects with ApiError carrying the
// server's {"error": ...} message.
export async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${token.get() ?? ''}`, Accept: 'application/json' };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, `cannot reach the manager (${e.message})`);
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) throw new ApiError(res.status, json?.error ?? `HTTP ${res.status}`);
  return json;
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });

// The fleet stream: one connection, reconnected with backoff when it drops; a silent
// connection (no event, no keep-alive for `silenceMs`) counts as dropped.
//   onSnapshot(json)          every `fleet` event
//   onStatus(state, detail)   'connecting' | 'live' | 'retrying' (detail: {delayMs, reason})
//   onUnauthorized(message)   the token was refused: the stream stops
export class FleetStream {
  constructor({ onSnapshot, onStatus, onUnauthorized, silenceMs = 40000 }) {
    this.onSnapshot = onSnapshot;
    this.onStatus = onStatus;
    this.onUnauthorized = onUnauthorized;
    this.silenceMs = silenceMs;
    this.controller = null;
  }

  start() {
    this.stop();
    this.controller = new AbortController();
    this.run(this.controller.signal);
  }

  stop() {
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  async run(signal) {
    let failures = 0;
    while (!signal.aborted) {
      let reason = 'connection closed';
      this.onStatus('connecting');
      const attempt = new AbortController();
      const abortAttempt = () => attempt.abort();
      signal.addEventListener('abort', abortAttempt, { once: true });
      let watchdog = null;
      const feed = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => attempt.abort(), this.silenceMs);
      };
      try {
        feed();
        const res = await fetch('/api/v1/stream', {
          headers: { Authorization: `Bearer ${token.get() ?? ''}`, Accept: 'text/event-stream' },
          cache: 'no-store',
          signal: attempt.signal,
        });
        if (res.status === 401) {
          let message = 'the operator token was refused';
          try {
            message = (await res.json()).error ?? message;
          } catch {
            // the status says enough
          }
          this.onUnauthorized(message);
          return;
        }
        if (!res.ok || !res.body) {
          let message = `HTTP ${res.status}`;
          try {
            message = (await res.json()).error ?? message;
          } catch {
            // keep the status
          }
          throw new Error(message);
        }
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        const parser = new SseParser();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          feed();
          for (const event of parser.push(value)) {
            if (event.event === 'fleet') {
              let snapshot = null;
              try {
                snapshot = JSON.parse(event.data);
              } catch {
                continue;
              }
              failures = 0;
              this.onStatus('live');
              this.onSnapshot(snapshot);
            } else if (event.event === 'error') {
              try {
                reason = JSON.parse(event.data).error ?? reason;
              } catch {
                reason = event.data;
              }
            }
          }
        }
      } catch (e) {
        if (signal.aborted) return;
        reason = attempt.signal.aborted ? 'no data for a while' : e.message;
      } finally {
        clearTimeout(watchdog);
        signal.removeEventListener('abort', abortAttempt);
      }
      if (signal.aborted) return;
      const delayMs = backoffDelay(failures);
      failures += 1;
      this.onStatus('retrying', { delayMs, reason });
      await sleep(delayMs, signal);
    }
  }
}
