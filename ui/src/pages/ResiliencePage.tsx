import { SectionEditor, type FieldGroup, type FieldSpec } from '../components/SectionEditor';

const breakerFields = (profile: string): FieldSpec[] => [
  { path: `${profile}.enabled`, label: 'Breaker enabled', kind: 'bool' },
  { path: `${profile}.failure_threshold`, label: 'Opens after failures', kind: 'int' },
  { path: `${profile}.degraded_threshold`, label: 'Degraded after failures', kind: 'optional-int', hint: 'Empty: 60 % of the threshold' },
  { path: `${profile}.reset_timeout_ms`, label: 'Cooldown (ms)', kind: 'int', ms: true },
  { path: `${profile}.max_backoff_multiplier`, label: 'Max backoff multiplier', kind: 'int' },
  { path: `${profile}.half_open_probes`, label: 'Half-open probes', kind: 'int' },
  { path: `${profile}.probe_timeout_ms`, label: 'Probe deadline (ms)', kind: 'int', ms: true },
];

const BREAKERS: FieldGroup[] = [
  { title: 'API-key providers', fields: breakerFields('api_key') },
  { title: 'OAuth providers', fields: breakerFields('oauth') },
  { title: 'Local providers', fields: breakerFields('local') },
];

const COOLDOWN: FieldGroup[] = [
  {
    fields: [
      { path: 'api_key_base_ms', label: 'API key base cooldown (ms)', kind: 'int', ms: true },
      { path: 'oauth_base_ms', label: 'OAuth base cooldown (ms)', kind: 'int', ms: true },
      { path: 'max_cooldown_ms', label: 'Max cooldown (ms)', kind: 'int', ms: true },
      { path: 'quota_cooldown_ms', label: 'Quota exhausted cooldown (ms)', kind: 'int', ms: true },
      { path: 'max_backoff_level', label: 'Max backoff level', kind: 'int' },
    ],
  },
];

const TIMEOUTS: FieldGroup[] = [
  {
    fields: [
      { path: 'connect_ms', label: 'Connect (ms)', kind: 'int', ms: true },
      { path: 'first_event_ms', label: 'First event, with a fallback left (ms)', kind: 'int', ms: true },
      { path: 'first_byte_ms', label: 'First event, last candidate (ms)', kind: 'int', ms: true },
      { path: 'non_stream_ms', label: 'Whole non-streamed answer (ms)', kind: 'int', ms: true },
      { path: 'idle_ms', label: 'Idle between events (ms)', kind: 'int', ms: true },
      { path: 'total_ms', label: 'Whole request (ms)', kind: 'int', ms: true },
    ],
  },
];

const ROUTING: FieldGroup[] = [
  {
    fields: [
      { path: 'max_attempts', label: 'Max attempts per request', kind: 'int', hint: 'Fallbacks and retries included' },
      { path: 'retry_budget_percent', label: 'Retry budget (% of requests)', kind: 'int' },
      { path: 'retry_budget_min_per_second', label: 'Retry budget floor (per second)', kind: 'int' },
      { path: 'fallback_on_policy', label: 'Fall back after a content-policy refusal', kind: 'bool' },
      { path: 'sessions', label: 'Keep each agent session on its key', kind: 'bool', hint: 'Its prompt cache stays warm' },
      { path: 'session_limit', label: 'Sessions remembered', kind: 'int' },
      { path: 'session_idle_minutes', label: 'Forget a session after (minutes idle)', kind: 'int' },
      { path: 'reserve_percent', label: 'Quota reserve (%)', kind: 'int', hint: 'A key with less left takes no new session while another has more' },
      { path: 'queue_ms', label: 'Wait for a free slot (ms)', kind: 'int', ms: true, hint: 'Over a max_in_flight cap' },
    ],
  },
];

export function ResiliencePage() {
  return (
    <div className="page">
      <header className="page-head">
        <h1>Resilience</h1>
      </header>
      <p className="muted">
        Three layers keep requests flowing: a circuit breaker per provider, a cooldown per credential, and a lockout per model on a
        credential (see Model Lockouts). Changes apply to the next request.
      </p>
      <SectionEditor section="breaker_profiles" title="Breaker profiles" description="Each provider starts from the profile it names." groups={BREAKERS} />
      <SectionEditor section="credential_cooldown" title="Credential cooldown" description="A rate-limited key sits out base × 2^level, up to the max." groups={COOLDOWN} />
      <SectionEditor section="timeouts" title="Timeouts" groups={TIMEOUTS} />
      <SectionEditor section="routing" title="Routing budgets" groups={ROUTING} />
    </div>
  );
}
