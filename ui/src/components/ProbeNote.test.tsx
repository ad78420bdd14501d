import { render, screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { ProbeView } from '../bindings/ProbeView';
import { ProbeNote, probeScopeLabel } from './ProbeNote';

const at = 1_800_000_000_000;

describe('a recovery probe note', () => {
  it('says probing while a probe is out', () => {
    const view: ProbeView = { scope: { layer: 'provider', provider: 'oa' }, probing: true, last: null };
    render(<ProbeNote view={view} now={at} />);
    expect(screen.getByText('probing')).toBeInTheDocument();
  });

  it('shows what the last probe found and why it was sent', () => {
    const view: ProbeView = {
      scope: { layer: 'model', key: { provider: 'an', credential: 'work', model: 'claude' } },
      probing: false,
      last: { at: at - 30_000, bench: 'model_lock_lapsed', outcome: 'transient', status: 503, healed: false },
    };
    render(<ProbeNote view={view} now={at} />);
    expect(screen.getByText('still failing')).toBeInTheDocument();
    expect(screen.getByText('last probe 30 s ago: 503 (lock ran out)')).toBeInTheDocument();
    expect(probeScopeLabel(view.scope)).toBe('an/claude on work');
  });

  it('says back once a probe healed the target', () => {
    const view: ProbeView = {
      scope: { layer: 'credential', key: { provider: 'oa', credential: 'k1' } },
      probing: false,
      last: { at, bench: 'credential_cooled', outcome: 'success', status: 200, healed: true },
    };
    render(<ProbeNote view={view} now={at} />);
    expect(screen.getByText('back')).toBeInTheDocument();
  });
});
