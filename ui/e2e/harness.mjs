// The real thing for browser tests: the mock upstream binary, `switchyard serve --ui` on a
// free port with a throwaway data directory, and Debian's Chromium through playwright-core.
// Nothing here sleeps to synchronise: processes are awaited on their "listening" line and
// state is polled with a deadline.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const uiDir = path.resolve(here, '..');
export const repoDir = path.resolve(uiDir, '..');
export const artifactsDir = path.join(here, 'artifacts');

const targetDir = process.env.CARGO_TARGET_DIR ? path.resolve(repoDir, process.env.CARGO_TARGET_DIR) : path.join(repoDir, 'target');
const binary = (name, env) => process.env[env] ?? path.join(targetDir, 'debug', name);

/** Polls `check` until it answers something truthy, or fails after `timeout` ms. */
export async function eventually(check, { timeout = 10_000, interval = 50, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

/** Starts a process and resolves once a stdout line matches `ready` (its match is returned). */
function start(command, args, { env = {}, ready, name }) {
  if (!existsSync(command)) throw new Error(`${command} is missing: build it first (scripts/ui-test does)`);
  // A variable set to `null` is left out of the child's environment.
  const merged = Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, value]) => value !== null));
  const child = spawn(command, args, { env: merged, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
    if (process.env.E2E_VERBOSE) process.stderr.write(`[${name}] ${chunk}`);
  });
  const matched = new Promise((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 30 s:\n${stderr}`)), 30_000);
    child.stdout.on('data', (chunk) => {
      buffer += chunk;
      const match = buffer.match(ready);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before it was ready:\n${stderr}`));
    });
  });
  return { child, matched, stderr: () => stderr };
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * The mock upstream (`script` is its TOML script) and a switchyard serving the built UI.
 * The provider key lives in the server's environment (`MOCK_KEY`), the way a headless server
 * without an OS keychain keeps secrets. `env` adds to the server's environment; unless it
 * names `SWITCHYARD_LOCAL_PORTS`, the server looks for no model server on this machine, so
 * what happens to run on the machine's real ports never shows in a test.
 */
export async function startStack({ script, ui = 'dir', env = {} }) {
  // A stack that is already running (e.g. `vite preview` proxying to a server by hand).
  if (process.env.E2E_BASE_URL) {
    return {
      baseUrl: process.env.E2E_BASE_URL,
      token: process.env.E2E_TOKEN,
      mockUrl: process.env.E2E_MOCK_URL,
      serverLog: () => '(not started by the test)',
      restart: async () => {
        throw new Error('restart needs a server the test started (unset E2E_BASE_URL)');
      },
      close: async () => {},
    };
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'switchyard-ui-e2e-'));
  const dataDir = path.join(dir, 'data');
  await mkdir(dataDir);
  const scriptFile = path.join(dir, 'mock.toml');
  await writeFile(scriptFile, script);

  const mock = start(binary('switchyard-mock', 'SWITCHYARD_MOCK_BIN'), ['--port', '0', '--script', scriptFile, '--model', 'gpt-ok'], {
    name: 'mock',
    ready: /listening on (http:\/\/127\.0\.0\.1:\d+)/,
  });
  const mockUrl = (await mock.matched)[1];

  const uiDist = path.join(uiDir, 'dist');
  if (!existsSync(path.join(uiDist, 'index.html'))) throw new Error('ui/dist is missing: run npm run build');
  // `ui: 'embedded'`: no --ui, the UI compiled into the binary (issue 32); the server's last
  // line at start is then the sign-in link to open.
  const uiArgs = ui === 'embedded' ? [] : ['--ui', uiDist];
  const serve = (port) =>
    start(binary('switchyard', 'SWITCHYARD_BIN'), ['--data-dir', dataDir, 'serve', '--port', String(port), ...uiArgs], {
      name: 'switchyard',
      ready: /listening on (http:\/\/127\.0\.0\.1:(\d+))\/v1\n[\s\S]*?(http:\/\/127\.0\.0\.1:\d+\/#code=sy-code-[0-9a-f]+)\n/,
      env: {
        MOCK_KEY: 'sk-mock-e2e-0123456789',
        SWITCHYARD_LOG: process.env.SWITCHYARD_LOG ?? 'warn',
        SWITCHYARD_API_KEY: '',
        SWITCHYARD_UI: null,
        SWITCHYARD_LOCAL_PORTS: 'none',
        ...env,
      },
    });
  let server = serve(0);
  let baseUrl;
  let port;
  let link;
  try {
    [, baseUrl, port, link] = await server.matched;
  } catch (error) {
    await stop(mock.child);
    throw error;
  }
  const token = (await readFile(path.join(dataDir, 'management-token'), 'utf8')).trim();

  return {
    dir,
    dataDir,
    mockUrl,
    baseUrl,
    token,
    /** The sign-in link the server printed at start (its code works once). */
    link,
    serverLog: () => server.stderr(),
    /**
     * Kills the server (SIGKILL, as a crash or `kill -9` would: a SIGTERM waits for open event
     * streams for the shutdown grace) and starts a new one on the same port and data directory.
     */
    async restart() {
      const exited = new Promise((resolve) => server.child.once('exit', resolve));
      server.child.kill('SIGKILL');
      await exited;
      server = serve(port);
      const [, again] = await server.matched;
      if (again !== baseUrl) throw new Error(`the restarted server is at ${again}, not ${baseUrl}`);
    },
    async close() {
      await stop(server.child);
      await stop(mock.child);
      if (!process.env.E2E_KEEP) await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
}
