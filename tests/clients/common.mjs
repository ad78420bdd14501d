// What both real-client suites share: their settings from tests/clients/run, a CLI run in a
// throwaway HOME and working directory, and the mock's record of every attempt.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';

/** A variable tests/clients/run sets; a clear error when the file was run some other way. */
export function required(name) {
  const value = process.env[name];
  if (value === undefined) {
    throw new Error(`${name} is not set: run this file through tests/clients/run`);
  }
  return value;
}

const WORK = required('CLIENTS_WORK');
const RECORDS = required('CLIENTS_RECORDS');

/** Generous: a cold CLI start and a few requests take seconds, a hang must still end. */
const CLI_TIMEOUT_MS = 180_000;

/** The CLIs running now, so an interrupted run (the runner's TERM) takes them down too. */
const running = new Set();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    for (const child of running) child.kill('SIGTERM');
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
}

/** An empty HOME and working directory of the case `name`. */
export function freshDirs(name) {
  const home = path.join(WORK, 'homes', name);
  const project = path.join(WORK, 'projects', name);
  for (const dir of [home, project]) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
  }
  return { home, project };
}

/**
 * Runs `cli argv` in `cwd` with exactly `env` and no stdin, and resolves with its exit code,
 * signal and output once it ends (killed after CLI_TIMEOUT_MS). `onStdout(chunk, child)` sees
 * the output as it comes, so a caller can stop a CLI that would otherwise wait for ever.
 */
export function runCli(cli, argv, { cwd, env, onStdout = () => {} }) {
  return new Promise((resolve, reject) => {
    const child = spawn(cli, argv, {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: CLI_TIMEOUT_MS,
    });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      stdout += chunk;
      onStdout(chunk, child);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      running.delete(child);
      resolve({ argv, code, signal, stdout, stderr });
    });
  });
}

/** Every attempt the mock recorded, in arrival order (the files are written before answering). */
export function records() {
  return readdirSync(RECORDS)
    .filter((name) => name.endsWith('.json') && !name.startsWith('.'))
    .sort()
    .map((name) => JSON.parse(readFileSync(path.join(RECORDS, name), 'utf8')));
}

/** The highest sequence number so far, so a case reads only its own attempts. */
export function watermark() {
  return records().reduce((max, r) => Math.max(max, r.seq), -1);
}

/** Every attempt since `after` (a watermark). */
export function since(after) {
  return records().filter((r) => r.seq > after);
}

/** A CLI's main-turn requests as they reached the upstream (they offer tools) since `after`. */
export function mainTurns(after, model) {
  return since(after).filter(
    (r) => r.model === model && Array.isArray(r.body?.tools) && r.body.tools.length > 0,
  );
}

/**
 * Sessions on a two-key provider (the `duo` of tests/clients/run): `turns` are main-turn
 * records, `markers` one text per session that only its turns carry (its first prompt, which
 * every later turn repeats as history). Asserts that each session reached the upstream `count`
 * times, on one key every time, and that the sessions between them used both keys.
 */
export function assertOneKeyPerSession(turns, markers, count) {
  const keys = markers.map((marker) => turns.filter((r) => r.raw_body?.includes(marker)).map((r) => r.key));
  const seen = JSON.stringify(turns.map((r) => ({ seq: r.seq, key: r.key, session: markers.findIndex((m) => r.raw_body?.includes(m)) })));
  markers.forEach((marker, i) => {
    assert.equal(keys[i].length, count, `${marker}: ${count} turns reached the upstream\n${seen}`);
    assert.ok(keys[i][0], `${marker}: the upstream saw a key\n${seen}`);
    assert.ok(keys[i].every((key) => key === keys[i][0]), `${marker} kept to one key\n${seen}`);
  });
  assert.equal(new Set(keys.map((k) => k[0])).size, 2, `the two sessions used both keys\n${seen}`);
}

/** Attempts, for an assertion message. */
export function summary(list) {
  return JSON.stringify(list.map((r) => ({ seq: r.seq, model: r.model, path: r.path, behavior: r.behavior })));
}

/**
 * A credential as a record names it (`key`, and each of `credentials`): the first 12 hex digits
 * of its SHA-256 (crates/switchyard-testkit/src/record.rs).
 */
export function digest(secret) {
  return createHash('sha256').update(secret).digest('hex').slice(0, 12);
}

