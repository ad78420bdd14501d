import { clearMocks, mockIPC } from '@tauri-apps/api/mocks';
import { emit } from '@tauri-apps/api/event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { HealthEvent } from '../bindings/HealthEvent';
import { ApiClient } from './client';
import { ApiFailure } from './failure';
import { HttpTransport, openSession } from './http';
import { IpcTransport } from './ipc';
import type { ApiCall } from '../bindings/ApiCall';

const lockoutError = {
  error: {
    message: 'model_lockouts.max_cooldown_ms: 5 is out of range; allowed 1000..=86400000',
    type: 'invalid_request_error',
    code: 422,
    switchyard: { field: 'model_lockouts.max_cooldown_ms' },
  },
};

function fakeFetch(status: number, body: string, contentType = 'application/json') {
  return vi.fn(async (_input: RequestInfo | URL, _init?: RequestInit) =>
    new Response(body === '' ? null : body, { status, headers: { 'content-type': contentType } }),
  );
}

describe('HTTP transport', () => {
  it('sends the bearer token and JSON body, and parses JSON answers', async () => {
    const fetch = fakeFetch(200, '{"cleared":2}');
    const client = new ApiClient(new HttpTransport('tok-123', { fetch }));
    await expect(client.clearLockout({ provider: 'p 1', credential: 'c', model: 'm/x' })).resolves.toEqual({ cleared: 2 });
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe('/api/resilience/lockouts?provider=p+1&credential=c&model=m%2Fx');
    expect(init?.method).toBe('DELETE');
    expect((init?.headers as Record<string, string>).Authorization).toBe('Bearer tok-123');
    expect(init?.body).toBeUndefined();

    await client.patchSection('model_lockouts', { failure_threshold: 2 });
    const [, patch] = fetch.mock.calls[1]!;
    expect(patch?.method).toBe('PATCH');
    expect(patch?.body).toBe('{"failure_threshold":2}');
    expect((patch?.headers as Record<string, string>)['Content-Type']).toBe('application/json');
  });

  it('throws an ApiFailure that names the field on a non-2xx answer', async () => {
    const client = new ApiClient(new HttpTransport('t', { fetch: fakeFetch(422, JSON.stringify(lockoutError)) }));
    const error = await client.patchSection('model_lockouts', { max_cooldown_ms: 5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiFailure);
    expect((error as ApiFailure).status).toBe(422);
    expect((error as ApiFailure).field).toBe('model_lockouts.max_cooldown_ms');
  });

  it('asks for usage with only the parameters given, and reads the CSV export as text', async () => {
    const fetch = fakeFetch(200, '{"buckets":[]}');
    const client = new ApiClient(new HttpTransport('t', { fetch }));
    await client.usage({ bucket: 'hour', group_by: 'model', key: undefined, from: '2026-01-31' });
    expect(fetch.mock.calls[0]![0]).toBe('/api/usage?bucket=hour&group_by=model&from=2026-01-31');
    const csv = new ApiClient(new HttpTransport('t', { fetch: fakeFetch(200, 'bucket_start,group\n', 'text/csv') }));
    await expect(csv.usageCsv()).resolves.toBe('bucket_start,group\n');
  });

  it('applies a finding with its id as one encoded path segment and the digest in the body', async () => {
    const fetch = fakeFetch(200, '{"id":"model_retired:oa/gpt-4o-mini","dry_run":true}');
    const client = new ApiClient(new HttpTransport('t', { fetch }));
    await client.applyFinding('model_retired:oa/gpt-4o-mini', { digest: 'd1', dry_run: true });
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe('/api/doctor/model_retired%3Aoa%2Fgpt-4o-mini/apply');
    expect(init?.method).toBe('POST');
    expect(init?.body).toBe('{"digest":"d1","dry_run":true}');
  });

  it('tells the app when the session is refused, and sends nothing after', async () => {
    const onEnded = vi.fn();
    const fetch = fakeFetch(401, '{}');
    const client = new ApiClient(new HttpTransport('bad', { fetch, onEnded }));
    await expect(client.health()).rejects.toBeInstanceOf(ApiFailure);
    expect(onEnded).toHaveBeenCalledExactlyOnceWith('refused');
    await expect(client.health()).rejects.toMatchObject({ status: 401 });
    expect(fetch).toHaveBeenCalledOnce();
  });

  it('sends a config file raw, not as a JSON string', async () => {
    const fetch = fakeFetch(200, '{"providers":0,"combos":0,"dry_run":true,"pairs":[]}');
    const client = new ApiClient(new HttpTransport('t', { fetch }));
    await client.importConfig('[server]\nport = 1\n', { dry_run: true });
    await client.importConfig('[server]\nport = 1\n', { confirm: true });
    await client.importConfig('[server]\nport = 1\n');
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe('/api/config/import?dry_run=true');
    expect(init?.method).toBe('POST');
    expect(init?.body).toBe('[server]\nport = 1\n');
    expect((init?.headers as Record<string, string>)['Content-Type']).toBe('text/plain; charset=utf-8');
    expect(fetch.mock.calls[1]![0]).toBe('/api/config/import?confirm=true');
    expect(fetch.mock.calls[2]![0]).toBe('/api/config/import');
  });

  it('answers text bodies as strings', async () => {
    const transport = new HttpTransport('t', { fetch: fakeFetch(200, '[server]\nport = 1\n', 'application/toml') });
    await expect(transport.send({ method: 'GET', path: '/api/config/export', body: null })).resolves.toEqual({
      status: 200,
      body: '[server]\nport = 1\n',
    });
  });

  it('streams events, resyncs on connect and on `event: resync`, and tells of completed requests', async () => {
    const encoder = new TextEncoder();
    const event: HealthEvent = {
      layer: 'lockout',
      key: { provider: 'p', credential: 'c', model: 'm' },
      record: null,
      at: 1,
    };
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode(`data: ${JSON.stringify(event).slice(0, 10)}`));
        controller.enqueue(encoder.encode(`${JSON.stringify(event).slice(10)}\n\nevent: resync\ndata: {}\n\n`));
        controller.enqueue(encoder.encode('event: request\ndata: {"at":5}\n\n'));
      },
    });
    const fetch = vi.fn(async () => new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } }));
    const transport = new HttpTransport('tok', { fetch });
    const onEvent = vi.fn();
    const onResync = vi.fn();
    const onRequest = vi.fn();
    const stop = transport.subscribe({ onEvent, onResync, onRequest });
    await vi.waitFor(() => expect(onRequest).toHaveBeenCalledOnce());
    expect(onResync).toHaveBeenCalledTimes(2);
    expect(onEvent).toHaveBeenCalledOnce();
    expect(onEvent).toHaveBeenCalledWith(event);
    const init = (fetch.mock.calls[0] as unknown as [string, RequestInit])[1];
    expect((init.headers as Record<string, string>).Authorization).toBe('Bearer tok');
    stop();
  });
});

