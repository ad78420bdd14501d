// The real Codex CLI against Switchyard; started by tests/clients/run, which sets the CLIENTS_*
// variables, starts the mock (tests/clients/mock.toml, recording every attempt) and `switchyard
// serve`, and stops them afterwards. Each case runs `codex exec --json` in a throwaway working
// directory with a throwaway HOME holding its config, and checks what it printed, what it did
// to the working directory and what reached the mock; h and i also what Codex itself sent to
// Switchyard, through a relay in front of it (tap.mjs).
//
// Codex speaks only the Responses API (POST /v1/responses, streamed). Its model names are
// Switchyard combos; a small model catalogue in the throwaway HOME tells Codex what they are,
// so it offers its freeform `apply_patch` tool (it does not for a model it does not know) and
// does not warn about missing model metadata.

import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import {
  AUTO,
  AUTO_LOG,
  AUTO_URL,
  assertAutoChose,
  assertAutoServes,
  assertOneKeyPerSession,
  digest,
  freshDirs,
  mainTurns,
  records,
  requestLog,
  required,
  runCli,
  since,
  summary,
  untilPast,
  watermark,
} from './common.mjs';
import { startTap } from './tap.mjs';

const CODEX = required('CLIENTS_CODEX');
/** Switchyard's OpenAI-style base, …/v1: Codex appends /responses. */
const PROXY_URL = required('CLIENTS_PROXY_URL');
const PROXY_KEY = required('SWITCHYARD_API_KEY');
const SWITCHYARD_LOG = process.env.CLIENTS_SWITCHYARD_LOG ?? '';
const MOCK_URL = required('CLIENTS_MOCK_URL');
/** The management token of the instance at PROXY_URL, for its request log (/api/requests). */
const TOKEN_FILE = required('CLIENTS_TOKEN_FILE');
/** The instance with the subscription combos (tests/clients/run); empty when it did not start. */
const SUB_URL = process.env.CLIENTS_SUB_URL ?? '';
const SUB_LOG = process.env.CLIENTS_SUB_LOG ?? '';
/** The subscription combo's API key (its second target). */
const SUB_KEY = required('CLIENTS_SUB_KEY');

/** The combos Codex is pointed at (tests/clients/run's config). */
const MODELS = [
  'codex-chat',
  'codex-anthropic',
  'codex-tool',
  'codex-patch',
  'codex-fallback',
  'codex-session',
  'codex-subscription',
  'auto',
  'codex-compact-responses',
  'codex-compact-chat',
  'codex-compact-anthropic',
  'codex-compact-gemini',
  'codex-websockets',
  'codex-cache',
];

/**
 * A relay in front of Switchyard (tap.mjs) for the cases that must see what Codex itself sent,
 * including what Switchyard answers without asking an upstream (h, i); at `${tap.url}/v1`.
 */
const tap = await startTap(new URL(PROXY_URL).origin);
after(() => tap.close());

const PATCHED_FILE = 'hello.txt';
const PATCHED_TEXT = 'hello from switchyard\n';

/**
 * What Codex needs to know about a model it has never heard of. Every field here is one Codex
 * 0.171.0 refuses the catalogue without (or one that changes the request: a freeform
 * apply_patch, no verbosity); `base_instructions` becomes its first developer message.
 */
function catalogueEntry(slug) {
  return {
    slug,
    display_name: slug,
    base_instructions: "You are Codex, a coding agent, answering through Switchyard's real-client check.",
    apply_patch_tool_type: 'freeform',
    shell_type: 'shell_command',
    visibility: 'list',
    supported_in_api: true,
    priority: 1,
    context_window: 128000,
    truncation_policy: { mode: 'tokens', limit: 10000 },
    supports_parallel_tool_calls: true,
    input_modalities: ['text'],
    supported_reasoning_levels: [],
    experimental_supported_tools: [],
    support_verbosity: false,
  };
}

/**
 * `$HOME/.codex/config.toml`: Switchyard (or whatever `baseUrl` is) as the only provider, no
 * retries of Codex's own. Its key is SWITCHYARD_KEY, or for a `subscriber` Codex's own ChatGPT
 * login (`requires_openai_auth`) with Switchyard's key beside it in `x-switchyard-key`. `extra`
 * adds lines: `top` at the top level, `features` in `[features]`, `provider` in the provider's
 * table.
 */
function codexConfig(home, model, { baseUrl = PROXY_URL, subscriber = false, extra = {} } = {}) {
  const catalogue = path.join(home, '.codex', 'models.json');
  writeFileSync(catalogue, JSON.stringify({ models: MODELS.map(catalogueEntry) }, null, 2));
  const auth = subscriber
    ? ['requires_openai_auth = true', `http_headers = { "x-switchyard-key" = ${JSON.stringify(PROXY_KEY)} }`]
    : ['env_key = "SWITCHYARD_KEY"'];
  const { top = [], features = [], provider = [] } = extra;
  return [
    `model = ${JSON.stringify(model)}`,
    'model_provider = "switchyard"',
    `model_catalog_json = ${JSON.stringify(catalogue)}`,
    ...top,
    '',
    ...(features.length > 0 ? ['[features]', ...features, ''] : []),
    '[model_providers.switchyard]',
    'name = "Switchyard"',
    `base_url = ${JSON.stringify(baseUrl)}`,
    ...auth,
    'wire_api = "responses"',
    'request_max_retries = 0',
    'stream_max_retries = 0',
    ...provider,
    '',
  ].join('\n');
}

