import type { HealthEvent } from '../bindings/HealthEvent';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { UiSession } from '../bindings/UiSession';
import { ApiFailure } from './failure';
import { SseParser } from './sse';
import type { LiveHandlers, Transport } from './transport';

type Fetch = typeof fetch;

const defaultFetch: Fetch = (input, init) => globalThis.fetch(input, init);

/**
 * Why a browser session ended by itself: the server refused it (`401`: it restarted, the
 * session sat idle too long, or the management token was rotated), or the connection to the
 * server was lost (the event stream dropped, a call could not reach it).
 */
export type SessionEnd = 'refused' | 'lost';

/**
 * Signs in: exchanges the management token, or the one-time code of a sign-in link, for a UI
 * session (`POST /api/session`). The one request that ever carries either; the caller forgets
 * it after. Throws an `ApiFailure` when the server refuses (`401`: not the token, or a code
 * used already or expired).
 */
export async function openSession(
  managementToken: string,
  options: { base?: string; fetch?: Fetch } = {},
): Promise<UiSession> {
  const fetch = options.fetch ?? defaultFetch;
  const response = await fetch(`${options.base ?? ''}/api/session`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${managementToken}` },
  });
  const body = parseBody(await response.text(), response.headers.get('content-type'));
  if (response.status !== 201) throw new ApiFailure(response.status, body);
  return body as UiSession;
}

/**
 * The sign-in code of a link `switchyard serve` printed (`/#code=sy-code-…`), taken out of the
 * address bar at once (`replaceState`: no history entry keeps it either). The code opens one
 * session, once, within minutes; `null` when the page was opened without one.
 */
export function takeSignInCode(
  location: Pick<Location, 'hash' | 'pathname' | 'search'> = window.location,
  history: Pick<History, 'replaceState'> = window.history,
): string | null {
  const match = /^#code=(sy-code-[0-9a-f]+)$/.exec(location.hash);
  if (!match) return null;
  history.replaceState(null, '', `${location.pathname}${location.search}`);
  return match[1] ?? null;
}

/** What a call answers once the session has ended: nothing was sent. */
const ENDED: ApiReply = {
  status: 401,
  body: {
    error: {
      message: 'Signed out: sign in again.',
      type: 'authentication_error',
      code: 401,
      switchyard: null,
    },
  },
};

/**
 * The browser transport: same-origin `fetch` against `switchyard serve --ui`, with a UI
 * session token (never the management token: see `openSession`) as the bearer token.
 *
 * A session ends for good the first time the server refuses it or the connection drops, and
 * then this transport sends nothing more: no call, no reconnection. Whoever holds the port
 * after a drop may not be the server that opened the session; the page asks to sign in
 * again instead (`onEnded`).
 */
export class HttpTransport implements Transport {
  readonly mode = 'http' as const;
  private readonly fetch: Fetch;
  private readonly base: string;
  private readonly onEnded: ((why: SessionEnd) => void) | undefined;
  private ended = false;
  /** The open event streams, closed when the session ends. */
  private readonly streams = new Set<AbortController>();

  constructor(
    private readonly session: string,
    options: { base?: string; fetch?: Fetch; onEnded?: (why: SessionEnd) => void } = {},
  ) {
    this.base = options.base ?? '';
    this.fetch = options.fetch ?? defaultFetch;
    this.onEnded = options.onEnded;
  }

  async send(call: ApiCall): Promise<ApiReply> {
    if (this.ended) return ENDED;
    const headers: Record<string, string> = { Authorization: `Bearer ${this.session}` };
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
    let response: Response;
    try {
      response = await this.fetch(this.base + call.path, { method: call.method, headers, body });
    } catch (error) {
      this.end('lost');
      throw error;
    }
    if (response.status === 401) this.end('refused');
    const text = await response.text();
    return { status: response.status, body: parseBody(text, response.headers.get('content-type')) };
  }

  /**
   * `GET /api/events` over a streaming `fetch` (an `EventSource` cannot send the bearer
   * token). The stream starts with a resync (the page may have missed events before it).
   * It is opened once: when it drops, or is refused, the session ends (see the class).
   */
  subscribe(handlers: LiveHandlers): () => void {
    if (this.ended) return () => {};
    const controller = new AbortController();
    this.streams.add(controller);
    let stopped = false;

    const listen = async (): Promise<SessionEnd> => {
      const response = await this.fetch(`${this.base}/api/events`, {
        headers: { Authorization: `Bearer ${this.session}`, Accept: 'text/event-stream' },
        signal: controller.signal,
      });
      if (response.status === 401) return 'refused';
      if (!response.ok || !response.body) return 'lost';
      handlers.onResync();
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      const parser = new SseParser();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return 'lost';
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
    };

    void listen()
      .catch((): SessionEnd => 'lost')
      .then((why) => {
        this.streams.delete(controller);
        // Stopping the stream (the page unmounts it) is not a drop.
        if (!stopped) this.end(why);
      });
    return () => {
      stopped = true;
      this.streams.delete(controller);
      controller.abort();
    };
  }

  /**
   * Signs out when the person asks: ends the session on the server too (the page is talking
   * to the server it signed in with: the session has not ended) and sends nothing after.
   */
  async signOut(): Promise<void> {
    if (this.ended) return;
    this.close();
    try {
      await this.fetch(`${this.base}/api/session`, {
        method: 'DELETE',
        headers: { Authorization: `Bearer ${this.session}` },
      });
    } catch {
      // Gone already: a restart ended the session anyway.
    }
  }

  private end(why: SessionEnd) {
    if (this.ended) return;
    this.close();
    this.onEnded?.(why);
  }

  private close() {
    this.ended = true;
    for (const stream of this.streams) stream.abort();
    this.streams.clear();
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
