import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { ConnectGuide } from '../bindings/ConnectGuide';
import type { ConnectRequest } from '../bindings/ConnectRequest';
import { ok, renderWithServer } from '../test/fakeServer';
import { ConnectPage, freeKeyName } from './ConnectPage';

/** What the server would answer: the lines with the request's key and model filled in. */
function guides(request: ConnectRequest): ConnectGuide[] {
  const key = request.key ?? 'sk-switchyard-PLACEHOLDER';
  const model = request.model ?? 'main';
  return [
    {
      tool: 'claude-code',
      title: 'Claude Code',
      reachable: true,
      snippets: [{ label: 'shell', language: 'sh', text: `export ANTHROPIC_AUTH_TOKEN=${key}\nexport ANTHROPIC_MODEL=${model}\n` }],
      writes: null,
      note: null,
      subscription: {
        snippets: [
          {
            label: 'shell',
            language: 'sh',
            text: `unset ANTHROPIC_AUTH_TOKEN ANTHROPIC_API_KEY\nexport ANTHROPIC_CUSTOM_HEADERS="x-switchyard-key: ${key}"\nexport ANTHROPIC_MODEL=${model}\n`,
          },
          { label: 'Switchyard config (the suggested combo)', language: 'toml', text: `[[combos]]\nname = "${model}"\n` },
        ],
        writes: null,
        note: 'No ANTHROPIC_AUTH_TOKEN or ANTHROPIC_API_KEY: either would replace Claude Code\'s own login.',
      },
    },
    {
      tool: 'codex',
      title: 'Codex CLI',
      reachable: true,
      snippets: [{ label: '~/.codex/config.toml', language: 'toml', text: `model = "${model}"\n` }],
      writes: '~/.codex/config.toml',
      note: null,
      subscription: {
        snippets: [
          { label: 'shell', language: 'sh', text: `export SWITCHYARD_KEY=${key}\n` },
          {
            label: '~/.codex/config.toml',
            language: 'toml',
            text: `model = "${model}"\nrequires_openai_auth = true\nenv_http_headers = { "x-switchyard-key" = "SWITCHYARD_KEY" }\n`,
          },
        ],
        writes: '~/.codex/config.toml',
        note: null,
      },
    },
    {
      tool: 'cursor',
      title: 'Cursor',
      reachable: false,
      snippets: [],
      writes: null,
      note: "Cursor's servers call the base URL, and they cannot reach 127.0.0.1.",
      subscription: null,
    },
  ];
}

function server(call: ApiCall) {
  if (call.method === 'GET' && call.path === '/api/combos') return ok([{ name: 'main', targets: [] }, { name: 'cheap', targets: [] }]);
  if (call.method === 'POST' && call.path === '/api/connect') return ok(guides(call.body as ConnectRequest));
  if (call.method === 'GET' && call.path === '/api/keys')
    return ok([{ id: 'k0', name: 'Claude Code', hint: '…0000', created_at: 0, revoked_at: 5 }, { id: 'k9', name: 'aider', hint: '…9999', created_at: 0, revoked_at: null }]);
  if (call.method === 'POST' && call.path === '/api/keys')
    return ok({ key: 'sk-sy-claude-1234', id: 'k1', name: (call.body as { name: string }).name, hint: '…1234', created_at: 0, revoked_at: null });
  return { status: 404, body: null };
}

