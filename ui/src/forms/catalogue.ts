import type { CatalogueModel } from '../bindings/CatalogueModel';
import type { CatalogueProvider } from '../bindings/CatalogueProvider';
import type { ComboForm } from '../bindings/ComboForm';
import type { ConnectionReport } from '../bindings/ConnectionReport';
import type { FoundServer } from '../bindings/FoundServer';
import type { LocalServers } from '../bindings/LocalServers';
import type { ProviderForm } from '../bindings/ProviderForm';
import type { ProviderView } from '../bindings/ProviderView';

/**
 * Initials for a preset's badge. No vendor logo is shipped (their licences do not allow it),
 * so the badge is the name's initials: the first letters of its first two words, or the
 * first two letters of a one-word name ("OpenRouter" → "OP", "LM Studio" → "LS").
 */
export function initials(name: string): string {
  const words = name.trim().split(/[\s\-_.]+/).filter(Boolean);
  if (words.length === 0) return '?';
  const [first, second] = words;
  const letters = second !== undefined ? `${first![0]}${second[0]}` : first!.slice(0, 2);
  return letters.toUpperCase();
}

/** A stable hue (0–359) per preset id, so a preset's badge keeps its colour between runs. */
export function badgeHue(id: string): number {
  let hash = 0;
  for (const char of id) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return hash % 360;
}

/** Presets whose id, name or one of whose models matches every word of `query`. */
export function filterCatalogue(providers: readonly CatalogueProvider[], query: string): CatalogueProvider[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return [...providers];
  return providers.filter((p) => {
    const haystack = [p.id, p.name, p.kind, ...p.models.map((m) => m.id)].join(' ').toLowerCase();
    return words.every((w) => haystack.includes(w));
  });
}

/** One row of "pick models": a model the provider serves, with what the catalogue knows. */
export type ModelChoice = { id: string; facts: CatalogueModel | null; suggested: boolean };

/**
 * The models to choose from: the discovered list (what this key can really call) with the
 * catalogue's facts beside each; when discovery gave nothing, the catalogue's own list (its
 * embedding models last).
 * Suggested models come first, in the preset's order.
 */
export function mergeModels(preset: CatalogueProvider, discovered: readonly string[] | null): ModelChoice[] {
  const facts = new Map(preset.models.map((m) => [m.id, m]));
  const listed = [...preset.models.map((m) => m.id), ...preset.embedding_models.map((e) => e.id)];
  const ids = discovered && discovered.length > 0 ? [...new Set(discovered)] : listed;
  const rank = (id: string) => {
    const at = preset.suggested.indexOf(id);
    return at === -1 ? preset.suggested.length : at;
  };
  return ids
    .map((id, order) => ({ id, order, facts: facts.get(id) ?? null, suggested: preset.suggested.includes(id) }))
    .sort((a, b) => rank(a.id) - rank(b.id) || a.order - b.order)
    .map(({ id, facts, suggested }) => ({ id, facts, suggested }));
}

/**
 * What "pick models" starts with: the suggested models this key can call; when none is (a
 * local server, a proxy, a model newer than the snapshot), the first model listed.
 */
export function preselected(choices: readonly ModelChoice[]): string[] {
  const suggested = choices.filter((c) => c.suggested).map((c) => c.id);
  if (suggested.length > 0) return suggested;
  return choices.length > 0 ? [choices[0]!.id] : [];
}

/** The combo the first run offers: the chosen models of the new provider, in order. */
export const SUGGESTED_COMBO = 'main';

export function suggestedCombo(provider: string, chosen: readonly string[], taken: readonly string[] = []): ComboForm {
  let name = SUGGESTED_COMBO;
  for (let n = 2; taken.includes(name); n += 1) name = `${SUGGESTED_COMBO}-${n}`;
  return { name, strategy: 'priority', targets: chosen.map((model) => ({ target: `${provider}/${model}` })) };
}

/** A provider id for a preset that is not taken yet: the preset's id, else `id-2`, `id-3`… */
export function freeProviderId(preset: string, providers: readonly Pick<ProviderView, 'id'>[]): string {
  const taken = new Set(providers.map((p) => p.id));
  let id = preset;
  for (let n = 2; taken.has(id); n += 1) id = `${preset}-${n}`;
  return id;
}

/**
 * The provider a preset creates: `preset` and only what the user changed, so the preset keeps
 * filling the rest (and a later catalogue refresh still reaches it).
 */
export function presetProvider(preset: CatalogueProvider, id: string, baseUrl: string, models: readonly string[] = []): ProviderForm {
  const form: ProviderForm = { id, preset: preset.id };
  const url = baseUrl.trim();
  if (url !== '' && url.replace(/\/+$/, '') !== preset.base_url.replace(/\/+$/, '')) form.base_url = url;
  if (models.length > 0) form.models = [...models];
  return form;
}

/** The servers a look at this machine found, each with the port it answered on. */
export function foundServers(look: LocalServers): Array<{ port: number; found: FoundServer }> {
  return look.probes.flatMap((p) => (p.answer.status === 'found' ? [{ port: p.port, found: p.answer }] : []));
}

/**
 * The provider "Add" makes of a server found on this machine: its preset, the URL that
 * answered (written only when it is not the preset's) and the models it listed, under the
 * preset's id or the first free one after it.
 */
export function localProvider(
  preset: CatalogueProvider,
  found: Pick<FoundServer, 'base_url' | 'models'>,
  providers: readonly Pick<ProviderView, 'id'>[],
): ProviderForm {
  return presetProvider(preset, freeProviderId(preset.id, providers), found.base_url, found.models);
}

/** "llama3.2, qwen2.5-coder and 3 more": a model list at a glance. */
export function modelSummary(models: readonly string[], shown = 4): string {
  if (models.length <= shown) return models.join(', ');
  return `${models.slice(0, shown).join(', ')} and ${models.length - shown} more`;
}

/** "128k", "1M": a context window at a glance. */
export function tokens(n: number | undefined): string {
  if (n === undefined) return '—';
  if (n >= 1_000_000) return `${+(n / 1_000_000).toFixed(1)}M`;
  if (n >= 1000) return `${Math.round(n / 1000)}k`;
  return String(n);
}

/** "$2.50 / $10.00" per million tokens in and out. */
export function prices(model: CatalogueModel | null): string {
  const price = model?.price;
  if (!price) return '—';
  const dollars = (n: number) => `$${n.toFixed(2)}`;
  return `${dollars(price.input_per_mtok)} / ${dollars(price.output_per_mtok)}`;
}

/**
 * The last connection test of each provider, as this browser saw it. The server keeps no
 * record of tests (a test is a call, not state), so the catalogue list remembers the answers
 * the UI got, in localStorage, to show beside each configured preset.
 */
export type LastTest = { at: number; ok: boolean; status: number | null; error: string | null };

const LAST_TESTS = 'switchyard.lastTests';

export const lastTests = {
  all(): Record<string, LastTest> {
    try {
      return JSON.parse(localStorage.getItem(LAST_TESTS) ?? '{}') as Record<string, LastTest>;
    } catch {
      return {};
    }
  },
  record(provider: string, report: ConnectionReport, at: number = Date.now()): void {
    const all = lastTests.all();
    all[provider] = { at, ok: report.ok, status: report.status, error: report.error };
    localStorage.setItem(LAST_TESTS, JSON.stringify(all));
  },
};