/** An event stream the test ends: `drop()` closes it as a server that went away would. */
function droppableStream() {
  let close: () => void = () => {};
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      close = () => controller.close();
    },
  });
  return { response: new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } }), drop: () => close() };
}

const authorization = (init: RequestInit | undefined) => (init?.headers as Record<string, string> | undefined)?.Authorization;

describe('UI sessions over HTTP', () => {
  afterEach(() => vi.useRealTimers());

  it('signs in by sending the management token to POST /api/session, and nowhere else', async () => {
    const fetch = fakeFetch(201, '{"token":"sy-ui-0123","idle_timeout_ms":43200000}');
    await expect(openSession('file-token', { fetch })).resolves.toEqual({ token: 'sy-ui-0123', idle_timeout_ms: 43200000 });
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe('/api/session');
    expect(init?.method).toBe('POST');
    expect(authorization(init)).toBe('Bearer file-token');

    const refused = openSession('wrong', { fetch: fakeFetch(401, '{"error":{"message":"invalid management token","type":"authentication_error","code":401,"switchyard":null}}') });
    await expect(refused).rejects.toMatchObject({ status: 401, message: 'invalid management token' });
  });

  it('when the event stream drops, the session ends and nothing is sent again: no reconnection, no call', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const stream = droppableStream();
    const fetch = vi.fn(async (_input: RequestInfo | URL, _init?: RequestInit) => stream.response);
    const onEnded = vi.fn();
    const transport = new HttpTransport('sy-ui-session', { fetch, onEnded });
    const onResync = vi.fn();
    transport.subscribe({ onEvent: vi.fn(), onResync, onRequest: vi.fn() });
    await vi.waitFor(() => expect(onResync).toHaveBeenCalledOnce());
    expect(authorization(fetch.mock.calls[0]![1])).toBe('Bearer sy-ui-session');

    stream.drop();
    await vi.waitFor(() => expect(onEnded).toHaveBeenCalledExactlyOnceWith('lost'));
    // Long past any backoff a reconnecting stream would wait.
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    await expect(transport.send({ method: 'GET', path: '/api/monitoring/health', body: null })).resolves.toMatchObject({ status: 401 });
    transport.subscribe({ onEvent: vi.fn(), onResync: vi.fn(), onRequest: vi.fn() });
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(fetch).toHaveBeenCalledOnce();
    expect(onEnded).toHaveBeenCalledOnce();
  });

  it('a stream the server refuses ends the session as refused, without trying again', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const fetch = fakeFetch(401, '{}');
    const onEnded = vi.fn();
    new HttpTransport('sy-ui-old', { fetch, onEnded }).subscribe({ onEvent: vi.fn(), onResync: vi.fn(), onRequest: vi.fn() });
    await vi.waitFor(() => expect(onEnded).toHaveBeenCalledExactlyOnceWith('refused'));
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(fetch).toHaveBeenCalledOnce();
  });

  it('a call that cannot reach the server ends the session as lost', async () => {
    const fetch = vi.fn(async () => {
      throw new TypeError('Failed to fetch');
    });
    const onEnded = vi.fn();
    const transport = new HttpTransport('sy-ui-session', { fetch, onEnded });
    await expect(transport.send({ method: 'GET', path: '/api/server', body: null })).rejects.toThrow('Failed to fetch');
    expect(onEnded).toHaveBeenCalledExactlyOnceWith('lost');
    await transport.send({ method: 'GET', path: '/api/server', body: null });
    expect(fetch).toHaveBeenCalledOnce();
  });

  it('stopping the stream (the page unmounts it) ends nothing', async () => {
    const stream = droppableStream();
    const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
      if (String(input) !== '/api/events') return new Response('{}', { status: 200 });
      init?.signal?.addEventListener('abort', () => stream.drop());
      return stream.response;
    });
    const onEnded = vi.fn();
    const transport = new HttpTransport('sy-ui-session', { fetch, onEnded });
    const onResync = vi.fn();
    const stop = transport.subscribe({ onEvent: vi.fn(), onResync, onRequest: vi.fn() });
    await vi.waitFor(() => expect(onResync).toHaveBeenCalledOnce());
    stop();
    const calls = fetch.mock.calls.length;
    await transport.send({ method: 'GET', path: '/api/server', body: null });
    expect(fetch).toHaveBeenCalledTimes(calls + 1);
    expect(onEnded).not.toHaveBeenCalled();
  });

  it('signing out ends the session on the server, closes the stream and sends nothing after', async () => {
    const stream = droppableStream();
    const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
      if (String(input) === '/api/events') {
        init?.signal?.addEventListener('abort', () => stream.drop());
        return stream.response;
      }
      return new Response(null, { status: 204 });
    });
    const onEnded = vi.fn();
    const transport = new HttpTransport('sy-ui-session', { fetch, onEnded });
    const onResync = vi.fn();
    transport.subscribe({ onEvent: vi.fn(), onResync, onRequest: vi.fn() });
    await vi.waitFor(() => expect(onResync).toHaveBeenCalledOnce());
    await transport.signOut();
    const [url, init] = fetch.mock.calls[1]!;
    expect([String(url), init?.method, authorization(init)]).toEqual(['/api/session', 'DELETE', 'Bearer sy-ui-session']);
    await transport.send({ method: 'GET', path: '/api/server', body: null });
    expect(fetch).toHaveBeenCalledTimes(2);
    expect(onEnded).not.toHaveBeenCalled();
  });
});