/**
 * Resolves once the clock is past `instant` (Unix milliseconds), such as the reset an upstream
 * named: polls the clock, the condition itself. An instant more than a minute ahead fails at
 * once: no case waits that long, so it can only be a wrong reset.
 */
export async function untilPast(instant) {
  const ahead = instant - Date.now();
  assert.ok(ahead < 60_000, `${new Date(instant).toISOString()} is ${ahead} ms ahead`);
  while (Date.now() <= instant) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(100, instant - Date.now() + 1)));
  }
}

// `auto` (issue 30): claude-code.test.mjs h and codex.test.mjs g, on the instance whose pool is
// tests/clients/run's switchyard-auto.toml.

/** The instance with `auto`'s pool; empty when it did not start. */
export const AUTO_URL = process.env.CLIENTS_AUTO_URL ?? '';
/** Its log (switchyard-auto.log). */
export const AUTO_LOG = process.env.CLIENTS_AUTO_LOG ?? '';
const AUTO_TOKEN_FILE = process.env.CLIENTS_AUTO_TOKEN_FILE ?? '';

/** The pool's models as `provider/model` (tests/clients/run), and what the mock says of them. */
export const AUTO = {
  /** Anthropic, tools and reasoning: wins every tool-carrying turn. */
  winner: 'auto-an/auto-tools',
  /** Anthropic, `tools = false`: skipped for a turn with tools. */
  withoutTools: 'auto-mini/auto-no-tools',
  /** OpenAI Chat, tools, the winner's price, a smaller window: second. */
  second: 'auto-oa/auto-chat',
  /** Configured, better than all, but not in `[settings.auto] allow`. */
  outside: 'auto-outside/auto-outside',
  /** The winner's main-turn text (tests/clients/mock.toml). */
  text: 'Answered by the model auto chose.',
  /** The uncached input tokens the winner's main-turn answer reports (mock.toml). */
  markerInput: 4321,
};

/** The weights of the plain `auto` preset (switchyard_core::routing::auto::Weights::BALANCED). */
const AUTO_WEIGHTS = { health: 3, headroom: 1, affinity: 2, latency: 1, price: 1, fit: 2, capability: 1 };

/** The auto instance is up, or the case fails with why it is not. */
export function assertAutoServes() {
  const log = AUTO_LOG && existsSync(AUTO_LOG) ? readFileSync(AUTO_LOG, 'utf8') : '';
  assert.ok(AUTO_URL, `switchyard with auto's pool did not start:\n${log}`);
}

/**
 * The request log of the instance at `root` (no /v1), newest first, through its management API
 * with the token in `tokenFile` (its data directory's management-token).
 */