/** An event that means the turn has failed: `codex exec` may go on reconnecting forever after it. */
function isFailure(event) {
  return event.type === 'turn.failed' || event.type === 'error';
}

/**
 * Runs `codex exec --json PROMPT` in a fresh working directory with a fresh HOME (or, with
 * `resume`, `codex exec resume --last PROMPT` in the `dirs` of an earlier run), and resolves
 * with its exit code, output, the JSON events it printed (one a line) and the directory. Nothing
 * of the caller's environment that could change Codex's behaviour is passed on. The first
 * failure event ends the run: with its retries off Codex has nothing left to try, but it keeps
 * "reconnecting" after a connection error, which would otherwise last until the timeout.
 * `log` is the Switchyard log a failing case shows (the instance's at `baseUrl`); `extra` is
 * more configuration (see codexConfig), written with the rest by the first run of `dirs`.
 */
function codex({ name, dirs, model, prompt, resume = false, baseUrl, subscriber = false, extra, log: logFile }) {
  const { home, project } = dirs ?? freshDirs(name);
  if (!resume) {
    mkdirSync(path.join(home, '.codex'));
    writeFileSync(path.join(home, '.codex', 'config.toml'), codexConfig(home, model, { baseUrl, subscriber, extra }));
    if (subscriber) writeFileSync(path.join(home, '.codex', 'auth.json'), JSON.stringify(chatgptLogin()));
  }
  const env = {
    PATH: process.env.PATH,
    LANG: 'C.UTF-8',
    HOME: home,
  };
  if (!subscriber) env.SWITCHYARD_KEY = PROXY_KEY;
  // The sandbox may not start in a CI container (and CI runs as root): no sandbox, no approvals.
  // No stdin (runCli's): `codex exec` would wait for more prompt on an open one.
  const flags = ['--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--json'];
  const argv = resume ? ['exec', ...flags, 'resume', '--last', prompt] : ['exec', ...flags, prompt];
  let pending = '';
  const events = [];
  const onStdout = (chunk, child) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop();
    for (const line of lines) {
      if (!line.trim()) continue;
      let event;
      try {
        event = JSON.parse(line);
      } catch {
        continue; // Not an event: shown with the output when an assertion fails.
      }
      events.push(event);
      if (isFailure(event)) child.kill('SIGTERM');
    }
  };
  const log = logFile ?? (subscriber ? SUB_LOG : SWITCHYARD_LOG);
  return runCli(CODEX, argv, { cwd: project, env, onStdout }).then((run) => ({ ...run, events, project, home, log }));
}

/** The last lines of Switchyard's log (`file`), for a failing case. */
function switchyardLog(file) {
  if (!file || !existsSync(file)) return '';
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
  return `\n--- switchyard log (last ${Math.min(lines.length, 40)} lines)\n${lines.slice(-40).join('\n')}`;
}

/** The run, for an assertion message: what a failing case must show. */
function explain(run) {
  const how = run.signal ? `killed by ${run.signal}` : `exit ${run.code}`;
  const command = [CODEX, ...run.argv].map((a) => JSON.stringify(a)).join(' ');
  return `HOME=${run.home} (cd ${run.project} && ${command}): ${how}\n` +
    `--- stdout\n${run.stdout}\n--- stderr\n${run.stderr.slice(-4000)}${switchyardLog(run.log)}`;
}

/** The items Codex reported done, by type. */
function completed(run, type) {
  return run.events.filter((e) => e.type === 'item.completed' && e.item?.type === type).map((e) => e.item);
}

/** Exit 0, a completed turn, no error events, and the last agent message is exactly `text`. */
function assertAnswered(run, text) {
  assert.ok(!run.events.some(isFailure), `Codex reported an error\n${explain(run)}`);
  assert.equal(run.code, 0, `Codex failed\n${explain(run)}`);
  assert.ok(run.events.some((e) => e.type === 'turn.completed'), `no turn.completed\n${explain(run)}`);
  const messages = completed(run, 'agent_message');
  assert.equal(messages.at(-1)?.text, text, `not the mock's text\n${explain(run)}`);
}

/** The text of a tool result in an upstream request: a Chat `tool` message or an Anthropic block. */
function toolResultText(record) {
  const messages = record.body.messages ?? [];
  const last = messages.at(-1);
  if (record.dialect === 'openai') {
    const tool = messages.findLast((m) => m.role === 'tool');
    return typeof tool?.content === 'string' ? tool.content : (tool?.content ?? []).map((p) => p.text ?? '').join('');
  }
  const block = (Array.isArray(last?.content) ? last.content : []).find((b) => b.type === 'tool_result');
  if (!block) return '';
  return typeof block.content === 'string' ? block.content : block.content.map((p) => p.text ?? '').join('');
}

test('Codex gets a plain answer through an OpenAI Chat target', async () => {
  const before = watermark();
  const run = await codex({ name: 'a-chat', model: 'codex-chat', prompt: 'Say hello.' });
  assertAnswered(run, 'Codex answer from the OpenAI Chat upstream.');
  const turns = mainTurns(before, 'cx-chat');
  assert.equal(turns.length, 1, `one main turn\n${summary(since(before))}\n${explain(run)}`);
  assert.equal(turns[0].dialect, 'openai');
  assert.equal(turns[0].path, '/v1/chat/completions');
  assert.equal(turns[0].stream, true);
  const user = turns[0].body.messages.findLast((m) => m.role === 'user');
  const text = typeof user.content === 'string' ? user.content : user.content.map((p) => p.text ?? '').join('');
  assert.match(text, /Say hello\./, 'the prompt reached the upstream');
});

