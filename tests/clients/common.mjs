// What both real-client suites share: their settings from tests/clients/run, a CLI run in a
// throwaway HOME and working directory, and the mock's record of every attempt.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
