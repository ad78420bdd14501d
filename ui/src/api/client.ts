import type { AliasesForm } from '../bindings/AliasesForm';
import type { BreakerProfiles } from '../bindings/BreakerProfiles';
import type { BudgetSettings } from '../bindings/BudgetSettings';
import type { BudgetView } from '../bindings/BudgetView';
import type { CandidateKey } from '../bindings/CandidateKey';
import type { Catalogue } from '../bindings/Catalogue';
import type { Cleared } from '../bindings/Cleared';
import type { ConnectGuide } from '../bindings/ConnectGuide';
import type { ConnectRequest } from '../bindings/ConnectRequest';
import type { ComboForm } from '../bindings/ComboForm';
import type { ConnectionReport } from '../bindings/ConnectionReport';
import type { CooldownSettings } from '../bindings/CooldownSettings';
import type { CredentialInput } from '../bindings/CredentialInput';
import type { CredentialPatch } from '../bindings/CredentialPatch';
import type { Deleted } from '../bindings/Deleted';
import type { DiscoveredModels } from '../bindings/DiscoveredModels';
import type { DoctorApplied } from '../bindings/DoctorApplied';
import type { DoctorApply } from '../bindings/DoctorApply';
import type { DoctorFinding } from '../bindings/DoctorFinding';
import type { Health } from '../bindings/Health';
import type { ImportSummary } from '../bindings/ImportSummary';
import type { LocalKeyView } from '../bindings/LocalKeyView';
import type { LocalServers } from '../bindings/LocalServers';
import type { LockoutSettings } from '../bindings/LockoutSettings';
import type { LockoutView } from '../bindings/LockoutView';
import type { LoginStarted } from '../bindings/LoginStarted';
import type { LoginStatus } from '../bindings/LoginStatus';
import type { NewLocalKey } from '../bindings/NewLocalKey';
import type { OAuthCredentialStatus } from '../bindings/OAuthCredentialStatus';
import type { ProviderCredential } from '../bindings/ProviderCredential';
import type { ProviderForm } from '../bindings/ProviderForm';
import type { ProviderView } from '../bindings/ProviderView';
import type { RequestEntry } from '../bindings/RequestEntry';
import type { RequestQuery } from '../bindings/RequestQuery';
import type { ResetCounts } from '../bindings/ResetCounts';
import type { ResetScope } from '../bindings/ResetScope';
import type { Revoked } from '../bindings/Revoked';
import type { RoutingSettings } from '../bindings/RoutingSettings';
import type { Section } from '../bindings/Section';
import type { ServerForm } from '../bindings/ServerForm';
import type { SettingsView } from '../bindings/SettingsView';
import type { TimeoutSettings } from '../bindings/TimeoutSettings';
import type { UsageQuery } from '../bindings/UsageQuery';
import type { UsageReport } from '../bindings/UsageReport';
import type { UsageSettings } from '../bindings/UsageSettings';
import { ApiFailure } from './failure';
import type { NotificationSettings } from '../bindings/NotificationSettings';
import type { RoutingState } from '../bindings/RoutingState';
import type { ServerInfo } from '../bindings/ServerInfo';
import type { TeamForm } from '../bindings/TeamForm';
import type { TryRequest } from '../bindings/TryRequest';
import type { TryResult } from '../bindings/TryResult';
import type { LiveHandlers, Transport } from './transport';

/** Each settings section and the form it edits. */
export type SectionForms = {
  model_lockouts: LockoutSettings;
  credential_cooldown: CooldownSettings;
  breaker_profiles: BreakerProfiles;
  timeouts: TimeoutSettings;
  routing: RoutingSettings;
  server: ServerForm;
  notifications: NotificationSettings;
  usage: UsageSettings;
  budgets: BudgetSettings;
  team: TeamForm;
};
export type SettingsSection = keyof SectionForms;
// The client edits exactly the sections the bindings know.
type _SectionsCovered = [Section] extends [SettingsSection] ? ([SettingsSection] extends [Section] ? true : never) : never;
const _sectionsCovered: _SectionsCovered = true;
void _sectionsCovered;

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

const seg = encodeURIComponent;

export function queryString(query: Record<string, string | number | boolean | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === '') continue;
    params.set(name, String(value));
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

/**
 * The one typed client of the management API. Every method answers the success type or
 * throws `ApiFailure` (non-2xx), the same over HTTP and IPC.
 */
export class ApiClient {
  constructor(readonly transport: Transport) {}

