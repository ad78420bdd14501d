// The real Claude Code CLI against Switchyard; started by tests/clients/run, which sets the
// CLIENTS_* variables, starts the mock (tests/clients/mock.toml, recording every attempt) and
// `switchyard serve`, and stops them afterwards. Each case runs `claude -p … --output-format
// json` with a throwaway HOME and checks what it printed and what reached the mock.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import {
  AUTO,
  AUTO_URL,
  assertAutoChose,
  assertAutoServes,
  assertOneKeyPerSession,
  digest,
  freshDirs,
  mainTurns,
  records,
  required,
  runCli,
  since,
  summary,
  untilPast,
  watermark,
} from './common.mjs';

const CLAUDE = required('CLIENTS_CLAUDE');
const MOCK_URL = required('CLIENTS_MOCK_URL');
const PROXY_URL = required('CLIENTS_PROXY_URL');
const ALIAS_URL = process.env.CLIENTS_ALIAS_URL ?? '';
const ALIAS_LOG = process.env.CLIENTS_ALIAS_LOG ?? '';
const PROXY_KEY = required('SWITCHYARD_API_KEY');
/** The instance with the subscription combos (tests/clients/run); empty when it did not start. */
const SUB_URL = process.env.CLIENTS_SUB_URL ?? '';
const SUB_LOG = process.env.CLIENTS_SUB_LOG ?? '';
/** The subscription combo's API key (its second target). */
const SUB_KEY = required('CLIENTS_SUB_KEY');

/**
 * Runs `claude -p PROMPT --output-format json` and resolves with its exit code, output and the
 * parsed JSON (null when stdout is not one JSON document), in `dirs` (a HOME and working
 * directory from freshDirs, to go on with a conversation) or fresh ones of the case `name`. Nothing of the caller's environment
 * that could change Claude Code's behaviour is passed on: a fresh HOME, no ANTHROPIC_* or
 * CLAUDE_* variables but ours, retries off so a fault shows instead of being retried. With
 * `apiKey: null` no ANTHROPIC_API_KEY is set (a subscriber's own login is used); `env` adds
 * variables.
 */
function claude({ name, dirs, baseUrl, apiKey = PROXY_KEY, model, prompt, args = [], env: extra = {} }) {
  const { home, project } = dirs ?? freshDirs(name);
  const env = {
    PATH: process.env.PATH,
    LANG: 'C.UTF-8',
    HOME: home,
    ANTHROPIC_BASE_URL: baseUrl,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    CLAUDE_CODE_MAX_RETRIES: '0',
    ...extra,
  };
  if (apiKey !== null) env.ANTHROPIC_API_KEY = apiKey;
  if (model !== undefined) {
    env.ANTHROPIC_MODEL = model;
    env.ANTHROPIC_SMALL_FAST_MODEL = model;
  }
  const argv = ['-p', prompt, '--output-format', 'json', ...args];
  return runCli(CLAUDE, argv, { cwd: project, env }).then((run) => {
    let json = null;
    try {
      json = JSON.parse(run.stdout);
    } catch {
      // Left null: the assertion that needs it shows the output.
    }
    return { ...run, json };
  });
}

/** The run, for an assertion message: what a failing case must show. */
function explain(run) {
  const how = run.signal ? `killed by ${run.signal}` : `exit ${run.code}`;
  return `claude ${run.argv.map((a) => JSON.stringify(a)).join(' ')}: ${how}\n` +
    `--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
}

function assertAnswered(run, text) {
  assert.equal(run.json?.is_error, false, `Claude Code reported an error\n${explain(run)}`);
  assert.equal(run.json.result, text, `not the mock's text\n${explain(run)}`);
}

test('a plain answer through an Anthropic-dialect target is exactly the upstream text', async () => {
  const before = watermark();
  const run = await claude({ name: 'a-anthropic', baseUrl: PROXY_URL, model: 'cc-anthropic', prompt: 'Say hello.' });
  assertAnswered(run, 'Plain answer from the Anthropic-dialect upstream.');
  const turns = mainTurns(before, 'cc-text');
  assert.equal(turns.length, 1, summary(since(before)));
  assert.equal(turns[0].dialect, 'anthropic');
  assert.equal(turns[0].headers['x-api-key'], '[redacted]', 'the upstream got a key of its own');
});

