// The real Codex CLI against Switchyard; started by tests/clients/run, which sets the CLIENTS_*
// variables, starts the mock (tests/clients/mock.toml, recording every attempt) and `switchyard
// serve`, and stops them afterwards. Each case runs `codex exec --json` in a throwaway working
// directory with a throwaway HOME holding its config, and checks what it printed, what it did
// to the working directory and what reached the mock.
//
// Codex speaks only the Responses API (POST /v1/responses, streamed). Its model names are
// Switchyard combos; a small model catalogue in the throwaway HOME tells Codex what they are,
// so it offers its freeform `apply_patch` tool (it does not for a model it does not know) and
// does not warn about missing model metadata.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { assertOneKeyPerSession, freshDirs, mainTurns, required, runCli, since, summary, watermark } from './common.mjs';

const CODEX = required('CLIENTS_CODEX');
/** Switchyard's OpenAI-style base, …/v1: Codex appends /responses. */
const PROXY_URL = required('CLIENTS_PROXY_URL');
const PROXY_KEY = required('SWITCHYARD_API_KEY');
const SWITCHYARD_LOG = process.env.CLIENTS_SWITCHYARD_LOG ?? '';

/** The combos Codex is pointed at (tests/clients/run's config). */
const MODELS = ['codex-chat', 'codex-anthropic', 'codex-tool', 'codex-patch', 'codex-fallback', 'codex-session'];

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

/** `$HOME/.codex/config.toml`: Switchyard as the only provider, no retries of Codex's own. */
function codexConfig(home, model) {
  const catalogue = path.join(home, '.codex', 'models.json');
  writeFileSync(catalogue, JSON.stringify({ models: MODELS.map(catalogueEntry) }, null, 2));
  return [
    `model = ${JSON.stringify(model)}`,
    'model_provider = "switchyard"',
    `model_catalog_json = ${JSON.stringify(catalogue)}`,
    '',
    '[model_providers.switchyard]',
    'name = "Switchyard"',
    `base_url = ${JSON.stringify(PROXY_URL)}`,
    'env_key = "SWITCHYARD_KEY"',
    'wire_api = "responses"',
    'request_max_retries = 0',
    'stream_max_retries = 0',
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
 */
function codex({ name, dirs, model, prompt, resume = false }) {
  const { home, project } = dirs ?? freshDirs(name);
  if (!resume) {
    mkdirSync(path.join(home, '.codex'));
    writeFileSync(path.join(home, '.codex', 'config.toml'), codexConfig(home, model));
  }
  const env = {
    PATH: process.env.PATH,
    LANG: 'C.UTF-8',
    HOME: home,
    SWITCHYARD_KEY: PROXY_KEY,
  };
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
  return runCli(CODEX, argv, { cwd: project, env, onStdout }).then((run) => ({ ...run, events, project, home }));
}

/** The last lines of Switchyard's log, for a failing case. */
function switchyardLog() {
  if (!SWITCHYARD_LOG || !existsSync(SWITCHYARD_LOG)) return '';
  const lines = readFileSync(SWITCHYARD_LOG, 'utf8').trimEnd().split('\n');
  return `\n--- switchyard log (last ${Math.min(lines.length, 40)} lines)\n${lines.slice(-40).join('\n')}`;
}

/** The run, for an assertion message: what a failing case must show. */
function explain(run) {
  const how = run.signal ? `killed by ${run.signal}` : `exit ${run.code}`;
  const command = [CODEX, ...run.argv].map((a) => JSON.stringify(a)).join(' ');
  return `HOME=${run.home} (cd ${run.project} && ${command}): ${how}\n` +
    `--- stdout\n${run.stdout}\n--- stderr\n${run.stderr.slice(-4000)}${switchyardLog()}`;
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