test('Codex gets a plain answer through an Anthropic target', async () => {
  const before = watermark();
  const run = await codex({ name: 'a-anthropic', model: 'codex-anthropic', prompt: 'Say hello.' });
  assertAnswered(run, 'Codex answer from the Anthropic upstream.');
  const turns = mainTurns(before, 'cx-anthropic');
  assert.equal(turns.length, 1, `one main turn\n${summary(since(before))}\n${explain(run)}`);
  assert.equal(turns[0].dialect, 'anthropic');
  assert.equal(turns[0].path, '/v1/messages');
});

test('Codex runs the shell command the upstream asks for and sends its output back', async () => {
  const before = watermark();
  const run = await codex({ name: 'b-tool', model: 'codex-tool', prompt: 'Run the check command.' });
  assertAnswered(run, 'Codex ran the command and saw the marker.');
  const commands = completed(run, 'command_execution');
  assert.equal(commands.length, 1, `one command\n${explain(run)}`);
  assert.match(commands[0].command, /echo switchyard-tool-ok/);
  assert.equal(commands[0].exit_code, 0, explain(run));
  assert.equal(commands[0].aggregated_output.trim(), 'switchyard-tool-ok');

  const turns = mainTurns(before, 'cx-tool');
  assert.equal(turns.length, 2, `a tool call, then its result\n${summary(turns)}`);
  assert.equal(turns[0].behavior.reply?.tool_call?.name, 'exec_command', summary(turns));
  assert.match(toolResultText(turns[1]), /switchyard-tool-ok/, JSON.stringify(turns[1].body.messages.at(-1)));
});

test("Codex applies the upstream's apply_patch call through a Chat target", async () => {
  const before = watermark();
  const run = await codex({ name: 'c-patch', model: 'codex-patch', prompt: `Create ${PATCHED_FILE}.` });
  assertAnswered(run, 'Codex applied the patch.');
  const file = path.join(run.project, PATCHED_FILE);
  assert.ok(existsSync(file), `Codex did not create ${PATCHED_FILE}\n${explain(run)}`);
  assert.equal(readFileSync(file, 'utf8'), PATCHED_TEXT);
  assert.equal(completed(run, 'file_change').length, 1, `one file change\n${explain(run)}`);

  const turns = mainTurns(before, 'cx-patch');
  assert.equal(turns.length, 2, `a patch, then its result\n${summary(turns)}`);
  // Codex offers apply_patch as a freeform tool; Chat got it as a function with one string.
  const offered = turns[0].body.tools.find((t) => (t.function?.name ?? t.name) === 'apply_patch');
  assert.ok(offered, `apply_patch was not offered to the Chat upstream: ${JSON.stringify(turns[0].body.tools.map((t) => t.function?.name ?? t.name))}`);
  assert.equal(offered.type, 'function');
  assert.equal(offered.function.parameters?.properties?.input?.type, 'string', JSON.stringify(offered));
  assert.match(toolResultText(turns[1]), new RegExp(PATCHED_FILE), JSON.stringify(turns[1].body.messages.at(-1)));
});

test('a 503 from the first target before any event falls back to the second', async () => {
  const before = watermark();
  const run = await codex({ name: 'd-fallback', model: 'codex-fallback', prompt: 'Say hello.' });
  assertAnswered(run, 'Codex served by the second target after a 503.');
  const down = mainTurns(before, 'cx-down');
  const backup = mainTurns(before, 'cx-backup');
  assert.equal(down.length, 1, `first target: ${summary(down)}`);
  assert.equal(backup.length, 1, `second target: ${summary(backup)}`);
  assert.ok(down[0].seq < backup[0].seq, 'the failing target was tried first');
});

test('two sessions of three turns each (exec resume) keep to one key each of a two-key round robin', async () => {
  // Interleaved, three turns of each session, `codex exec resume --last` after the first, and
  // not in strict alternation (which would keep each session on one key even turn by turn).
  // Codex names its session in `session-id` and `prompt_cache_key`; round robin spreads the
  // new sessions over the two keys and each later turn goes where its session's first did.
  const before = watermark();
  const sessions = ['e-session-1', 'e-session-2'].map((name) => ({ name, dirs: freshDirs(name), marker: `Session ${name} begins.`, turns: 0 }));
  for (const s of [0, 0, 1, 0, 1, 1].map((i) => sessions[i])) {
    const first = s.turns === 0;
    s.turns += 1;
    const prompt = first ? s.marker : `Turn ${s.turns}: go on.`;
    const run = await codex({ dirs: s.dirs, model: 'codex-session', prompt, resume: !first });
    assertAnswered(run, 'Codex session turn answered.');
    const thread = run.events.find((e) => e.type === 'thread.started')?.thread_id;
    s.thread ??= thread;
    assert.equal(thread, s.thread, `resume went on with the session\n${explain(run)}`);
  }
  assertOneKeyPerSession(mainTurns(before, 'cx-session'), sessions.map((s) => s.marker), 3);
});