test('a plain answer through an OpenAI-dialect target is translated both ways', async () => {
  const before = watermark();
  const run = await claude({ name: 'a-openai', baseUrl: PROXY_URL, model: 'cc-openai', prompt: 'Say hello.' });
  assertAnswered(run, 'Plain answer from the OpenAI-dialect upstream.');
  const turns = mainTurns(before, 'gpt-text');
  assert.equal(turns.length, 1, summary(since(before)));
  assert.equal(turns[0].dialect, 'openai');
  assert.equal(turns[0].path, '/v1/chat/completions');
});

test('a tool round trip runs the command and answers its result', async () => {
  const before = watermark();
  const run = await claude({
    name: 'b-tool',
    baseUrl: PROXY_URL,
    model: 'cc-tool',
    prompt: 'Run the check command.',
    // As root, --dangerously-skip-permissions is refused: allow just this one command.
    args: ['--allowedTools', 'Bash(echo:*)'],
  });
  assertAnswered(run, 'The command printed the marker.');
  const turns = mainTurns(before, 'cc-tool');
  assert.equal(turns.length, 2, `a tool call, then its result\n${summary(turns)}`);
  assert.equal(turns[0].behavior.reply?.tool_call?.name, 'Bash', summary(turns));
  const last = turns[1].body.messages.findLast((m) => m.role === 'user');
  const result = last.content.find((block) => block.type === 'tool_result');
  assert.ok(result, `no tool_result in the second request: ${JSON.stringify(last)}`);
  assert.notEqual(result.is_error, true, `the command failed: ${JSON.stringify(result)}`);
  const text = typeof result.content === 'string'
    ? result.content
    : result.content.map((part) => part.text ?? '').join('');
  assert.equal(text.trim(), 'switchyard-tool-ok');
});

test('a 529 from the first target falls back to the second, one attempt each', async () => {
  const before = watermark();
  const run = await claude({ name: 'c-fallback', baseUrl: PROXY_URL, model: 'cc-fallback', prompt: 'Say hello.' });
  assertAnswered(run, 'Served by the second target after a 529.');
  const overloaded = mainTurns(before, 'cc-overloaded');
  const backup = mainTurns(before, 'cc-backup');
  assert.equal(overloaded.length, 1, `first target: ${summary(overloaded)}`);
  assert.equal(backup.length, 1, `second target: ${summary(backup)}`);
  assert.ok(overloaded[0].seq < backup[0].seq, 'the overloaded target was tried first');
});

test('an overload after message_start falls back: Claude Code prints the whole answer from the second target', async () => {
  const before = watermark();
  const run = await claude({ name: 'c-midstream', baseUrl: PROXY_URL, model: 'cc-midstream', prompt: 'Say hello.' });
  assertAnswered(run, 'Served by the second target after a 529.');
  const overloaded = mainTurns(before, 'cc-midstream');
  const backup = mainTurns(before, 'cc-backup');
  assert.equal(overloaded.length, 1, `first target: ${summary(overloaded)}`);
  assert.equal(overloaded[0].behavior.reply?.fault?.error_after, 1, summary(overloaded));
  assert.equal(backup.length, 1, `second target: ${summary(backup)}`);
  assert.ok(overloaded[0].seq < backup[0].seq, 'the overloaded target was tried first');
});

