import { useState } from 'react';
import type { BreakerView } from '../bindings/BreakerView';
import type { CatalogueProvider } from '../bindings/CatalogueProvider';
import type { ProviderView } from '../bindings/ProviderView';
import { badgeHue, filterCatalogue, initials, lastTests } from '../forms/catalogue';
import { Badge, TextField } from './controls';

/** A preset's badge: its initials on a colour of its own (no vendor logos are shipped). */
export function PresetBadge({ preset }: { preset: Pick<CatalogueProvider, 'id' | 'name'> }) {
  return (
    <span className="preset-badge" aria-hidden="true" style={{ background: `hsl(${badgeHue(preset.id)} 55% 42%)` }}>
      {initials(preset.name)}
    </span>
  );
}

const BREAKER_TONE = { closed: 'ok', degraded: 'warn', half_open: 'warn', open: 'bad' } as const;

/** Which providers use this preset, each with its breaker state and last connection test. */
function PresetHealth({ configured, breakers }: { configured: ProviderView[]; breakers: readonly BreakerView[] }) {
  if (configured.length === 0) return null;
  const tests = lastTests.all();
  return (
    <ul className="preset-health" aria-label="Configured">
      {configured.map((p) => {
        const breaker = breakers.find((b) => b.provider === p.id);
        const state = breaker?.state ?? 'closed';
        const test = tests[p.id];
        return (
          <li key={p.id}>
            <Badge tone="ok">configured as {p.id}</Badge> <Badge tone={BREAKER_TONE[state]}>breaker {state.replace('_', ' ')}</Badge>{' '}
            {test ? (
              <Badge tone={test.ok ? 'ok' : 'bad'}>
                last test {test.ok ? 'passed' : `failed${test.status ? ` (${test.status})` : ''}`} {new Date(test.at).toLocaleTimeString()}
              </Badge>
            ) : (
              <Badge tone="muted">not tested here</Badge>
            )}
          </li>
        );
      })}
    </ul>
  );
}

/**
 * The catalogue as a searchable list. Each preset shows whether it is configured, its breaker
 * state (the health API) and the last connection test; choosing one calls `onPick`.
 */
export function CatalogueList({
  presets,
  providers,
  breakers,
  onPick,
}: {
  presets: readonly CatalogueProvider[];
  providers: readonly ProviderView[];
  breakers: readonly BreakerView[];
  onPick: (preset: CatalogueProvider) => void;
}) {
  const [query, setQuery] = useState('');
  const shown = filterCatalogue(presets, query);
  return (
    <div className="catalogue">
      <TextField label="Search providers" type="search" value={query} onChange={(e) => setQuery(e.target.value)} placeholder="OpenRouter, groq, llama…" />
      {shown.length === 0 ? <p className="muted">No provider in the catalogue matches “{query}”.</p> : null}
      <ul className="catalogue-list" aria-label="Catalogue">
        {shown.map((preset) => {
          const configured = providers.filter((p) => p.preset === preset.id);
          return (
            <li key={preset.id} className="catalogue-item" aria-label={preset.name}>
              <PresetBadge preset={preset} />
              <div className="catalogue-text">
                <strong>{preset.name}</strong>{' '}
                <span className="muted">
                  {preset.local ? 'runs on this machine' : preset.kind}
                  {preset.discovered ? ' · models discovered' : ` · ${preset.models.length} models`}
                </span>
                <PresetHealth configured={configured} breakers={breakers} />
              </div>
              <button type="button" className="secondary small" onClick={() => onPick(preset)} aria-label={`Pick ${preset.name}`}>
                {configured.length > 0 ? 'Add another' : 'Pick'}
              </button>
            </li>
          );
        })}
      </ul>
    </div>
  );
}