describe('IPC transport', () => {
  afterEach(() => clearMocks());

  it('invokes the shell`s api command and gets the same typed answer and failure', async () => {
    const calls: ApiCall[] = [];
    mockIPC((cmd, args) => {
      expect(cmd).toBe('api');
      const call = (args as { call: ApiCall }).call;
      calls.push(call);
      if (call.method === 'PATCH') return { status: 422, body: lockoutError };
      return { status: 200, body: [{ key: { provider: 'p', credential: 'c', model: 'm' }, reason: null, consecutive_failures: 1, locked_until: 5, remaining_ms: 5 }] };
    });
    const client = new ApiClient(new IpcTransport());
    const lockouts = await client.lockouts();
    expect(lockouts[0]?.key.model).toBe('m');
    const error = await client.patchSection('model_lockouts', { max_cooldown_ms: 5 }).catch((e: unknown) => e);
    expect((error as ApiFailure).field).toBe('model_lockouts.max_cooldown_ms');
    expect(calls).toEqual([
      { method: 'GET', path: '/api/resilience/lockouts', body: null },
      { method: 'PATCH', path: '/api/settings/model_lockouts', body: { max_cooldown_ms: 5 } },
    ]);
  });

  it('hears the `health` and `request` events', async () => {
    mockIPC(() => null, { shouldMockEvents: true });
    const onEvent = vi.fn();
    const onRequest = vi.fn();
    const stop = new IpcTransport().subscribe({ onEvent, onResync: vi.fn(), onRequest });
    const event: HealthEvent = { layer: 'breaker', provider: 'p', record: null, at: 3 };
    await vi.waitFor(async () => {
      await emit('health', event);
      expect(onEvent).toHaveBeenCalledWith(event);
    });
    await vi.waitFor(async () => {
      await emit('request', 7);
      expect(onRequest).toHaveBeenCalled();
    });
    expect(onEvent).toHaveBeenCalledOnce();
    stop();
  });
});