test('a stream that stalls mid-answer: Claude Code sends the turn again and that retry is served whole elsewhere', async () => {
  // Claude Code, on an error event after content, sends the same turn again without streaming
  // ("Error streaming, falling back to non-streaming mode"); its retries setting plays no part.
  // The session moved off the stalled target before that error was written, so the retry goes
  // to the second target, never back into the stall (RESILIENCE.md §11).
  const before = watermark();
  const run = await claude({ name: 'c-stall', baseUrl: PROXY_URL, model: 'cc-stalling', prompt: 'Say hello.' });
  assertAnswered(run, 'Served whole by the second target after a stall.');
  const stalled = mainTurns(before, 'cc-stall');
  const backup = mainTurns(before, 'gpt-stall-backup');
  assert.equal(stalled.length, 1, `the stalled target once: ${summary(stalled)}`);
  assert.equal(stalled[0].stream, true, summary(stalled));
  assert.equal(stalled[0].behavior.reply?.fault?.stall_after, 4, summary(stalled));
  assert.equal(backup.length, 1, `the retry, on the second target: ${summary(backup)}`);
  assert.equal(backup[0].stream, false, 'Claude Code retried without streaming');
  assert.ok(stalled[0].seq < backup[0].seq, 'the stall came first');
});

test("Claude Code's own model names are routed by an alias", async () => {
  assert.ok(
    ALIAS_URL,
    `switchyard with [[aliases]] did not start:\n${ALIAS_LOG ? readFileSync(ALIAS_LOG, 'utf8') : ''}`,
  );
  const before = watermark();
  // No ANTHROPIC_MODEL: Claude Code asks for its default claude-* models.
  const run = await claude({ name: 'd-alias', baseUrl: ALIAS_URL, prompt: 'Say hello.' });
  assertAnswered(run, 'Routed by an alias.');
  assert.equal(mainTurns(before, 'cc-alias').length, 1, summary(since(before)));
});

/** Values that differ between two runs of the same prompt: session and user ids. */
const PER_RUN = [
  [/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>'],
  [/\b[0-9a-f]{64}\b/g, '<hex64>'],
];

function normalise(text) {
  return PER_RUN.reduce((out, [pattern, placeholder]) => out.replace(pattern, placeholder), text);
}

/** The first place two strings differ, with some context, for a readable failure. */
function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  const at = Math.max(0, i - 80);
  return `at byte ${i}:\n  direct:  …${a.slice(at, i + 80)}…\n  proxied: …${b.slice(at, i + 80)}…`;
}

test('what Claude Code sends reaches the Anthropic upstream unchanged but for model', async () => {
  // The same prompt, HOME and working directory twice: straight to the mock, then through
  // Switchyard. Claude Code names the model `claude-passthrough` both times (a combo in the
  // proxy), so its two requests differ only in per-run ids.
  const prompt = 'Say hello for the passthrough check.';
  const beforeDirect = watermark();
  const direct = await claude({ name: 'e-passthrough', baseUrl: MOCK_URL, apiKey: 'sk-ant-direct', model: 'claude-passthrough', prompt });
  assertAnswered(direct, 'Passthrough answer.');
  const beforeProxied = watermark();
  const proxied = await claude({ name: 'e-passthrough', baseUrl: PROXY_URL, model: 'claude-passthrough', prompt });
  assertAnswered(proxied, 'Passthrough answer.');

  const [sent] = mainTurns(beforeDirect, 'claude-passthrough');
  const [received] = mainTurns(beforeProxied, 'cc-pass');
  assert.ok(sent && received, summary(since(beforeDirect)));
  assertWorthComparing(sent);
  assertForwardedUnchanged(sent, received, 'cc-pass');
});

/**
 * What makes a passthrough comparison worth having: `sent` (Claude Code's main turn straight to
 * the mock) carries the fields a re-encoding proxy would drop or refuse.
 */
function assertWorthComparing(sent) {
  const body = sent.body;
  for (const field of ['thinking', 'context_management', 'output_config', 'metadata']) {
    assert.ok(field in body, `Claude Code no longer sends ${field}; revisit this case`);
  }
  assert.ok(
    body.messages.some((m) => m.role === 'system'),
    'Claude Code no longer sends a mid-conversation system message; revisit this case',
  );
  assert.ok(sent.headers['anthropic-beta'], 'Claude Code sent no anthropic-beta header');
}