// f. Keep your subscription (issue 28). Codex logged in with ChatGPT (a Plus plan): its login in
// the throwaway HOME's auth.json, a provider with `requires_openai_auth` and Switchyard's key in
// `http_headers`. The combo `codex-subscription` (tests/clients/run) tries the subscription (a
// `client` credential: Codex's own token and `chatgpt-account-id`, passed through to the mock's
// /backend-api/codex/responses) and then an API key. The three cases run in order: the third
// waits for the reset the second one's limit named.

/** An unsigned JWT with these claims: Codex reads the claims and never checks a signature. */
function jwt(claims) {
  const part = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.unsigned`;
}

/** The ChatGPT account of this run, made up: Codex sends its access token and account id. */
const ACCOUNT_ID = randomUUID();
const IN_A_YEAR = Math.floor(Date.now() / 1000) + 365 * 24 * 3600;
const AUTH_CLAIMS = { chatgpt_plan_type: 'plus', chatgpt_account_id: ACCOUNT_ID, chatgpt_user_id: `user-${ACCOUNT_ID}` };
const TOKENS = {
  id_token: jwt({ email: 'subscriber@example.com', exp: IN_A_YEAR, 'https://api.openai.com/auth': AUTH_CLAIMS }),
  // A JWT too, expiring in a year, so Codex never tries to refresh it.
  access_token: jwt({ exp: IN_A_YEAR, nonce: randomBytes(16).toString('hex'), 'https://api.openai.com/auth': AUTH_CLAIMS }),
  refresh_token: `rt_${randomBytes(32).toString('base64url')}`,
  account_id: ACCOUNT_ID,
};

/** `$HOME/.codex/auth.json` as `codex login` leaves it for a ChatGPT subscriber, refreshed now. */
function chatgptLogin() {
  return { OPENAI_API_KEY: null, tokens: TOKENS, last_refresh: new Date().toISOString() };
}

const SUBSCRIPTION_TEXT = 'Codex answered by the ChatGPT subscription.';
const API_KEY_TEXT = "Codex answered by the API key after the subscription's limit.";
const LOGIN_DIGEST = digest(TOKENS.access_token);

/** The subscription instance is up, or the case fails with why it is not. */
function assertSubscriptionsServe() {
  assert.ok(
    SUB_URL,
    `switchyard with the subscription config did not start:\n${SUB_LOG ? readFileSync(SUB_LOG, 'utf8') : ''}`,
  );
}

/** Codex as a ChatGPT subscriber on the combo `codex-subscription` at `baseUrl`. */
function subscriber({ name, baseUrl, prompt }) {
  return codex({ name, model: 'codex-subscription', prompt, baseUrl, subscriber: true });
}

/**
 * A raw request body with what differs between two runs of the same prompt blanked: ids, the
 * turn's start time, and the order of `client_metadata`'s keys (a hash map in Codex, written
 * in a new order each run; put in one order here, in place, leaving every other byte as sent).
 */
function normalise(raw) {
  let text = raw
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
    .replace(/(turn_started_at_unix_ms\\?":)\d+/g, '$1<ms>');
  const metadata = JSON.parse(text).client_metadata;
  if (metadata !== undefined) {
    const written = `"client_metadata":${JSON.stringify(metadata)}`;
    assert.ok(text.includes(written), `client_metadata is not written compactly; revisit normalise:\n${text}`);
    const sorted = Object.fromEntries(Object.entries(metadata).sort(([a], [b]) => (a < b ? -1 : 1)));
    text = text.replace(written, `"client_metadata":${JSON.stringify(sorted)}`);
  }
  return text;
}

/** The first place two strings differ, with some context, for a readable failure. */
function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  const at = Math.max(0, i - 80);
  return `at byte ${i}:\n  direct:  …${a.slice(at, i + 80)}…\n  proxied: …${b.slice(at, i + 80)}…`;
}

/** When the limit of the second case (f 2) resets at the latest, in Unix milliseconds. */
let subscriptionResetsBy = null;

test("a subscriber's Codex reaches its ChatGPT subscription with its own login and the body it sends straight", async () => {
  assertSubscriptionsServe();
  const prompt = 'Say hello for the subscription check.';
  const beforeDirect = watermark();
  // Straight to the mock where chatgpt.com serves Codex: Codex appends /responses.
  const direct = await subscriber({ name: 'f-subscriber', baseUrl: `${MOCK_URL}/backend-api/codex`, prompt });
  assertAnswered(direct, SUBSCRIPTION_TEXT);
  const beforeProxied = watermark();
  const proxied = await subscriber({ name: 'f-subscriber', baseUrl: `${SUB_URL}/v1`, prompt });
  assertAnswered(proxied, SUBSCRIPTION_TEXT);

  const [sent] = mainTurns(beforeDirect, 'codex-subscription');
  const [received] = mainTurns(beforeProxied, 'cx-sub');
  assert.ok(sent && received, summary(since(beforeDirect)));
  assert.equal(sent.path, '/backend-api/codex/responses');
  // What makes this a subscriber's request: Codex's ChatGPT token and account.
  assert.equal(sent.credentials.authorization, LOGIN_DIGEST, 'Codex sent its own ChatGPT token, straight');
  assert.equal(sent.headers['chatgpt-account-id'], ACCOUNT_ID, 'Codex sent its account, straight');

  // The subscription's upstream, at the path chatgpt.com serves: Codex's own token and account
  // and no other credential (not Switchyard's key).
  assert.equal(received.path, '/backend-api/codex/responses');
  assert.deepEqual(received.credentials, { authorization: LOGIN_DIGEST }, `credentials ${JSON.stringify(received.headers)}`);
  assert.equal(received.headers['chatgpt-account-id'], ACCOUNT_ID);

  // The body as Codex sent it but for `model`: as JSON after the per-run ids are blanked, then
  // byte for byte.
  const strip = (record) => {
    const { model: _, ...rest } = JSON.parse(normalise(record.raw_body));
    return rest;
  };
  assert.deepEqual(strip(received), strip(sent));
  assert.equal(received.body.model, 'cx-sub');
  const rewritten = normalise(received.raw_body).replace('"model":"cx-sub"', '"model":"codex-subscription"');
  const original = normalise(sent.raw_body);
  assert.ok(rewritten === original, `the upstream body differs ${firstDifference(original, rewritten)}`);
});

test("a subscriber's Codex is answered by the API key when ChatGPT answers its usage limit, and the key never sees the login", async () => {
  assertSubscriptionsServe();
  const before = watermark();
  const run = await subscriber({ name: 'f-limit', baseUrl: `${SUB_URL}/v1`, prompt: 'Spend the subscription.' });
  const ended = Date.now();
  assertAnswered(run, API_KEY_TEXT);

  const limited = mainTurns(before, 'cx-sub');
  const served = mainTurns(before, 'cx-sub-key');
  assert.equal(limited.length, 1, `the subscription: ${summary(limited)}`);
  const answer = limited[0].behavior.status;
  assert.equal(answer?.code, 429, `the subscription answered its limit: ${summary(limited)}`);
  assert.equal(limited[0].credentials.authorization, LOGIN_DIGEST, 'with the login');
  assert.equal(served.length, 1, `the API key: ${summary(served)}`);
  assert.ok(limited[0].seq < served[0].seq, 'the subscription was tried first');

  // Every request the API key's model ever got: its own key only, and neither the login nor the
  // account anywhere.
  const keyed = records().filter((r) => r.model === 'cx-sub-key');
  for (const r of keyed) {
    assert.deepEqual(r.credentials, { 'x-api-key': digest(SUB_KEY) }, `attempt ${r.seq}: credentials`);
    assert.ok(!('chatgpt-account-id' in r.headers), `attempt ${r.seq} to the API key carries chatgpt-account-id`);
    const seen = JSON.stringify(r.headers) + (r.raw_body ?? r.raw_body_base64);
    for (const secret of [TOKENS.access_token, TOKENS.refresh_token, TOKENS.id_token, ACCOUNT_ID]) {
      assert.ok(!seen.includes(secret), `attempt ${r.seq} to the API key carries the login`);
    }
  }

  // Switchyard read the limit before the run ended, so its reset is at the latest then plus the
  // seconds the body said.
  const seconds = answer.body?.error?.resets_in_seconds;
  assert.equal(typeof seconds, 'number', JSON.stringify(answer));
  subscriptionResetsBy = ended + seconds * 1000;
});

test("a subscriber's Codex is served by the ChatGPT subscription again once its reset has passed", async () => {
  assertSubscriptionsServe();
  assert.ok(subscriptionResetsBy, 'the limit case before this one did not get as far as the reset');
  await untilPast(subscriptionResetsBy);
  const before = watermark();
  const run = await subscriber({ name: 'f-reset', baseUrl: `${SUB_URL}/v1`, prompt: 'Say hello after the reset.' });
  assertAnswered(run, SUBSCRIPTION_TEXT);
  const turns = mainTurns(before, 'cx-sub');
  assert.equal(turns.length, 1, summary(since(before)));
  assert.deepEqual(turns[0].credentials, { authorization: LOGIN_DIGEST }, 'with the login');
  assert.equal(turns[0].headers['chatgpt-account-id'], ACCOUNT_ID);
  assert.equal(mainTurns(before, 'cx-sub-key').length, 0, `the API key was not needed: ${summary(since(before))}`);
});

// g. `auto` (issue 30): Codex with `model = "auto"` on the instance whose pool is three models at
// the mock (tests/clients/run). Its turn carries tools, so the model known to have none is
// skipped and the Anthropic one with tools wins (Switchyard translates the Responses turn).

test('model = auto: Codex is answered by the best model with tools, and the request log says why', async () => {
  assertAutoServes();
  const startedAt = Date.now();
  const before = watermark();
  const run = await codex({ name: 'g-auto', model: 'auto', prompt: 'Say hello for the auto check.', baseUrl: `${AUTO_URL}/v1`, log: AUTO_LOG });
  assertAnswered(run, AUTO.text);
  const [, winnerModel] = AUTO.winner.split('/');
  const turns = mainTurns(before, winnerModel);
  assert.equal(turns.length, 1, `one main turn at ${AUTO.winner}\n${summary(since(before))}\n${explain(run)}`);
  assert.equal(turns[0].dialect, 'anthropic');
  assert.equal(turns[0].path, '/v1/messages');
  for (const other of [AUTO.withoutTools, AUTO.second]) {
    const model = other.split('/')[1];
    assert.equal(mainTurns(before, model).length, 0, `no main turn reached ${other}\n${summary(since(before))}`);
  }
  const outside = since(before).filter((r) => r.model === AUTO.outside.split('/')[1]);
  assert.equal(outside.length, 0, `nothing reached ${AUTO.outside}, outside the allow list\n${summary(outside)}`);
  await assertAutoChose(startedAt, 'responses');
});

// h. Auto-compaction (issue 51). Codex compacts a conversation once it passes
// `model_auto_compact_token_limit` tokens. Toward a custom model provider (named anything but
// "OpenAI", and not at an Azure address) Codex 0.171 has no remote compaction: it asks the model
// itself for a summary in an ordinary POST /v1/responses (no tools, its compaction prompt as the
// last user message) and goes on with the summary in place of the history. Neither
// POST /v1/responses/compact nor a `compaction_trigger` item (remote compaction, for OpenAI's
// own provider) is sent, so every target dialect can serve it. The mock reports 60,000 input
// tokens for every main turn (mock.toml), far past the limit of 20,000, so the second turn
// compacts whatever Codex's own estimate of its prompt is.

/** The start of Codex's compaction prompt (its SUMMARIZATION_PROMPT). */
const COMPACTION_PROMPT = 'You are performing a CONTEXT CHECKPOINT COMPACTION';
/** The start of the text Codex puts before the summary it keeps (its SUMMARY_PREFIX). */
const SUMMARY_PREFIX = 'Another language model started to solve this problem';
const COMPACT_LIMIT = 20_000;
const FIRST_ANSWER = 'First answer, before the compaction.';
const SECOND_ANSWER = 'Second answer, after the compaction.';

/** The last user message's text in a Responses body. */
function lastUserText(body) {
  if (typeof body.input === 'string') return body.input;
  const user = (body.input ?? []).findLast((item) => item.role === 'user');
  if (!user) return '';
  if (typeof user.content === 'string') return user.content;
  return user.content.map((part) => part.text ?? '').join('');
}

/** A record's body as text, to look for a sentence in whatever dialect it is written. */
function bodyText(record) {
  return JSON.stringify(record.body);
}

const COMPACTING_TARGETS = [
  { dialect: 'Responses', combo: 'codex-compact-responses', model: 'cx-compact-rs', path: '/v1/responses' },
  { dialect: 'Chat', combo: 'codex-compact-chat', model: 'cx-compact-chat', path: '/v1/chat/completions' },
  { dialect: 'Anthropic', combo: 'codex-compact-anthropic', model: 'cx-compact-an', path: '/v1/messages' },
  { dialect: 'Gemini', combo: 'codex-compact-gemini', model: 'cx-compact-ge', path: '/v1beta/models/cx-compact-ge:streamGenerateContent' },
];

for (const target of COMPACTING_TARGETS) {
  test(`Codex with a small auto-compaction limit: a multi-turn session compacts and continues (${target.dialect} target)`, async () => {
    const summaryText = `Summary of the session from the ${target.dialect} upstream.`;
    const before = watermark();
    const mark = tap.exchanges().length;
    const dirs = freshDirs(`h-compact-${target.dialect.toLowerCase()}`);
    const session = { dirs, model: target.combo, baseUrl: `${tap.url}/v1`, extra: { top: [`model_auto_compact_token_limit = ${COMPACT_LIMIT}`] } };
    const first = await codex({ ...session, prompt: 'Compaction turn 1: say hello.' });
    assertAnswered(first, FIRST_ANSWER);
    const second = await codex({ ...session, prompt: 'Compaction turn 2: go on.', resume: true });
    assertAnswered(second, SECOND_ANSWER);
    const thread = (run) => run.events.find((e) => e.type === 'thread.started')?.thread_id;
    assert.equal(thread(second), thread(first), `resume went on with the session\n${explain(second)}`);

    // Upstream: turn 1, the summary turn, turn 2 with the summary in place of turn 1's answer.
    const mine = since(before).filter((r) => r.model === target.model);
    const turns = mainTurns(before, target.model);
    const summaries = mine.filter((r) => !turns.includes(r) && bodyText(r).includes(COMPACTION_PROMPT));
    const seen = summary(mine);
    assert.equal(turns.length, 2, `two main turns: ${seen}`);
    assert.equal(summaries.length, 1, `one summary turn, the compaction: ${seen}`);
    const [turn1, turn2] = turns;
    const [compaction] = summaries;
    assert.ok(turn1.seq < compaction.seq && compaction.seq < turn2.seq, `the compaction came between the turns: ${seen}`);
    for (const record of [turn1, compaction, turn2]) assert.equal(record.path, target.path, seen);
    assert.equal(compaction.behavior.reply?.text, summaryText, `the summary turn got the summary: ${seen}`);
    assert.ok(bodyText(compaction).includes(FIRST_ANSWER), 'the summary turn carried the history to summarise');
    const later = bodyText(turn2);
    assert.ok(later.includes(SUMMARY_PREFIX) && later.includes(summaryText), `turn 2 carries the summary: ${later.slice(-2000)}`);
    assert.ok(!later.includes(FIRST_ANSWER), `turn 2 no longer carries turn 1's answer: ${later.slice(-2000)}`);
    assert.ok(!later.includes(COMPACTION_PROMPT), 'nor the compaction prompt');

    // What Codex sent to Switchyard: only POST /v1/responses (not /v1/responses/compact), never a
    // `compaction_trigger` item, and its summary turn is one of them, without tools.
    const sent = tap.exchanges().slice(mark);
    const requests = JSON.stringify(sent.map((e) => `${e.method} ${e.path} ${e.status}`));
    for (const exchange of sent) {
      assert.equal(`${exchange.method} ${exchange.path}`, 'POST /v1/responses', `Codex sent only turns: ${requests}`);
      assert.equal(exchange.status, 200, requests);
      const body = JSON.parse(exchange.body);
      const kinds = (Array.isArray(body.input) ? body.input : []).map((item) => item.type);
      assert.ok(!kinds.includes('compaction_trigger'), `no remote compaction: ${kinds}`);
    }
    const compacting = sent.filter((e) => lastUserText(JSON.parse(e.body)).startsWith(COMPACTION_PROMPT));
    assert.equal(compacting.length, 1, `one summary turn among ${requests}`);
    assert.deepEqual(JSON.parse(compacting[0].body).tools ?? [], [], 'the summary turn offers no tools');
  });
}

