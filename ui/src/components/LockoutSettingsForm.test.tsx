import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { LockoutSettings } from '../bindings/LockoutSettings';
import { ok, renderWithServer } from '../test/fakeServer';
import { LockoutSettingsForm } from './LockoutSettingsForm';

const defaults: LockoutSettings = {
  enabled: true,
  error_codes: [404, 429, 503],
  failure_threshold: 1,
  base_cooldown_ms: 10_000,
  max_cooldown_ms: 300_000,
  exponential_backoff: true,
  max_backoff_steps: 5,
};

function setup(onPatch: (body: Record<string, unknown>) => { status: number; body: unknown }) {
  return renderWithServer(<LockoutSettingsForm />, (call) => {
    if (call.method === 'GET') return ok(defaults);
    return onPatch(call.body as Record<string, unknown>);
  });
}

async function replace(label: string, text: string) {
  const input = await screen.findByLabelText(label);
  await userEvent.clear(input);
  if (text !== '') await userEvent.type(input, text);
  return input;
}

describe('LockoutSettingsForm', () => {
  it('checks values as typed and will not send invalid ones', async () => {
    const { transport } = setup(() => ok(defaults));
    const save = await screen.findByRole('button', { name: 'Save' });
    expect(save).toBeDisabled(); // nothing changed

    const max = await replace('Max cooldown (ms)', '500');
    expect(max).toHaveAttribute('aria-invalid', 'true');
    expect(max).toHaveAccessibleDescription(/500 is out of range; allowed 1000–86400000/);
    expect(save).toBeDisabled();

    await replace('Max cooldown (ms)', '50000');
    expect(screen.getByLabelText('Max cooldown (ms)')).not.toHaveAttribute('aria-invalid');
    await replace('Base cooldown (ms)', '60000');
    expect(screen.getByLabelText('Max cooldown (ms)')).toHaveAccessibleDescription(/at least the base cooldown/);

    await replace('Error codes', '429, 418');
    expect(screen.getByLabelText('Error codes')).toHaveAccessibleDescription(/418 cannot lock a model/);
    await replace('Failure threshold', 'two');
    expect(screen.getByLabelText('Failure threshold')).toHaveAccessibleDescription(/whole number/);

    await userEvent.click(save);
    expect(transport.callsTo('PATCH', '/api/settings')).toHaveLength(0);
  });

  it('sends only what changed, as a merge patch', async () => {
    const { transport } = setup((body) => ok({ ...defaults, ...body }));
    await replace('Failure threshold', '3');
    await replace('Error codes', '429 503');
    await userEvent.click(screen.getByLabelText('Exponential backoff'));
    await userEvent.click(screen.getByRole('button', { name: 'Save' }));
    await screen.findByText(/Saved/);
    expect(transport.callsTo('PATCH', '/api/settings/model_lockouts').map((c) => c.body)).toEqual([
      { failure_threshold: 3, error_codes: [429, 503], exponential_backoff: false },
    ]);
    expect(screen.getByRole('button', { name: 'Save' })).toBeDisabled();
  });

  it('shows the server`s error at the field it names, and clears it on edit', async () => {
    setup(() => ({
      status: 422,
      body: {
        error: {
          message: 'model_lockouts.failure_threshold: 7 is not allowed here',
          type: 'invalid_request_error',
          code: 422,
          switchyard: { field: 'model_lockouts.failure_threshold' },
        },
      },
    }));
    const input = await replace('Failure threshold', '7');
    await userEvent.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(input).toHaveAttribute('aria-invalid', 'true'));
    expect(input).toHaveAccessibleDescription(/7 is not allowed here/);
    expect(screen.getByLabelText('Max cooldown (ms)')).not.toHaveAttribute('aria-invalid');
    expect(screen.queryByText(/Not saved/)).not.toBeInTheDocument();

    await userEvent.type(input, '0');
    expect(input).not.toHaveAttribute('aria-invalid');
  });

  it('maps an indexed field (`error_codes[1]`) to its input', async () => {
    setup(() => ({
      status: 422,
      body: {
        error: {
          message: 'model_lockouts.error_codes[1]: 503 is listed twice',
          type: 'invalid_request_error',
          code: 422,
          switchyard: { field: 'model_lockouts.error_codes[1]' },
        },
      },
    }));
    await replace('Error codes', '429');
    await userEvent.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(screen.getByLabelText('Error codes')).toHaveAccessibleDescription(/503 is listed twice/));
  });

  it('shows an error that names no field above the form', async () => {
    setup(() => ({ status: 500, body: { error: { message: 'cannot save the state file', type: 'api_error', code: 500, switchyard: null } } }));
    await replace('Failure threshold', '2');
    await userEvent.click(screen.getByRole('button', { name: 'Save' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Not saved: cannot save the state file');
  });
});