describe('ConnectPage', () => {
  it('shows every tool, with a copy button per block and why Cursor cannot work', async () => {
    renderWithServer(<ConnectPage />, server);
    const claude = await screen.findByRole('region', { name: 'Claude Code' });
    expect(within(claude).getByText(/ANTHROPIC_MODEL=main/)).toBeInTheDocument();
    expect(within(claude).getByRole('button', { name: /^Copy Claude Code lines \(shell\)/ })).toBeInTheDocument();
    const codex = screen.getByRole('region', { name: 'Codex CLI' });
    expect(within(codex).getByText('switchyard connect codex --write')).toBeInTheDocument();
    const cursor = screen.getByRole('region', { name: 'Cursor' });
    expect(within(cursor).getByRole('note')).toHaveTextContent('cannot reach 127.0.0.1');
    expect(within(cursor).queryByRole('button')).toBeNull();
  });

  it('fills in the chosen combo, and a key made for one tool in that tool alone', async () => {
    const { transport } = renderWithServer(<ConnectPage />, server);
    const claude = await screen.findByRole('region', { name: 'Claude Code' });
    await userEvent.selectOptions(screen.getByLabelText('Combo'), 'cheap');
    await within(claude).findByText(/ANTHROPIC_MODEL=cheap/);

    await userEvent.click(within(claude).getByRole('button', { name: 'Create a key for Claude Code' }));
    await within(claude).findByText(/ANTHROPIC_AUTH_TOKEN=sk-sy-claude-1234/);
    expect(within(claude).getByText('Its own key is filled in')).toBeInTheDocument();
    expect(transport.callsTo('POST', '/api/keys').map((c) => c.body)).toEqual([{ name: 'Claude Code' }]);
    // The other tools keep the placeholder: each gets its own key.
    expect(screen.getByRole('region', { name: 'Codex CLI' })).toHaveTextContent('model = "cheap"');
    expect(transport.callsTo('POST', '/api/connect').at(-1)?.body).toEqual({ model: 'cheap', key: 'sk-sy-claude-1234' });
  });

  it('offers Claude Code and Codex the lines that keep their subscription, with the key and combo filled in', async () => {
    renderWithServer(<ConnectPage />, server);
    const claude = await screen.findByRole('region', { name: 'Claude Code' });
    expect(screen.getAllByRole('checkbox', { name: 'Keep your subscription' })).toHaveLength(2);
    expect(within(screen.getByRole('region', { name: 'Cursor' })).queryByRole('checkbox')).toBeNull();

    await userEvent.click(within(claude).getByRole('checkbox', { name: 'Keep your subscription' }));
    expect(within(claude).getByText(/ANTHROPIC_CUSTOM_HEADERS="x-switchyard-key: sk-switchyard-PLACEHOLDER"/)).toBeInTheDocument();
    expect(within(claude).queryByText(/export ANTHROPIC_AUTH_TOKEN/)).toBeNull();
    expect(within(claude).getByText(/either would replace Claude Code's own login/)).toBeInTheDocument();
    expect(within(claude).getByRole('button', { name: /^Copy Claude Code lines \(Switchyard config \(the suggested combo\)\)/ })).toBeInTheDocument();
    // Codex keeps its local-key lines until its own box is ticked.
    const codex = screen.getByRole('region', { name: 'Codex CLI' });
    expect(within(codex).queryByText(/requires_openai_auth/)).toBeNull();
    await userEvent.click(within(codex).getByRole('checkbox', { name: 'Keep your subscription' }));
    expect(within(codex).getByText(/env_http_headers = \{ "x-switchyard-key" = "SWITCHYARD_KEY" \}/)).toBeInTheDocument();
    expect(within(codex).getByText('switchyard connect codex --subscription --write')).toBeInTheDocument();

    // A key made for Claude Code lands in its subscription lines too; the choice stays.
    await userEvent.click(within(claude).getByRole('button', { name: 'Create a key for Claude Code' }));
    await within(claude).findByText(/x-switchyard-key: sk-sy-claude-1234/);
    await userEvent.click(within(claude).getByRole('checkbox', { name: 'Keep your subscription' }));
    expect(within(claude).getByText(/ANTHROPIC_AUTH_TOKEN=sk-sy-claude-1234/)).toBeInTheDocument();
  });

  it('names a second key for the same tool apart', () => {
    expect(freeKeyName('aider', ['aider', 'aider (2)'])).toBe('aider (3)');
    expect(freeKeyName('Zed', ['aider'])).toBe('Zed');
  });
});
