import type { HealthEvent } from '../bindings/HealthEvent';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import { SseParser } from './sse';
import type { LiveHandlers, Transport } from './transport';

type Fetch = typeof fetch;

/**
 * The browser transport: same-origin `fetch` against `switchyard serve --ui`, with the
 * management token as a bearer token.
 */
export class HttpTransport implements Transport {
  readonly mode = 'http' as const;
  private readonly fetch: Fetch;

  constructor(
    private readonly token: string,
    options: { base?: string; fetch?: Fetch; onUnauthorized?: () => void } = {},
  ) {
    this.base = options.base ?? '';
    this.fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.onUnauthorized = options.onUnauthorized;
  }

  private readonly base: string;
  private readonly onUnauthorized: (() => void) | undefined;

  async send(call: ApiCall): Promise<ApiReply> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}` };
    let body: string | undefined;
    if (typeof call.body === 'string') {
      // A string body is a file the route reads raw (a config import's TOML): JSON-encoding
      // it would wrap it in quotes the server cannot parse. No JSON route takes a bare string.
      headers['Content-Type'] = 'text/plain; charset=utf-8';
      body = call.body;
    } else if (call.body !== null && call.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(call.body);
    }
    const response = await this.fetch(this.base + call.path, { method: call.method, headers, body });
    if (response.status === 401) this.onUnauthorized?.();
    const text = await response.text();
    return { status: response.status, body: parseBody(text, response.headers.get('content-type')) };
  }

  /**
   * `GET /api/events` over a streaming `fetch` (an `EventSource` cannot send the bearer
   * token). Every (re)connection starts with a resync: events may have been missed while the
   * stream was down. Reconnects with capped backoff until stopped.
   */
  subscribe(handlers: LiveHandlers): () => void {
    const controller = new AbortController();
    let stopped = false;
    let retry: ReturnType<typeof setTimeout> | undefined;

    const connect = async (failures: number): Promise<void> => {
      let healthy = false;
      try {
        const response = await this.fetch(`${this.base}/api/events`, {
          headers: { Authorization: `Bearer ${this.token}`, Accept: 'text/event-stream' },
          signal: controller.signal,
        });
        if (response.status === 401) this.onUnauthorized?.();
        if (!response.ok || !response.body) throw new Error(`events: ${response.status}`);
        healthy = true;
        handlers.onResync();
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        const parser = new SseParser();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const frame of parser.push(decoder.decode(value, { stream: true }))) {
            if (frame.event === 'resync') {
              handlers.onResync();
            } else if (frame.event === 'request') {
              handlers.onRequest();
            } else {
              try {
                handlers.onEvent(JSON.parse(frame.data) as HealthEvent);
              } catch {
                handlers.onResync();
              }
            }
          }
        }
      } catch {
        // Reconnect below, unless stopped.
      }
      if (stopped) return;
      const next = healthy ? 0 : failures + 1;
      retry = setTimeout(() => void connect(next), Math.min(30_000, 500 * 2 ** next));
    };

    void connect(0);
    return () => {
      stopped = true;
      clearTimeout(retry);
      controller.abort();
    };
  }
}

/** JSON when the server says so (or it looks like JSON), text otherwise, null when empty. */
export function parseBody(text: string, contentType: string | null): unknown {
  if (text === '') return null;
  const json = contentType?.includes('json') ?? false;
  if (json || (!contentType && /^[[{]/.test(text.trim()))) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}