// i. Codex with its WebSocket transport on. Codex 0.171 opens a WebSocket toward any provider
// with `supports_websockets = true` (the `[features]` flags responses_websockets and
// responses_websockets_v2 are set here too, but 0.171 lists them as removed: they change
// nothing). It asks once, at session start, to upgrade GET /v1/responses; Switchyard answers
// 426, which Codex takes as "use HTTP" for the rest of the session, without retrying or warning.

/** How soon after the 426 the turn must come over HTTP; measured: well under 100 ms. */
const FALLBACK_WITHIN_MS = 2_000;
const WEBSOCKET_TEXT = 'Codex answered over HTTP after the WebSocket was refused.';

test('Codex with supports_websockets on asks once for a WebSocket, gets 426 and answers the turn over HTTP at once', async (t) => {
  const before = watermark();
  const mark = tap.exchanges().length;
  const run = await codex({
    name: 'i-websockets',
    model: 'codex-websockets',
    prompt: 'Say hello over whatever transport there is.',
    baseUrl: `${tap.url}/v1`,
    extra: { features: ['responses_websockets = true', 'responses_websockets_v2 = true'], provider: ['supports_websockets = true'] },
  });
  assertAnswered(run, WEBSOCKET_TEXT);
  const failures = completed(run, 'error');
  assert.equal(failures.length, 0, `Codex fell back without a warning: ${JSON.stringify(failures)}`);

  const sent = tap.exchanges().slice(mark);
  const requests = JSON.stringify(sent.map((e) => `${e.method} ${e.path} ${e.status} upgrade=${e.headers.upgrade ?? ''}`));
  const upgrades = sent.filter((e) => /\bwebsocket\b/i.test(e.headers.upgrade ?? ''));
  // Codex 0.171 asks once; a Codex that no longer asks (or asks again after a 426) changes what
  // docs/clients.md says, and this case with it.
  assert.equal(upgrades.length, 1, `one upgrade asked for, never again after the 426: ${requests}`);
  const [upgrade] = upgrades;
  assert.equal(`${upgrade.method} ${upgrade.path}`, 'GET /v1/responses', requests);
  assert.match(upgrade.headers['openai-beta'] ?? '', /responses_websockets=/, 'it was the Responses WebSocket');
  assert.equal(upgrade.status, 426, `Switchyard refused the upgrade: ${requests}`);
  const posts = sent.filter((e) => e !== upgrade);
  assert.ok(posts.length >= 1, requests);
  for (const post of posts) {
    assert.equal(`${post.method} ${post.path} ${post.status}`, 'POST /v1/responses 200', requests);
  }
  const gap = posts[0].at - upgrade.answeredAt;
  t.diagnostic(`the turn came over HTTP ${gap.toFixed(1)} ms after the 426`);
  assert.ok(gap >= 0 && gap < FALLBACK_WITHIN_MS, `the turn came ${gap.toFixed(1)} ms after the 426`);

  const turns = mainTurns(before, 'cx-ws');
  assert.equal(turns.length, 1, summary(since(before)));
  assert.equal(turns[0].path, '/v1/responses');
});