/**
 * `received` (a main turn through Switchyard, upstream model `model`) is `sent` (the same turn
 * straight to the mock) but for `model`: as JSON after the per-run ids are blanked, then byte for
 * byte (the proxy rewrote `model` in place and touched nothing else), with the same
 * anthropic-beta, anthropic-version and query string.
 */
function assertForwardedUnchanged(sent, received, model) {
  const strip = (record) => {
    const { model: _, ...rest } = JSON.parse(normalise(record.raw_body));
    return rest;
  };
  assert.deepEqual(strip(received), strip(sent));
  assert.equal(received.body.model, model);

  const rewritten = normalise(received.raw_body).replace(`"model":"${model}"`, `"model":"${sent.body.model}"`);
  const original = normalise(sent.raw_body);
  assert.ok(rewritten === original, `the upstream body differs ${firstDifference(original, rewritten)}`);

  for (const header of ['anthropic-beta', 'anthropic-version']) {
    assert.equal(received.headers[header], sent.headers[header], `header ${header}`);
  }
  assert.equal(received.query, sent.query, 'the query string (?beta=true)');
}

test('two conversations of three turns each (--continue) keep to one key each of a two-key round robin', async () => {
  // Interleaved, as two agents in two terminals run: three turns of each conversation,
  // `--continue` after the first, and not in strict alternation (which would keep each on one
  // key even turn by turn). Every turn names its session (metadata.user_id); round robin
  // spreads the new sessions over the two keys and each later turn goes where its first did.
  const before = watermark();
  const conversations = ['f-session-1', 'f-session-2'].map((name) => ({ name, dirs: freshDirs(name), marker: `Conversation ${name} begins.`, turns: 0 }));
  for (const c of [0, 0, 1, 0, 1, 1].map((i) => conversations[i])) {
    const first = c.turns === 0;
    c.turns += 1;
    const prompt = first ? c.marker : `Turn ${c.turns}: go on.`;
    const run = await claude({ dirs: c.dirs, baseUrl: PROXY_URL, model: 'cc-session', prompt, args: first ? [] : ['--continue'] });
    assertAnswered(run, 'Session turn answered.');
    c.session ??= run.json.session_id;
    assert.equal(run.json.session_id, c.session, `--continue went on with the conversation\n${explain(run)}`);
  }
  const turns = mainTurns(before, 'cc-session');
  for (const c of conversations) {
    const mine = turns.filter((r) => r.raw_body.includes(c.marker));
    const named = mine.map((r) => r.headers['x-claude-code-session-id'] ?? JSON.parse(r.body.metadata?.user_id ?? '{}').session_id);
    assert.ok(named.every((id) => id === c.session), `${c.name} named its session ${c.session} (X-Claude-Code-Session-Id or metadata.user_id): ${JSON.stringify(named)}`);
  }
  assertOneKeyPerSession(turns, conversations.map((c) => c.marker), 3);
});

// g. Keep your subscription (issue 28). Claude Code logged in as a Max subscriber: its OAuth
// login in the throwaway HOME, no API key, Switchyard's key beside the login in
// `x-switchyard-key`. The combo `claude-subscription` (tests/clients/run) tries the subscription
// (a `client` credential: the CLI's own login, passed through) and then an API key. The three
// cases run in order: the third waits for the reset the second one's limit named.

/** The subscriber's login, made up for this run: Claude Code sends its access token. */
const LOGIN = {
  accessToken: `sk-ant-oat01-${randomBytes(32).toString('base64url')}`,
  refreshToken: `sk-ant-ort01-${randomBytes(32).toString('base64url')}`,
};

const SUBSCRIPTION_TEXT = 'Answered by the Claude subscription.';
const API_KEY_TEXT = "Answered by the API key after the subscription's limit.";

/**
 * A fresh HOME and working directory of the case `name`, logged in as `claude /login` leaves a
 * Max subscriber: `.claude/.credentials.json` with the OAuth tokens (expiring in a year, so
 * Claude Code never tries to refresh them) and `.claude.json` past onboarding.
 */
