// The real Gemini CLI against Switchyard; started by tests/clients/run, which sets the CLIENTS_*
// variables, starts the mock (tests/clients/mock.toml, recording every attempt) and `switchyard
// serve`, and stops them afterwards. Each case runs `gemini -p` in a throwaway working directory
// with a throwaway HOME holding its settings, offline: every connection the CLI (or a Node
// process it starts) makes is logged by netlog.cjs, and each case asserts they all went to
// Switchyard.
//
// Gemini CLI speaks Gemini's API: POST /v1beta/models/{model}:streamGenerateContent?alt=sse,
// the key in x-goog-api-key. Its model names are Switchyard combos (`-m`), or its own names
// routed by an alias (case e).

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { freshDirs, mainTurns, required, runCli, since, summary, watermark } from './common.mjs';

const GEMINI = required('CLIENTS_GEMINI');
/** Switchyard's root: Gemini CLI appends /v1beta. */
const PROXY_URL = required('CLIENTS_PROXY_URL');
const ALIAS_URL = required('CLIENTS_ALIAS_URL');
const MOCK_URL = required('CLIENTS_MOCK_URL');
const PROXY_KEY = required('SWITCHYARD_API_KEY');
const NETLOG = path.join(path.dirname(new URL(import.meta.url).pathname), 'netlog.cjs');

/**
 * `$HOME/.gemini/settings.json`: an API key (no Google sign-in, no discovery of other auth), no
 * telemetry, no usage statistics, no update check.
 */
const SETTINGS = {
  security: { auth: { selectedType: 'gemini-api-key' } },
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
};

/**
 * Runs `gemini -p PROMPT` (with `-m MODEL` when given, and `--yolo` so its tools run without
 * asking) against `base`, and resolves with its exit code, output, directories and the
 * connections it made. `name` reuses the same directories when run twice, so two runs send the
 * same bytes.
 */
async function gemini({ name, model, prompt, base = PROXY_URL, key = PROXY_KEY, yolo = false }) {
  const { home, project } = freshDirs(name);
  mkdirSync(path.join(home, '.gemini'));
  writeFileSync(path.join(home, '.gemini', 'settings.json'), JSON.stringify(SETTINGS, null, 2));
  const netlog = path.join(home, 'net.jsonl');
  const env = {
    PATH: process.env.PATH,
    LANG: 'C.UTF-8',
    HOME: home,
    GEMINI_API_KEY: key,
    GOOGLE_GEMINI_BASE_URL: base,
    // A script's run: no prompt to trust the folder.
    GEMINI_CLI_TRUST_WORKSPACE: 'true',
    NODE_OPTIONS: `--require ${NETLOG}`,
    CLIENTS_NETLOG: netlog,
  };
  const argv = [...(model ? ['-m', model] : []), ...(yolo ? ['--yolo'] : []), '-p', prompt];
  const run = await runCli(GEMINI, argv, { cwd: project, env });
  const connections = existsSync(netlog)
    ? readFileSync(netlog, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l))
    : [];
  return { ...run, home, project, connections, base };
}

/** The run, for an assertion message. */
function explain(run) {
  const how = run.signal ? `killed by ${run.signal}` : `exit ${run.code}`;
  const command = [GEMINI, ...run.argv].map((a) => JSON.stringify(a)).join(' ');
  return `HOME=${run.home} (cd ${run.project} && ${command}): ${how}\n` +
    `--- stdout\n${run.stdout}\n--- stderr\n${run.stderr.slice(-4000)}`;
}

/** Every TCP connection went to `run.base`'s host and port; nothing was looked up or dialled elsewhere. */
function assertOffline(run) {
  const { hostname, port } = new URL(run.base);
  const elsewhere = run.connections.filter(
    (c) => c.kind === 'dns' ? c.host !== hostname && c.host !== 'localhost' : c.kind === 'tcp' && !(c.host === hostname && c.port === Number(port)),
  );
  assert.deepEqual(elsewhere, [], `connections other than to ${run.base}\n${explain(run)}`);
  assert.ok(run.connections.some((c) => c.kind === 'tcp'), `no connection was logged at all\n${explain(run)}`);
}

/** Exit 0, offline, and the printed answer is exactly `text`. */
function assertAnswered(run, text) {
  assert.equal(run.code, 0, `Gemini CLI failed\n${explain(run)}`);
  assert.equal(run.stdout.trim(), text, `not the mock's text\n${explain(run)}`);
  assertOffline(run);
}