// j. Prompt caching (issue 55). Codex names its session (`prompt_cache_key`), so Switchyard,
// translating its turns for an Anthropic target (which caches only what a request marks), puts
// breakpoints on them by default (`cache_breakpoints = "sessions"`): the last tool, the last
// system block, the last message. The mock keeps a prompt cache per key under Anthropic's rule
// (`--cache-prompts`: nothing cached without `cache_control`, which is not part of what it
// hashes; a read at a breakpoint or up to 20 blocks before one), so each later turn, which
// repeats the earlier ones, reads them back; the target's key is one of its own, so the first
// turn finds nothing and writes its prompt. What each turn read and wrote is in the usage
// Switchyard logged for it (the mock reports Anthropic's `cache_creation_input_tokens`).

const CACHE_TEXT = "Codex turn answered behind the prompt cache (j).";
/**
 * The main turns' output tokens as the mock counts them (four bytes a token): how the case tells
 * them from any side request (whose answer is "Side answer.", 3 tokens) in the request log.
 */
const CACHE_OUTPUT = Math.ceil(CACHE_TEXT.length / 4);
/** Anthropic takes at most four breakpoints a request. */
const MAX_BREAKPOINTS = 4;
/** The least share of a later turn's prompt that must be read from the cache. */
const LEAST_READ_SHARE = 0.8;