  get mode(): 'http' | 'ipc' {
    return this.transport.mode;
  }

  async call<T>(method: Method, path: string, body: unknown = null): Promise<T> {
    const reply = await this.transport.send({ method, path, body });
    if (reply.status < 200 || reply.status > 299) throw new ApiFailure(reply.status, reply.body);
    return reply.body as T;
  }

  subscribe(handlers: LiveHandlers): () => void {
    return this.transport.subscribe(handlers);
  }

  // Server and routing
  server = () => this.call<ServerInfo>('GET', '/api/server');
  /** The provider presets and their models' facts compiled into the binary. */
  catalogue = () => this.call<Catalogue>('GET', '/api/catalogue');
  /**
   * The model servers answering on this machine's loopback ports (Ollama, LM Studio,
   * llama.cpp, vLLM), each with its models; `ports` (`ollama:11434,…`) instead of the server's.
   */
  localServers = (ports?: string) => this.call<LocalServers>('GET', `/api/local-servers${queryString({ ports })}`);
  /** Every tool's "Connect your tools" lines, with `key` and `model` filled in. */
  connect = (request: ConnectRequest = {}) => this.call<ConnectGuide[]>('POST', '/api/connect', request);
  routing = () => this.call<RoutingState>('GET', '/api/routing');
  setPaused = (paused: boolean) => this.call<RoutingState>('PUT', '/api/routing', { paused } satisfies RoutingState);
  tryModel = (request: TryRequest) => this.call<TryResult>('POST', '/api/try', request);

  // Health and resilience
  health = () => this.call<Health>('GET', '/api/monitoring/health');
  reset = (scope: ResetScope) => this.call<ResetCounts>('POST', '/api/resilience/reset', scope);
  lockouts = () => this.call<LockoutView[]>('GET', '/api/resilience/lockouts');
  clearLockout = (key: CandidateKey) =>
    this.call<Cleared>(
      'DELETE',
      `/api/resilience/lockouts${queryString({ provider: key.provider, credential: key.credential, model: key.model })}`,
    );
  clearAllLockouts = () => this.call<Cleared>('DELETE', '/api/resilience/lockouts');
  requests = (query: RequestQuery = {}) =>
    this.call<RequestEntry[]>('GET', `/api/requests${queryString(query)}`);

  // The doctor
  /** What is wrong now, each with its evidence, the digest of that evidence and what to do. */
  doctor = () => this.call<DoctorFinding[]>('GET', '/api/doctor');
  /**
   * Applies finding `id` only if its evidence still has the digest the user was shown (a 409
   * otherwise, and nothing changes). Ids hold `/` and `:`, so the id is one encoded segment.
   */
  applyFinding = (id: string, request: DoctorApply) =>
    this.call<DoctorApplied>('POST', `/api/doctor/${seg(id)}/apply`, request);

  // Usage and budgets
  /** Usage as chart series: every bucket of the range, a series per group, totals. */
  usage = (query: Omit<UsageQuery, 'format'> = {}) =>
    this.call<UsageReport>('GET', `/api/usage${queryString(query)}`);
  /** The same report as CSV text (a header row, one row per bucket and series). */
  usageCsv = (query: Omit<UsageQuery, 'format'> = {}) =>
    this.call<string>('GET', `/api/usage.csv${queryString(query)}`);
  /** Every configured budget and what it has spent. */
  budgets = () => this.call<BudgetView[]>('GET', '/api/usage/budgets');

