import { screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { ApiReply } from '../bindings/ApiReply';
import type { TeamForm } from '../bindings/TeamForm';
import { ok, renderWithServer } from '../test/fakeServer';
import { SectionEditor } from './SectionEditor';

function team(onPatch: (body: Record<string, unknown>) => ApiReply) {
  let saved: TeamForm = {};
  return renderWithServer(
    <SectionEditor
      section="team"
      title="Team"
      groups={[
        {
          fields: [
            { path: 'database_url', label: 'Database URL reference', kind: 'text' },
            { path: 'instance', label: 'Instance name', kind: 'optional-text' },
          ],
        },
      ]}
    />,
    (call) => {
      if (call.method === 'GET') return ok(saved);
      const reply = onPatch(call.body as Record<string, unknown>);
      if (reply.status === 200) saved = reply.body as TeamForm;
      return reply;
    },
  );
}

describe('a settings section with text fields (the team)', () => {
  it('sends what was typed, trimmed, and an emptied optional field as null', async () => {
    const { transport } = team((body) => ok({ database_url: 'env:SWITCHYARD_TEAM_DB', ...body }));
    await userEvent.type(await screen.findByLabelText('Database URL reference'), '  env:SWITCHYARD_TEAM_DB ');
    await userEvent.type(screen.getByLabelText('Instance name'), 'alice-laptop');
    await userEvent.click(screen.getByRole('button', { name: 'Save team' }));
    expect(transport.callsTo('PATCH', '/api/settings/team').map((c) => c.body)).toEqual([
      { database_url: 'env:SWITCHYARD_TEAM_DB', instance: 'alice-laptop' },
    ]);
    await userEvent.clear(screen.getByLabelText('Instance name'));
    await userEvent.click(screen.getByRole('button', { name: 'Save team' }));
    expect(transport.callsTo('PATCH', '/api/settings/team')[1]!.body).toEqual({ instance: null });
  });

  it('shows the server\u2019s refusal on the field it names', async () => {
    team(() => ({
      status: 422,
      body: {
        error: {
          message: 'team.database_url: environment variable SWITCHYARD_TEAM_DB is not set (or not valid UTF-8)',
          type: 'invalid_request_error',
          code: 422,
          switchyard: { field: 'team.database_url' },
        },
      },
    }));
    await userEvent.type(await screen.findByLabelText('Database URL reference'), 'env:SWITCHYARD_TEAM_DB');
    await userEvent.click(screen.getByRole('button', { name: 'Save team' }));
    expect(await screen.findByLabelText('Database URL reference')).toHaveAccessibleDescription(/SWITCHYARD_TEAM_DB is not set/);
  });
});