test('Gemini CLI gets a plain answer through a Gemini target, its bytes unchanged', async () => {
  // The same prompt in the same directories straight to the mock (as `gemini-pass`, the name it
  // knows) and through Switchyard (the combo `gemini-passthrough`, upstream model `ge-pass`).
  const direct = watermark();
  const straight = await gemini({ name: 'a-gemini', model: 'gemini-pass', prompt: 'Say hello.', base: MOCK_URL, key: 'direct-key' });
  assertAnswered(straight, 'Plain answer from the Gemini upstream.');
  const [expected] = mainTurns(direct, 'gemini-pass');
  assert.ok(expected, `the direct run's main turn\n${summary(since(direct))}`);

  const before = watermark();
  const run = await gemini({ name: 'a-gemini', model: 'gemini-passthrough', prompt: 'Say hello.' });
  assertAnswered(run, 'Plain answer from the Gemini upstream.');
  const turns = mainTurns(before, 'ge-pass');
  assert.equal(turns.length, 1, `one main turn\n${summary(since(before))}\n${explain(run)}`);
  const [turn] = turns;
  assert.equal(turn.dialect, 'gemini');
  assert.equal(turn.path, '/v1beta/models/ge-pass:streamGenerateContent');
  assert.equal(turn.query, 'alt=sse');
  assert.equal(turn.raw_body, expected.raw_body, 'the upstream got other bytes than the CLI sends, model aside');
});

test('Gemini CLI gets a plain answer through an Anthropic target', async () => {
  const before = watermark();
  const run = await gemini({ name: 'a-anthropic', model: 'gemini-anthropic', prompt: 'Say hello.' });
  assertAnswered(run, 'Gemini CLI answer from the Anthropic upstream.');
  const turns = mainTurns(before, 'gm-anthropic');
  assert.equal(turns.length, 1, `one main turn\n${summary(since(before))}\n${explain(run)}`);
  assert.equal(turns[0].dialect, 'anthropic');
  assert.equal(turns[0].path, '/v1/messages');
  const system = turns[0].body.system.map((b) => b.text).join('');
  assert.match(system, /CLI agent/, 'the system instruction reached the upstream');
});

test('Gemini CLI gets a plain answer through an OpenAI target', async () => {
  const before = watermark();
  const run = await gemini({ name: 'a-openai', model: 'gemini-openai', prompt: 'Say hello.' });
  assertAnswered(run, 'Gemini CLI answer from the OpenAI upstream.');
  const turns = mainTurns(before, 'gm-openai');
  assert.equal(turns.length, 1, `one main turn\n${summary(since(before))}\n${explain(run)}`);
  assert.equal(turns[0].dialect, 'openai');
  assert.equal(turns[0].path, '/v1/chat/completions');
});

test('Gemini CLI runs the shell command the upstream asks for and sends its output back', async () => {
  const before = watermark();
  const run = await gemini({ name: 'b-tool', model: 'gemini-tool', prompt: 'Run the check command.', yolo: true });
  assertAnswered(run, 'Gemini CLI ran the command and saw the marker.');
  const marker = path.join(run.project, 'tool-ok.txt');
  assert.ok(existsSync(marker), `the command did not run in the project\n${explain(run)}`);
  assert.equal(readFileSync(marker, 'utf8').trim(), 'switchyard-tool-ok');

  const turns = mainTurns(before, 'gm-tool');
  assert.equal(turns.length, 2, `a tool call, then its result\n${summary(turns)}`);
  assert.equal(turns[0].behavior.reply?.tool_call?.name, 'run_shell_command', summary(turns));
  // The result answers the call by the id Switchyard gave it, so Anthropic pairs them.
  const messages = turns[1].body.messages;
  const call = messages.at(-2).content.find((b) => b.type === 'tool_use');
  const result = messages.at(-1).content.find((b) => b.type === 'tool_result');
  assert.ok(call && result, `a tool_use and its tool_result\n${JSON.stringify(messages.slice(-2))}`);
  assert.equal(result.tool_use_id, call.id);
  const output = typeof result.content === 'string' ? result.content : result.content.map((p) => p.text ?? '').join('');
  assert.match(output, /switchyard-tool-ok/);
});

test('Gemini CLI is served by the second target when the first answers 503 before any event', async () => {
  const before = watermark();
  const run = await gemini({ name: 'c-fallback', model: 'gemini-fallback', prompt: 'Say hello.' });
  assertAnswered(run, 'Gemini CLI served by the second target after a 503.');
  const down = mainTurns(before, 'gm-down');
  const backup = mainTurns(before, 'gm-backup');
  assert.equal(down.length, 1, `one attempt at the first target\n${summary(since(before))}`);
  assert.equal(backup.length, 1, `one at the second\n${summary(since(before))}`);
  assert.equal(down[0].dialect, 'gemini');
  assert.equal(backup[0].dialect, 'anthropic');
});

test("Gemini CLI's own model names are routed by an alias", async () => {
  const before = watermark();
  // No `-m`: the CLI picks its own models (its router's classifier, then the main turn's).
  const run = await gemini({ name: 'd-alias', prompt: 'Say hello.', base: ALIAS_URL });
  assertAnswered(run, 'Routed by an alias.');
  const turns = mainTurns(before, 'gm-alias');
  assert.ok(turns.length >= 1, `the main turn went to the alias's target\n${summary(since(before))}`);
  const names = since(before).map((r) => r.model);
  assert.ok(names.every((n) => n === 'gm-alias'), `every request routed by the alias: ${names}`);
  // The classifier got the JSON it asked for: one request, no retries.
  assert.equal(names.length, 2, `the classifier once, then the main turn\n${summary(since(before))}`);
});
