import { screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { ProviderCredential } from '../bindings/ProviderCredential';
import { ok, renderWithServer } from '../test/fakeServer';
import { CredentialEditor } from './CredentialEditor';

const existing: ProviderCredential = {
  id: 'main',
  kind: 'api_key',
  enabled: true,
  priority: 0,
  secret: { set: true, reference: 'keychain:openai/main', unavailable: null, hint: '…abcd' },
  unconfirmed: [],
};

const TYPED = 'sk-typed-secret-value-9876';

describe('the write-only secret field', () => {
  it('never renders a secret: empty, masked, and only the server`s hint', () => {
    renderWithServer(<CredentialEditor provider="openai" credential={existing} onSaved={() => {}} />, () => ok(existing));
    const field = screen.getByLabelText('API key');
    expect(field).toHaveAttribute('type', 'password');
    expect(field).toHaveValue('');
    expect(screen.getByTestId('secret-status')).toHaveTextContent('Current: set …abcd (keychain:openai/main)');
    expect(screen.getByTestId('secret-status')).toHaveTextContent('empty keeps it unchanged');
  });

  it('leaves the secret out of the patch when nothing was typed', async () => {
    const onSaved = vi.fn();
    const { transport } = renderWithServer(<CredentialEditor provider="openai" credential={existing} onSaved={onSaved} />, (call) =>
      ok({ ...existing, ...(call.body as object) }),
    );
    const priority = screen.getByLabelText('Priority');
    await userEvent.clear(priority);
    await userEvent.type(priority, '2');
    await userEvent.click(screen.getByRole('button', { name: 'Save credential' }));
    await screen.findByText('Saved');
    const patches = transport.callsTo('PATCH', '/api/providers/openai/credentials/main');
    expect(patches.map((c) => c.body)).toEqual([{ priority: 2 }]);
    expect(onSaved).toHaveBeenCalledOnce();
  });

  it('sends the secret only when typed, then forgets it', async () => {
    const { transport, container } = renderWithServer(
      <CredentialEditor provider="openai" credential={existing} onSaved={() => {}} />,
      () => ok(existing),
    );
    await userEvent.type(screen.getByLabelText('API key'), TYPED);
    await userEvent.click(screen.getByRole('button', { name: 'Save credential' }));
    await screen.findByText('Saved');
    expect(transport.callsTo('PATCH', '/api/providers/openai/credentials/main').map((c) => c.body)).toEqual([{ secret: TYPED }]);
    expect(screen.getByLabelText('API key')).toHaveValue('');
    expect(container.innerHTML).not.toContain(TYPED);
  });

  it('does not call the server when nothing changed', async () => {
    const { transport } = renderWithServer(<CredentialEditor provider="openai" credential={existing} onSaved={() => {}} />, () => ok(existing));
    await userEvent.click(screen.getByRole('button', { name: 'Save credential' }));
    await screen.findByText('Saved');
    expect(transport.calls).toHaveLength(0);
  });

  it('creates a credential with the typed key, or with an env reference instead', async () => {
    const { transport } = renderWithServer(<CredentialEditor provider="openai" credential={null} onSaved={() => {}} />, () => ({
      status: 201,
      body: existing,
    }));
    await userEvent.type(screen.getByLabelText('Credential name'), 'backup');
    await userEvent.type(screen.getByLabelText('API key'), TYPED);
    await userEvent.click(screen.getByRole('button', { name: 'Add credential' }));
    await screen.findByText('Saved');
    expect(transport.calls[0]).toEqual({
      method: 'POST',
      path: '/api/providers/openai/credentials',
      body: { id: 'backup', kind: 'api_key', enabled: true, priority: 0, secret: TYPED },
    });
  });

  it('sends an env reference, never a secret, when the key lives in a variable', async () => {
    const { transport } = renderWithServer(
      <CredentialEditor provider="openai" destination="https://api.openai.com/v1" credential={null} onSaved={() => {}} />,
      () => ({ status: 201, body: existing }),
    );
    await userEvent.type(screen.getByLabelText('Credential name'), 'ci');
    await userEvent.type(screen.getByLabelText('API key'), TYPED);
    await userEvent.click(screen.getByLabelText('Environment variable'));
    await userEvent.type(screen.getByLabelText('Variable name'), 'OPENAI_KEY');
    // The user types the reference beside where it goes, so the entry confirms that pair.
    expect(screen.getByText(/its value is sent to https:\/\/api\.openai\.com\/v1/)).toBeTruthy();
    await userEvent.click(screen.getByRole('button', { name: 'Add credential' }));
    await screen.findByText('Saved');
    expect(transport.calls[0]?.body).toEqual({
      id: 'ci',
      kind: 'api_key',
      enabled: true,
      priority: 0,
      secret_ref: 'env:OPENAI_KEY',
      confirm: true,
    });
  });

  it('shows a server refusal of the secret at the secret field', async () => {
    renderWithServer(<CredentialEditor provider="openai" credential={existing} onSaved={() => {}} />, () => ({
      status: 422,
      body: {
        error: {
          message: 'secret: no keychain is reachable; keep the key in an environment variable (secret_ref "env:VAR")',
          type: 'invalid_request_error',
          code: 422,
          switchyard: { field: 'secret' },
        },
      },
    }));
    await userEvent.type(screen.getByLabelText('API key'), TYPED);
    await userEvent.click(screen.getByRole('button', { name: 'Save credential' }));
    expect(await screen.findByRole('alert')).toHaveTextContent(/no keychain is reachable/);
    expect(screen.getByLabelText('API key')).toHaveAttribute('aria-invalid', 'true');
  });
});
