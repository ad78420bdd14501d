import type { CatalogueProvider } from '../bindings/CatalogueProvider';
import type { FoundServer } from '../bindings/FoundServer';
import type { ProviderView } from '../bindings/ProviderView';
import { useAction, useApi, useResource } from '../app/context';
import { foundServers, localProvider, modelSummary } from '../forms/catalogue';
import { PresetBadge } from './CatalogueList';
import { Badge, BusyButton, ErrorNote } from './controls';

/**
 * "Runs on this machine": the model servers that answered on loopback (the server looks on
 * Ollama's, LM Studio's, llama.cpp's and vLLM's ports), each with its models, and an Add that
 * makes one a provider in one click: its preset, the URL that answered, the models it listed.
 */
export function LocalServers({
  presets,
  providers,
  onAdded,
}: {
  presets: readonly CatalogueProvider[];
  providers: readonly ProviderView[];
  onAdded: (provider: ProviderView) => void;
}) {
  const api = useApi();
  const look = useResource(() => api.localServers(), [api]);
  const found = look.data ? foundServers(look.data) : [];
  const ports = look.data?.probes.map((p) => p.port).join(', ');
  return (
    <section className="card local-servers" aria-label="Runs on this machine">
      <div className="row">
        <h2>Runs on this machine</h2>
        <button type="button" className="secondary small" onClick={() => void look.reload()} disabled={look.loading}>
          {look.loading ? 'Looking…' : 'Look again'}
        </button>
      </div>
      <ErrorNote error={look.error} title="Cannot look for servers on this machine" />
      {look.data && found.length === 0 ? (
        <p className="muted" data-testid="no-local-servers">
          {look.data.probes.length === 0
            ? 'This server looks at no port (SWITCHYARD_LOCAL_PORTS=none).'
            : `No Ollama, LM Studio, llama.cpp or vLLM answered on this machine (ports ${ports}).`}
        </p>
      ) : null}
      {found.length > 0 ? (
        <ul className="catalogue-list" aria-label="Servers on this machine">
          {found.map(({ port, found: server }) => (
            <LocalServer
              key={port}
              port={port}
              server={server}
              preset={presets.find((p) => p.id === server.preset)}
              providers={providers}
              onAdded={(view) => {
                onAdded(view);
                void look.reload();
              }}
            />
          ))}
        </ul>
      ) : null}
    </section>
  );
}

function LocalServer({
  port,
  server,
  preset,
  providers,
  onAdded,
}: {
  port: number;
  server: FoundServer;
  preset: CatalogueProvider | undefined;
  providers: readonly ProviderView[];
  onAdded: (provider: ProviderView) => void;
}) {
  const api = useApi();
  const name = preset?.name ?? server.preset;
  const add = useAction(async () => {
    if (!preset) return;
    // The URL is the one that just answered on this machine: confirmed with the add.
    const view = await api.createProvider(localProvider(preset, server, providers), { confirm: true });
    onAdded(view);
  });
  return (
    <li className="catalogue-item" aria-label={`${name} on port ${port}`}>
      <PresetBadge preset={{ id: server.preset, name }} />
      <div className="catalogue-text">
        <strong>{name}</strong> <span className="muted">{server.base_url}</span>
        <div className="muted" data-testid="local-models">
          {server.models.length === 0
            ? 'no models yet'
            : `${server.models.length} model${server.models.length === 1 ? '' : 's'}: ${modelSummary(server.models)}`}
        </div>
        <ErrorNote error={add.error} title={`Cannot add ${name}`} />
      </div>
      {server.providers.length > 0 ? (
        <Badge tone="ok">added as {server.providers.join(', ')}</Badge>
      ) : (
        <BusyButton className="small" busy={add.busy} busyLabel="Adding…" disabled={!preset} onClick={() => void add.run()} aria-label={`Add ${name}`}>
          Add
        </BusyButton>
      )}
    </li>
  );
}