  // Providers and credentials
  providers = () => this.call<ProviderView[]>('GET', '/api/providers');
  provider = (id: string) => this.call<ProviderView>('GET', `/api/providers/${seg(id)}`);
  /**
   * `confirm`: the user typed (or saw) the provider's URL in this form and agreed to send its
   * requests there, so that destination is confirmed with the edit (never a secret: each
   * credential confirms its own). Without it a new host leaves the provider benched as
   * `destination_unconfirmed` until Confirm.
   */
  createProvider = (form: ProviderForm, options: { confirm?: boolean } = {}) =>
    this.call<ProviderView>('POST', `/api/providers${queryString({ confirm: options.confirm || undefined })}`, form);
  patchProvider = (id: string, patch: Record<string, unknown>, options: { confirm?: boolean } = {}) =>
    this.call<ProviderView>('PATCH', `/api/providers/${seg(id)}${queryString({ confirm: options.confirm || undefined })}`, patch);
  deleteProvider = (id: string) => this.call<Deleted>('DELETE', `/api/providers/${seg(id)}`);
  testProvider = (id: string, credential?: string) =>
    this.call<ConnectionReport>('POST', `/api/providers/${seg(id)}/test${queryString({ credential })}`);
  discoverModels = (id: string, credential?: string) =>
    this.call<DiscoveredModels>('GET', `/api/providers/${seg(id)}/models${queryString({ credential })}`);
  createCredential = (provider: string, input: CredentialInput) =>
    this.call<ProviderCredential>('POST', `/api/providers/${seg(provider)}/credentials`, input);
  patchCredential = (provider: string, credential: string, patch: CredentialPatch) =>
    this.call<ProviderCredential>(
      'PATCH',
      `/api/providers/${seg(provider)}/credentials/${seg(credential)}`,
      patch,
    );
  deleteCredential = (provider: string, credential: string) =>
    this.call<Deleted>('DELETE', `/api/providers/${seg(provider)}/credentials/${seg(credential)}`);
  /**
   * Confirms where the provider's requests go and where its credentials send their secrets:
   * only after the user saw the provider's `unconfirmed` list.
   */
  confirmProvider = (provider: string) =>
    this.call<ProviderView>('POST', `/api/providers/${seg(provider)}/confirm`);
  /** Confirms where the credential sends its secret: only after the user saw the pairs. */
  confirmCredential = (provider: string, credential: string) =>
    this.call<ProviderView>('POST', `/api/providers/${seg(provider)}/credentials/${seg(credential)}/confirm`);

  /** Reads the credential's secret again now ("Retry now"): set the variable, stored the key or created the file. */
  retrySecret = (provider: string, credential: string) =>
    this.call<ProviderView>('POST', `/api/providers/${seg(provider)}/credentials/${seg(credential)}/retry`);

  // OAuth
  startLogin = (provider: string, credential: string) =>
    this.call<LoginStarted>('POST', `/api/providers/${seg(provider)}/credentials/${seg(credential)}/login`);
  loginStatus = (login: number) => this.call<LoginStatus>('GET', `/api/oauth/logins/${login}`);
  abandonLogin = (login: number) => this.call<unknown>('DELETE', `/api/oauth/logins/${login}`);
  oauthStatus = (provider: string, credential: string) =>
    this.call<OAuthCredentialStatus>('GET', `/api/providers/${seg(provider)}/credentials/${seg(credential)}/oauth`);

  // Combos
  combos = () => this.call<ComboForm[]>('GET', '/api/combos');
  createCombo = (combo: ComboForm) => this.call<ComboForm>('POST', '/api/combos', combo);
  replaceCombo = (name: string, combo: ComboForm) => this.call<ComboForm>('PUT', `/api/combos/${seg(name)}`, combo);
  deleteCombo = (name: string) => this.call<Deleted>('DELETE', `/api/combos/${seg(name)}`);

  // Aliases and the default route (replaced whole)
  aliases = () => this.call<AliasesForm>('GET', '/api/aliases');
  replaceAliases = (form: AliasesForm) => this.call<AliasesForm>('PUT', '/api/aliases', form);

  // Settings
  settings = () => this.call<SettingsView>('GET', '/api/settings');
  section = <S extends SettingsSection>(section: S) => this.call<SectionForms[S]>('GET', `/api/settings/${section}`);
  patchSection = <S extends SettingsSection>(section: S, patch: Record<string, unknown>) =>
    this.call<SectionForms[S]>('PATCH', `/api/settings/${section}`, patch);

  // Config export and import
  /** The running config as a config file (TOML), secrets as references only. */
  exportConfig = () => this.call<string>('GET', '/api/config/export');
  /**
   * Sends `toml` (a config file) as the whole config. `dry_run` only checks it; `confirm`
   * says the user saw the summary's pairs and allows every one (without it, a credential
   * with a new pair stays benched as `unconfirmed`).
   */
  importConfig = (toml: string, options: { dry_run?: boolean; confirm?: boolean } = {}) =>
    this.call<ImportSummary>(
      'POST',
      `/api/config/import${queryString({ dry_run: options.dry_run || undefined, confirm: options.confirm || undefined })}`,
      toml,
    );

  // Local API keys
  keys = () => this.call<LocalKeyView[]>('GET', '/api/keys');
  createKey = (name: string) => this.call<NewLocalKey>('POST', '/api/keys', { name });
  revokeKey = (id: string) => this.call<Revoked>('DELETE', `/api/keys/${seg(id)}`);
}