function subscriberDirs(name) {
  const dirs = freshDirs(name);
  mkdirSync(path.join(dirs.home, '.claude'));
  const claudeAiOauth = {
    ...LOGIN,
    expiresAt: Date.now() + 365 * 24 * 3600 * 1000,
    scopes: ['user:inference', 'user:profile'],
    subscriptionType: 'max',
  };
  writeFileSync(path.join(dirs.home, '.claude', '.credentials.json'), JSON.stringify({ claudeAiOauth }));
  writeFileSync(path.join(dirs.home, '.claude.json'), JSON.stringify({ hasCompletedOnboarding: true }));
  return dirs;
}

/** Claude Code as a subscriber, on the combo `claude-subscription` at `baseUrl`. */
function subscriber({ dirs, baseUrl, prompt }) {
  return claude({
    dirs,
    baseUrl,
    apiKey: null,
    model: 'claude-subscription',
    prompt,
    env: { ANTHROPIC_CUSTOM_HEADERS: `x-switchyard-key: ${PROXY_KEY}` },
  });
}

/** The subscription instance is up, or the case fails with why it is not. */
function assertSubscriptionsServe() {
  assert.ok(
    SUB_URL,
    `switchyard with the subscription config did not start:\n${SUB_LOG ? readFileSync(SUB_LOG, 'utf8') : ''}`,
  );
}

/** The login, as a record names it (see common.mjs digest). */
const LOGIN_DIGEST = digest(LOGIN.accessToken);

/** When the limit of the second case (g 2) resets, in Unix milliseconds, from the header the mock sent. */
let subscriptionResetsAt = null;

test("a subscriber's Claude Code reaches its subscription with its own login and the body it sends straight", async () => {
  assertSubscriptionsServe();
  const prompt = 'Say hello for the subscription check.';
  const beforeDirect = watermark();
  const direct = await subscriber({ dirs: subscriberDirs('g-subscriber'), baseUrl: MOCK_URL, prompt });
  assertAnswered(direct, SUBSCRIPTION_TEXT);
  const beforeProxied = watermark();
  const proxied = await subscriber({ dirs: subscriberDirs('g-subscriber'), baseUrl: SUB_URL, prompt });
  assertAnswered(proxied, SUBSCRIPTION_TEXT);

  const [sent] = mainTurns(beforeDirect, 'claude-subscription');
  const [received] = mainTurns(beforeProxied, 'cc-sub');
  assert.ok(sent && received, summary(since(beforeDirect)));
  // What makes this a subscriber's request: Claude Code's login and its OAuth beta.
  assert.equal(sent.credentials.authorization, LOGIN_DIGEST, 'Claude Code sent its own login, straight');
  assert.match(sent.headers['anthropic-beta'] ?? '', /oauth-/, 'Claude Code sent no oauth beta');

  // The subscription's upstream got the CLI's own login and no other credential: not
  // Switchyard's key, not an API key.
  assert.deepEqual(received.credentials, { authorization: LOGIN_DIGEST }, `credentials ${JSON.stringify(received.headers)}`);
  assertForwardedUnchanged(sent, received, 'cc-sub');
});