/** Where an Anthropic request body carries `cache_control`: `tools[i]`, `system[i]`, `messages[i][j]`. */
function breakpoints(body) {
  const marked = [];
  const each = (where, list) => {
    if (!Array.isArray(list)) return;
    list.forEach((block, i) => {
      if (block && typeof block === 'object' && block.cache_control) marked.push(`${where}[${i}]`);
    });
  };
  each('tools', body.tools);
  each('system', body.system);
  (body.messages ?? []).forEach((message, i) => each(`messages[${i}]`, message.content));
  return marked;
}

test('a Codex session through an Anthropic target carries cache breakpoints and reads its earlier turns from the prompt cache', async (t) => {
  const startedAt = Date.now();
  const before = watermark();
  const dirs = freshDirs('j-cache');
  const prompts = ['Cache turn 1: say hello.', 'Cache turn 2: go on.', 'Cache turn 3: go on again.'];
  let thread;
  for (const [i, prompt] of prompts.entries()) {
    const run = await codex({ dirs, model: 'codex-cache', prompt, resume: i > 0 });
    assertAnswered(run, CACHE_TEXT);
    const id = run.events.find((e) => e.type === 'thread.started')?.thread_id;
    thread ??= id;
    assert.equal(id, thread, `resume went on with the session\n${explain(run)}`);
  }

  // What reached the upstream: three translated main turns, each marked where Switchyard marks
  // (the client sends no cache_control of its own), and no request of the session with more
  // than four breakpoints.
  const mine = since(before).filter((r) => r.model === 'cx-cache');
  const turns = mainTurns(before, 'cx-cache');
  assert.equal(turns.length, 3, `three main turns: ${summary(mine)}`);
  turns.forEach((turn, i) => {
    const where = `turn ${i + 1} (attempt ${turn.seq})`;
    assert.equal(turn.dialect, 'anthropic', where);
    assert.equal(turn.path, '/v1/messages', where);
    assert.ok(turn.raw_body.includes(prompts[i]), `${where} carries its prompt`);
    const marked = breakpoints(turn.body);
    const seen = `${where}: breakpoints at ${JSON.stringify(marked)}`;
    t.diagnostic(seen);
    assert.ok(marked.length >= 1 && marked.length <= MAX_BREAKPOINTS, seen);
    assert.ok(turn.body.tools.at(-1).cache_control, `the last tool is marked: ${seen}`);
    if (Array.isArray(turn.body.system) && turn.body.system.length > 0) {
      assert.ok(turn.body.system.at(-1).cache_control, `the last system block is marked: ${seen}`);
    }
    const last = turn.body.messages.length - 1;
    assert.ok(marked.some((m) => m.startsWith(`messages[${last}]`)), `the last message is marked: ${seen}`);
    for (const block of marked) {
      const [, list, at, sub] = block.match(/^(\w+)\[(\d+)\](?:\[(\d+)\])?$/);
      const value = list === 'messages' ? turn.body.messages[at].content[sub] : turn.body[list][at];
      assert.deepEqual(value.cache_control, { type: 'ephemeral' }, `${where}: ${block}`);
    }
  });
  for (const record of mine.filter((r) => r.dialect === 'anthropic')) {
    const marked = breakpoints(record.body ?? {});
    assert.ok(marked.length <= MAX_BREAKPOINTS, `attempt ${record.seq}: ${JSON.stringify(marked)}`);
  }

  // What each main turn read from the cache, by the usage Switchyard logged for it (the mock's
  // figures): the first turn nothing, the later ones most of their prompt, more each turn.
  // The log is written as each answer ends, which may be just after Codex has read it: polled
  // for a few seconds until the last turn is there.
  let served;
  let main;
  for (const deadline = Date.now() + 5_000; ;) {
    const log = await requestLog(new URL(PROXY_URL).origin, TOKEN_FILE);
    served = log.filter((e) => e.at >= startedAt && e.served_by === 'cx-cache/cx-cache').sort((a, b) => a.at - b.at);
    main = served.filter((e) => e.usage?.output === CACHE_OUTPUT);
    if (main.length >= 3 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const all = served.map((e) => JSON.stringify({ at: e.at, status: e.status, session: e.session, usage: e.usage })).join('\n');
  assert.equal(main.length, 3, `three main turns in the request log, by their output tokens (${CACHE_OUTPUT}):\n${all}`);
  assert.ok(main[0].session, `the turns belong to a session:\n${all}`);
  assert.ok(main.every((e) => e.status === 200 && e.session === main[0].session), `one session, all served:\n${all}`);
  const figures = main.map(({ usage }) => {
    const prompt = usage.cache_read + usage.cache_write + usage.uncached_input;
    return { ...usage, prompt, share: prompt > 0 ? usage.cache_read / prompt : 0 };
  });
  figures.forEach((f, i) => {
    t.diagnostic(`turn ${i + 1}: read ${f.cache_read} of ${f.prompt} prompt tokens from the cache (${(100 * f.share).toFixed(1)} %; written ${f.cache_write}, uncached ${f.uncached_input})`);
  });
  const [first, ...later] = figures;
  assert.equal(first.cache_read, 0, `turn 1 found nothing cached on the key of its own:\n${all}`);
  assert.ok(first.prompt > 0, `turn 1 has a prompt:\n${all}`);
  assert.ok(first.cache_write > first.prompt / 2, `turn 1 wrote its prompt to the cache:\n${all}`);
  later.forEach((f, i) => {
    assert.ok(f.share >= LEAST_READ_SHARE, `turn ${i + 2} read ${(100 * f.share).toFixed(1)} % of its prompt from the cache, at least ${100 * LEAST_READ_SHARE} % expected:\n${all}`);
  });
  assert.ok(figures[2].cache_read > figures[1].cache_read, `turn 3 read more than turn 2 (turn 2 with it):\n${all}`);
});
