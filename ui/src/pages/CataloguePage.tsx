import { useState } from 'react';
import type { CatalogueProvider } from '../bindings/CatalogueProvider';
import type { ProviderView } from '../bindings/ProviderView';
import { useApi, useLiveVersion, useResource } from '../app/context';
import { AddFromCatalogue } from '../components/AddFromCatalogue';
import { CatalogueList } from '../components/CatalogueList';
import { ErrorNote } from '../components/controls';
import { LocalServers } from '../components/LocalServers';

/**
 * The catalogue: the model servers running on this machine (added in one click), every preset
 * with its health where configured, and the add flow for the one picked. The first run is this
 * page under another heading (`firstRun`), with a way past it.
 */
export function CataloguePage({ firstRun = false, onSkip }: { firstRun?: boolean; onSkip?: () => void }) {
  const api = useApi();
  const live = useLiveVersion();
  const catalogue = useResource(() => api.catalogue(), [api]);
  const providers = useResource(() => api.providers(), [api]);
  const combos = useResource(() => api.combos(), [api]);
  const health = useResource(() => api.health(), [api, live]);
  const [picked, setPicked] = useState<CatalogueProvider | null>(null);
  const [finished, setFinished] = useState(false);
  const [added, setAdded] = useState<ProviderView | null>(null);
  return (
    <div className="page">
      <header className="page-head">
        <h1>{firstRun ? 'Add your first provider' : 'Add from catalogue'}</h1>
        {firstRun && onSkip ? (
          <button type="button" className="secondary" onClick={onSkip}>
            {finished ? 'Go to the overview' : 'Skip for now'}
          </button>
        ) : (
          <a href="#/providers">Blank form on Providers</a>
        )}
      </header>
      {firstRun ? (
        <p className="muted">
          Pick a provider, paste its key, test it, choose models: Switchyard then makes a first combo of them, and{' '}
          <a href="#/connect">Connect your tools</a> gives each tool its lines.
        </p>
      ) : null}
      <ErrorNote error={catalogue.error ?? providers.error} title="Cannot read the catalogue" />
      {picked ? (
        <AddFromCatalogue
          key={picked.id}
          preset={picked}
          takenIds={(providers.data ?? []).map((p) => p.id)}
          takenCombos={(combos.data ?? []).map((c) => c.name)}
          onCancel={() => setPicked(null)}
          onDone={() => {
            setFinished(true);
            void providers.reload();
            void combos.reload();
            void health.reload();
          }}
        />
      ) : null}
      {catalogue.data && !picked ? (
        <LocalServers
          presets={catalogue.data.providers}
          providers={providers.data ?? []}
          onAdded={(view) => {
            setAdded(view);
            setFinished(true);
            void providers.reload();
            void health.reload();
          }}
        />
      ) : null}
      {added && !picked ? <AddedNote provider={added} /> : null}
      {catalogue.data && !picked ? (
        <CatalogueList
          presets={catalogue.data.providers}
          providers={providers.data ?? []}
          breakers={health.data?.breakers ?? []}
          onPick={setPicked}
        />
      ) : null}
      {catalogue.data ? (
        <p className="muted small-print">
          Model facts: {catalogue.data.source.source}, {catalogue.data.source.licence} licence, taken{' '}
          {catalogue.data.source.fetched}.
        </p>
      ) : null}
    </div>
  );
}

/** What a one-click add made, and the model name that reaches it. */
function AddedNote({ provider }: { provider: ProviderView }) {
  const first = provider.models.map((m) => (typeof m === 'string' ? m : m.id))[0];
  return (
    <div className="note note-ok" role="status" data-testid="local-added">
      Added provider <code>{provider.id}</code>
      {first ? (
        <>
          : send <code>model: "{provider.id}/{first}"</code>, or put it in a combo on <a href="#/combos">Combos</a>.
        </>
      ) : (
        '.'
      )}{' '}
      <a href="#/connect">Connect your tools</a>
    </div>
  );
}