test("a subscriber's Claude Code is answered by the API key when the subscription answers its limit, and the key never sees the login", async () => {
  assertSubscriptionsServe();
  const before = watermark();
  const run = await subscriber({ dirs: subscriberDirs('g-limit'), baseUrl: SUB_URL, prompt: 'Spend the subscription.' });
  assertAnswered(run, API_KEY_TEXT);

  const limited = mainTurns(before, 'cc-sub');
  const served = mainTurns(before, 'cc-sub-key');
  assert.equal(limited.length, 1, `the subscription: ${summary(limited)}`);
  assert.equal(limited[0].behavior.status?.code, 429, `the subscription answered its limit: ${summary(limited)}`);
  assert.equal(limited[0].credentials.authorization, LOGIN_DIGEST, 'with the login');
  assert.equal(served.length, 1, `the API key: ${summary(served)}`);
  assert.ok(limited[0].seq < served[0].seq, 'the subscription was tried first');

  // Every request the API key's model ever got (side requests included): its own key only,
  // and the login nowhere, neither in a header nor in the body.
  const keyed = records().filter((r) => r.model === 'cc-sub-key');
  for (const r of keyed) {
    assert.deepEqual(r.credentials, { 'x-api-key': digest(SUB_KEY) }, `attempt ${r.seq}: credentials`);
    const seen = JSON.stringify(r.headers) + (r.raw_body ?? r.raw_body_base64);
    for (const secret of [LOGIN.accessToken, LOGIN.refreshToken]) {
      assert.ok(!seen.includes(secret), `attempt ${r.seq} to the API key carries the login`);
    }
  }

  const reset = limited[0].behavior.status.headers['anthropic-ratelimit-unified-reset'];
  assert.match(reset, /^\d+$/, 'the mock sent the reset as Unix seconds');
  subscriptionResetsAt = Number(reset) * 1000;
  const ahead = subscriptionResetsAt - Date.now();
  assert.ok(ahead < 10_000, `the reset is ${ahead} ms ahead, not about 3 s`);
});

test("a subscriber's Claude Code is served by the subscription again once its reset has passed", async () => {
  assertSubscriptionsServe();
  assert.ok(subscriptionResetsAt, 'the limit case before this one did not get as far as the reset');
  await untilPast(subscriptionResetsAt);
  const before = watermark();
  const run = await subscriber({ dirs: subscriberDirs('g-reset'), baseUrl: SUB_URL, prompt: 'Say hello after the reset.' });
  assertAnswered(run, SUBSCRIPTION_TEXT);
  const turns = mainTurns(before, 'cc-sub');
  assert.equal(turns.length, 1, summary(since(before)));
  assert.deepEqual(turns[0].credentials, { authorization: LOGIN_DIGEST }, 'with the login');
  assert.equal(mainTurns(before, 'cc-sub-key').length, 0, `the API key was not needed: ${summary(since(before))}`);
});

// h. `auto` (issue 30): Claude Code with ANTHROPIC_MODEL=auto and ANTHROPIC_SMALL_FAST_MODEL=auto
// on the instance whose pool is three models at the mock (tests/clients/run). Its main turn
// carries tools, so the model known to have none is skipped and the Anthropic one with tools
// wins; its side requests (no tools) may go to any of the three.

test('model = auto: Claude Code is answered by the best model with tools, and the request log says why', async () => {
  assertAutoServes();
  const startedAt = Date.now();
  const before = watermark();
  const run = await claude({ name: 'h-auto', baseUrl: AUTO_URL, model: 'auto', prompt: 'Say hello for the auto check.' });
  assertAnswered(run, AUTO.text);
  const [, winnerModel] = AUTO.winner.split('/');
  const turns = mainTurns(before, winnerModel);
  assert.equal(turns.length, 1, `one main turn at ${AUTO.winner}\n${summary(since(before))}`);
  assert.equal(turns[0].dialect, 'anthropic');
  for (const other of [AUTO.withoutTools, AUTO.second]) {
    const model = other.split('/')[1];
    assert.equal(mainTurns(before, model).length, 0, `no main turn reached ${other}\n${summary(since(before))}`);
  }
  const outside = since(before).filter((r) => r.model === AUTO.outside.split('/')[1]);
  assert.equal(outside.length, 0, `nothing reached ${AUTO.outside}, outside the allow list\n${summary(outside)}`);
  await assertAutoChose(startedAt, 'anthropic');
});

// i. A host with both APIs (issue 50): a `preset = "moonshot"` provider with an OpenAI
// `base_url` and an `anthropic_base_url`, both pointed at the mock, on the instance of its own
// (tests/clients/run). Claude Code's requests to its model go to the Anthropic endpoint as sent;
// an OpenAI client's go to the OpenAI endpoint, also as sent.