export async function requestLog(root, tokenFile) {
  const token = readFileSync(tokenFile, 'utf8').trim();
  const response = await fetch(`${root}/api/requests?limit=200`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const text = await response.text();
  assert.equal(response.status, 200, `GET /api/requests: ${text}`);
  return JSON.parse(text);
}

/** The auto instance's request log, newest first. */
function autoRequestLog() {
  return requestLog(AUTO_URL, AUTO_TOKEN_FILE);
}

/** A request-log entry, for an assertion message. */
export function entrySummary(entry) {
  return JSON.stringify({
    at: entry.at,
    dialect: entry.dialect,
    model: entry.model,
    served_by: entry.served_by,
    status: entry.status,
    usage: entry.usage,
    trace: entry.trace,
  });
}

/**
 * Reads the auto instance's request log since `startedAt` (Unix ms) and asserts what `auto`
 * decided for the client's main turn: the one entry served by the winner whose trace has
 * `ranked` lines and whose usage is the mock's main-turn marker, from a client that spoke
 * `dialect`. Its ranked lines are the winner's (rank 1) and the Chat model's (rank 2), best score
 * first, each with all seven factors with values in [0, 1], the `auto` preset's weights and a
 * score that is their weighted mean; rank 1 alone has its margin over rank 2 and the decision
 * `auto <winner> score=<score> margin=<margin> next=<rank 2>`; the tool-less model is skipped as
 * `auto_no_tools` and neither ranked nor tried; the winner served at the first attempt; the model
 * outside the allow list is in no entry of the run. Resolves with the main turn's entry.
 */
export async function assertAutoChose(startedAt, dialect) {
  const log = await autoRequestLog();
  const mine = log.filter((e) => e.at >= startedAt);
  const all = mine.map(entrySummary).join('\n');
  const isRanked = (t) => t.event === 'ranked';
  const main = mine.filter(
    (e) => e.served_by === AUTO.winner && e.trace.some(isRanked) && e.usage?.uncached_input === AUTO.markerInput,
  );
  assert.equal(main.length, 1, `one main turn served by ${AUTO.winner}, ranked, with the mock's usage; the log since the case began:\n${all}`);
  const [entry] = main;
  const seen = entrySummary(entry);
  assert.equal(entry.model, 'auto', seen);
  assert.equal(entry.dialect, dialect, seen);
  assert.equal(entry.status, 200, seen);

  // The pool is three models; the tool-less one is left out, so two are ranked.
  const ranked = entry.trace.filter(isRanked);
  assert.deepEqual(ranked.map((t) => t.target), [AUTO.winner, AUTO.second], `the winner first, the Chat model second: ${seen}`);
  ranked.forEach((line, i) => {
    assert.equal(line.rank, i + 1, `ranks in order: ${seen}`);
    assert.equal(line.preset, 'auto', seen);
    assert.deepEqual(line.factors.map((f) => f.name), Object.keys(AUTO_WEIGHTS), `the seven factors of ${line.target}: ${seen}`);
    let weighted = 0;
    let total = 0;
    for (const factor of line.factors) {
      assert.match(factor.value, /^[01]\.\d{3}$/, `${line.target} ${factor.name}: ${seen}`);
      const value = Number(factor.value);
      assert.ok(value >= 0 && value <= 1, `${line.target} ${factor.name} in [0, 1]: ${seen}`);
      assert.equal(Number(factor.weight), AUTO_WEIGHTS[factor.name], `${line.target} ${factor.name}'s weight is the auto preset's: ${seen}`);
      weighted += value * Number(factor.weight);
      total += Number(factor.weight);
    }
    assert.match(line.score, /^[01]\.\d{3}$/, seen);
    assert.ok(Math.abs(Number(line.score) - weighted / total) <= 0.002, `${line.target}'s score ${line.score} is the weighted mean of its factors (${(weighted / total).toFixed(4)}): ${seen}`);
    if (i > 0) {
      assert.ok(Number(line.score) <= Number(ranked[i - 1].score), `best first: ${seen}`);
      assert.equal(line.margin, undefined, `only rank 1 has a margin: ${seen}`);
      assert.equal(line.decision, undefined, `only rank 1 has the decision: ${seen}`);
    }
  });
  const [first] = ranked;
  assert.equal(first.target, AUTO.winner, `rank 1 is the target that served: ${seen}`);
  assert.ok(first.credential, `rank 1 names its credential: ${seen}`);
  assert.equal(typeof first.decision, 'string', `rank 1 has the decision: ${seen}`);
  assert.ok(first.decision.startsWith('auto '), `the decision names the plain auto preset first: ${first.decision}`);
  assert.ok(first.decision.startsWith(`auto ${AUTO.winner} score=${first.score}`), `the decision names the winner and its score: ${first.decision}`);
  assert.match(first.margin ?? '', /^\d\.\d{3}$/, `rank 1 has its margin: ${seen}`);
  const margin = Number(first.score) - Number(ranked[1].score);
  assert.ok(Number(first.margin) > 0, `the winner leads: ${seen}`);
  assert.ok(Math.abs(Number(first.margin) - margin) <= 0.0015, `the margin is the lead over rank 2: ${seen}`);
  assert.equal(first.decision, `auto ${AUTO.winner} score=${first.score} margin=${first.margin} next=${AUTO.second}`, `the decision: ${seen}`);

  const skipped = entry.trace.filter((t) => t.target === AUTO.withoutTools);
  assert.ok(
    skipped.some((t) => t.event === 'skipped' && t.reason === 'auto_no_tools'),
    `${AUTO.withoutTools} is skipped as auto_no_tools on the main turn: ${seen}`,
  );
  assert.ok(!skipped.some((t) => t.event !== 'skipped'), `${AUTO.withoutTools} was neither ranked nor tried: ${seen}`);
  const attempts = entry.trace.filter((t) => t.event === 'attempted');
  assert.deepEqual(
    attempts.map((t) => [t.target, t.outcome]),
    [[AUTO.winner, 'success']],
    `the winner served at the first attempt: ${seen}`,
  );
  const outside = mine.filter((e) => JSON.stringify(e).includes(AUTO.outside.split('/')[0]));
  assert.equal(outside.length, 0, `${AUTO.outside} is not in the allow list, yet:\n${outside.map(entrySummary).join('\n')}`);
  return entry;
}
