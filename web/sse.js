// Server-sent events read from a fetch() body (EventSource cannot send an Authorization
// header). DOM-free (unit-tested in node).

// Splits a text stream into events as the WHATWG event-stream format defines them. Chunks may
// end anywhere: mid-line, mid-"\r\n", mid-event.
export class SseParser {
  constructor() {
    this.buffer = '';
    this.eventName = '';
    this.dataLines = [];
    this.comments = 0; // keep-alives seen
  }

  // Returns the events completed by `chunk`: [{event, data}].
  push(chunk) {
    this.buffer += chunk;
    const events = [];
    const lineBreak = /\r\n|\r|\n/g;
    let start = 0;
    for (;;) {
      lineBreak.lastIndex = start;
      const match = lineBreak.exec(this.buffer);
      if (!match) break;
      // A "\r" that ends the buffer may be the first half of "\r\n".
      if (match[0] === '\r' && match.index === this.buffer.length - 1) break;
      const event = this.line(this.buffer.slice(start, match.index));
      if (event) events.push(event);
      start = match.index + match[0].length;
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  line(text) {
    if (text === '') {
      const hasData = this.dataLines.length > 0;
      const event = { event: this.eventName || 'message', data: this.dataLines.join('\n') };
      this.eventName = '';
      this.dataLines = [];
      return hasData ? event : null;
    }
    if (text.startsWith(':')) {
      this.comments += 1;
      return null;
    }
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.eventName = value;
    else if (field === 'data') this.dataLines.push(value);
    return null;
  }
}

// Reconnect delay after `attempt` failures in a row: exponential with jitter, so many tabs
// do not come back in step after a restart of the manager.
export function backoffDelay(attempt, { baseMs = 1000, maxMs = 30000, random = Math.random } = {}) {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt));
  return Math.round(ceiling * (0.5 + random() / 2));
}