/** The instance with the two-dialect provider; empty when it did not start. */
const DUAL_URL = process.env.CLIENTS_DUAL_URL ?? '';
const DUAL_LOG = process.env.CLIENTS_DUAL_LOG ?? '';
/** The provider's key. */
const DUAL_KEY = required('CLIENTS_DUAL_KEY');

test("a host with both APIs (moonshot preset): Claude Code's turn reaches its Anthropic endpoint unchanged but for model, an OpenAI client's its OpenAI endpoint untranslated", async () => {
  assert.ok(
    DUAL_URL,
    `switchyard with the two-dialect provider did not start:\n${DUAL_LOG ? readFileSync(DUAL_LOG, 'utf8') : ''}`,
  );
  const text = 'Answered on the Anthropic endpoint of a host with both APIs.';
  // As e: the same prompt, HOME and working directory straight to the mock, then through
  // Switchyard, Claude Code naming the model `claude-dual` both times (a combo of kimi/cc-dual).
  const prompt = 'Say hello for the two-dialect check.';
  const beforeDirect = watermark();
  const direct = await claude({ name: 'i-dual', baseUrl: MOCK_URL, apiKey: 'sk-ant-direct', model: 'claude-dual', prompt });
  assertAnswered(direct, text);
  const beforeProxied = watermark();
  const proxied = await claude({ name: 'i-dual', baseUrl: DUAL_URL, model: 'claude-dual', prompt });
  assertAnswered(proxied, text);

  const [sent] = mainTurns(beforeDirect, 'claude-dual');
  const turns = mainTurns(beforeProxied, 'cc-dual');
  assert.ok(sent, summary(since(beforeDirect)));
  assert.equal(turns.length, 1, `one main turn at the provider: ${summary(since(beforeProxied))}`);
  const [received] = turns;
  assertWorthComparing(sent);
  // Every request of the run (side requests too) went to the Anthropic endpoint, none to Chat.
  const reached = since(beforeProxied).filter((r) => r.model === 'cc-dual');
  assert.deepEqual(
    [...new Set(reached.map((r) => `${r.dialect} ${r.path}`))],
    ['anthropic /v1/messages'],
    `Claude Code's requests at the Anthropic endpoint only: ${summary(reached)}`,
  );
  // The provider's key, as Anthropic takes it, and nothing else.
  assert.deepEqual(received.credentials, { 'x-api-key': digest(DUAL_KEY) }, `credentials ${JSON.stringify(received.headers)}`);
  assertForwardedUnchanged(sent, received, 'cc-dual');

  // An OpenAI client (aider, opencode) on the same model: a Chat request with a field
  // Switchyard does not model (`seed`), written with spacing of its own, so a re-encoded body
  // would show.
  const chat = JSON.stringify(
    {
      model: 'kimi/cc-dual',
      messages: [{ role: 'user', content: 'Say hello from the OpenAI side.' }],
      seed: 7,
      stream: false,
    },
    null,
    1,
  );
  const beforeChat = watermark();
  const response = await fetch(`${DUAL_URL}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${PROXY_KEY}`, 'content-type': 'application/json' },
    body: chat,
  });
  const answer = await response.text();
  assert.equal(response.status, 200, answer);
  assert.equal(
    JSON.parse(answer).choices?.[0]?.message?.content,
    'Answered on the OpenAI endpoint of a host with both APIs.',
    answer,
  );
  const attempts = since(beforeChat);
  assert.equal(attempts.length, 1, summary(attempts));
  const [upstream] = attempts;
  assert.equal(upstream.dialect, 'openai', summary(attempts));
  assert.equal(upstream.path, '/v1/chat/completions', summary(attempts));
  assert.equal(upstream.body.seed, 7, `seed passed through: ${upstream.raw_body}`);
  assert.deepEqual(upstream.credentials, { authorization: digest(DUAL_KEY) }, `credentials ${JSON.stringify(upstream.headers)}`);
  const expected = chat.replace('"model": "kimi/cc-dual"', '"model": "cc-dual"');
  assert.ok(upstream.raw_body === expected, `the Chat body differs ${firstDifference(expected, upstream.raw_body)}`);
});
