// The real desktop app in a real window: tauri-driver drives Debian's WebKitWebDriver, which
// starts the app built with the UI embedded. Run under Xvfb and a D-Bus session with an unlocked
// keyring (scripts/desktop-test does all of that).
//
// The app gets a fresh data directory holding a config that routes to the mock upstream, and a
// second provider whose key is in the keychain, locked before the app starts; the test then
// checks the Overview shows the endpoint really in use, that the Providers page names the
// credential waiting for the keychain, makes a lockout with a
// request through that endpoint, and clears it from Settings → Model Lockouts, which talks to
// the proxy over IPC only. The tray is read and clicked over D-Bus, where it is a
// StatusNotifierItem with a com.canonical.dbusmenu menu.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { once } from 'node:events';

const root = resolve(import.meta.dirname, '../..');
const target = process.env.CARGO_TARGET_DIR ?? join(root, 'target');
const bin = (name) => join(target, 'debug', name);
const artifacts = join(root, 'src-tauri/webdriver/artifacts');
mkdirSync(artifacts, { recursive: true });

const LOCAL_KEY = 'sy-window-test-local-key';
const UPSTREAM_KEY = 'sk-window-test-upstream';
/// The data directory Tauri picks: $XDG_DATA_HOME/<identifier>.
const IDENTIFIER = 'dev.switchyard.desktop';

const processes = [];
let driver;
let session;
let xdg;

function freePort() {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.on('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => ok(port));
    });
  });
}

/// Starts `command` and resolves with the first stdout line matching `pattern`.
async function started(command, args, options, pattern) {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'inherit'] });
  processes.push(child);
  let seen = '';
  for await (const chunk of child.stdout) {
    seen += chunk;
    const match = seen.match(pattern);
    if (match) return { child, match };
  }
  throw new Error(`${command} exited before printing ${pattern}: ${seen}`);
}

async function webdriver(method, path, body) {
  const response = await fetch(`${driver}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`${method} ${path}: ${JSON.stringify(json.value ?? json)}`);
  return json.value;
}

// W3C's element key; WebKitWebDriver may answer with the legacy `ELEMENT` one.
const ELEMENT = 'element-6066-11e4-a52e-4f735466cecc';

/// Polls `probe` until it returns something truthy (a condition, not a fixed wait).
async function until(what, probe, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

/// The elements `xpath` matches now.
async function find(xpath) {
  const found = await webdriver('POST', `/session/${session}/elements`, { using: 'xpath', value: xpath });
  return found.map((e) => e[ELEMENT] ?? Object.values(e)[0]);
}

/// The elements `xpath` matches, once there are some.
async function appear(what, xpath) {
  return until(what, async () => {
    const found = await find(xpath);
    return found.length > 0 ? found : null;
  });
}

async function text(element) {
  return webdriver('GET', `/session/${session}/element/${element}/text`);
}

async function click(element) {
  await webdriver('POST', `/session/${session}/element/${element}/click`, {});
}

async function screenshot(name) {
  const png = await webdriver('GET', `/session/${session}/screenshot`);
  writeFileSync(join(artifacts, `${name}.png`), Buffer.from(png, 'base64'));
}

/// An element whose text contains `needle` (innermost match).
const containing = (needle) =>
  `//*[contains(normalize-space(.), ${JSON.stringify(needle)}) and not(*[contains(normalize-space(.), ${JSON.stringify(needle)})])]`;

before(async () => {
  xdg = mkdtempSync(join(tmpdir(), 'switchyard-window-'));
  const dataDir = join(xdg, IDENTIFIER);
  mkdirSync(dataDir, { recursive: true });

  // The mock upstream: the first gpt-4o request gets a 404, which locks the model on the key.
  const script = join(xdg, 'mock.toml');
  writeFileSync(script, `"gpt-4o" = [{ status = { code = 404 } }]\n`);
  const mock = await started(bin('switchyard-mock'), ['--script', script], {}, /listening on (http:\/\/\S+)/);
  const config = join(xdg, 'switchyard.toml');
  writeFileSync(
    config,
    `[[providers]]
id = "mock"
kind = "openai"
base_url = "${mock.match[1]}/v1"
models = ["gpt-4o"]
credentials = [{ id = "key-1", secret = "env:SWITCHYARD_TEST_UPSTREAM_KEY" }]

[[combos]]
name = "smart"
targets = [{ target = "mock/gpt-4o" }]
`,
  );
  execFileSync(bin('switchyard'), ['--data-dir', dataDir, 'config', 'import', config], {
    env: { ...process.env, SWITCHYARD_TEST_UPSTREAM_KEY: UPSTREAM_KEY },
    stdio: 'inherit',
  });
  // An imported file's secret destinations are new: the user confirms them (docs/security.md).
  execFileSync(bin('switchyard'), ['--data-dir', dataDir, 'config', 'confirm', '--yes'], {
    env: { ...process.env, SWITCHYARD_TEST_UPSTREAM_KEY: UPSTREAM_KEY },
    stdio: 'inherit',
  });

  // A key kept in the keychain (`providers add --key-stdin`), then the keyring locked, as a
  // screen lock leaves it: the app must start all the same (issue 47).
  execFileSync(bin('switchyard'), ['--data-dir', dataDir, 'providers', 'add', 'openai', '--id', 'kc', '--key-stdin'], {
    input: 'sk-window-test-behind-the-lock',
    stdio: ['pipe', 'inherit', 'inherit'],
  });
  execFileSync('dbus-send', ['--session', '--print-reply', '--dest=org.freedesktop.secrets', '/org/freedesktop/secrets',
    'org.freedesktop.Secret.Service.Lock', 'array:objpath:/org/freedesktop/secrets/collection/login'], { stdio: 'ignore' });

  const [port, nativePort] = [await freePort(), await freePort()];
  const child = spawn('tauri-driver', ['--port', String(port), '--native-port', String(nativePort)], {
    env: {
      ...process.env,
      XDG_DATA_HOME: xdg,
      SWITCHYARD_PORT: '0',
      SWITCHYARD_API_KEY: LOCAL_KEY,
      SWITCHYARD_TEST_UPSTREAM_KEY: UPSTREAM_KEY,
      TAURI_WEBVIEW_AUTOMATION: 'true',
    },
    stdio: 'inherit',
  });
  processes.push(child);
  driver = `http://127.0.0.1:${port}`;
  await until('tauri-driver', async () => (await fetch(`${driver}/status`)).ok);
  const created = await webdriver('POST', '/session', {
    capabilities: {
      alwaysMatch: {
        browserName: 'wry',
        'tauri:options': { application: bin('switchyard-desktop') },
      },
    },
  });
  session = created.sessionId;
});

after(async () => {
  // Closing the window only hides it (the proxy keeps serving), so the app is asked to quit
  // the way the OS asks at logout: SIGTERM, which it takes as Quit. Then the session can end.
  const app = bin('switchyard-desktop');
  try {
    execFileSync('pkill', ['-TERM', '-f', `^${app}`]);
  } catch {
    // Already gone.
  }
  await until('the app to quit', () => {
    try {
      execFileSync('pgrep', ['-f', `^${app}`]);
      return false;
    } catch {
      return true;
    }
  });
  if (session) await webdriver('DELETE', `/session/${session}`).catch(() => {});
  for (const child of processes.reverse()) {
    child.kill('SIGTERM');
    if (child.exitCode === null) await once(child, 'exit').catch(() => {});
  }
});

let endpoint;

test('the window opens and the Overview shows the endpoint really in use', async () => {
  const [element] = await appear('the endpoint on the Overview', containing('http://127.0.0.1:'));
  const shown = await text(element);
  endpoint = shown.match(/http:\/\/127\.0\.0\.1:\d+\/v1/)?.[0];
  assert.ok(endpoint, `no endpoint URL in ${JSON.stringify(shown)}`);
  // It is the proxy: it answers the model list to the local key.
  const models = await fetch(`${endpoint}/models`, { headers: { authorization: `Bearer ${LOCAL_KEY}` } });
  assert.equal(models.status, 200);
  await screenshot('overview');
});

test('with the keychain locked, the Providers page names the credential that waits for it', async () => {
  const [link] = await appear('the Providers link', `//a[normalize-space(.) = 'Providers']`);
  await click(link);
  const [badge] = await appear('the waiting credential', containing('waiting for its secret'));
  assert.ok(badge);
  const [why] = await appear('why it waits', `//*[@data-testid='secret-unavailable-main']`);
  // The keychain's unlock prompt is up (Xvfb has a display for it): the start did not wait for
  // it, and the credential waits until someone answers.
  assert.match(await text(why), /Not used until its secret can be read: not read from the OS keychain yet \(it may be locked, with an unlock prompt waiting\)/);
  await screenshot('providers-keychain-locked');
  const [overview] = await appear('the Overview link', `//a[normalize-space(.) = 'Overview']`);
  await click(overview);
});

test('Settings → Model Lockouts loads through IPC and Clear all clears', async () => {
  assert.ok(endpoint, 'the Overview test found the endpoint');
  const chat = await fetch(`${endpoint}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${LOCAL_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'smart', messages: [{ role: 'user', content: 'hi' }] }),
  });
  // The scripted 404 locks gpt-4o on key-1; with nothing else to try the client gets a 503.
  assert.equal(chat.status, 503, await chat.text());

  const [link] = await appear('the Model Lockouts link', `//a[contains(normalize-space(.), 'Model Lockouts')]`);
  await click(link);
  await appear('the lockout row', `//tr[contains(., 'gpt-4o') and contains(., 'key-1')]`);
  await screenshot('model-lockouts');
  // The tray heard it too, from the event stream.
  await until('the tray line for the locked model', async () =>
    (await trayMenu()).some((item) => item.label === 'mock: healthy · 1 model locked'),
  );
  const [clearAll] = await appear('the Clear all button', `//button[contains(normalize-space(.), 'Clear all')]`);
  await click(clearAll);
  await until('the lockout row to go', async () => (await find(`//tr[contains(., 'gpt-4o') and contains(., 'key-1')]`)).length === 0);

  // The proxy agrees: nothing is locked any more.
  const token = readFileSync(join(xdg, IDENTIFIER, 'management-token'), 'utf8').trim();
  const port = new URL(endpoint).port;
  const lockouts = await fetch(`http://127.0.0.1:${port}/api/resilience/lockouts`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.deepEqual(await lockouts.json(), []);
  await screenshot('model-lockouts-cleared');
});

test('the tray has a line per provider and its Pause / Resume routing item works', async () => {
  const port = new URL(endpoint).port;
  const token = readFileSync(join(xdg, IDENTIFIER, 'management-token'), 'utf8').trim();
  const paused = async () =>
    (await (await fetch(`http://127.0.0.1:${port}/api/routing`, { headers: { authorization: `Bearer ${token}` } })).json())
      .paused;
  const menu = await until('the tray menu with the provider healthy again', async () => {
    const items = await trayMenu();
    return items.some((item) => item.label === 'mock: healthy') ? items : null;
  });
  // The doctor's line is the credential waiting for the locked keychain.
  assert.deepEqual(
    menu.map((item) => item.label),
    ['mock: healthy', 'kc: healthy', 'Doctor: 1 finding', 'Open Switchyard', 'Copy endpoint URL', 'Pause routing', 'Reset all breakers', 'Quit'],
  );

  await trayClick('Pause routing');
  await until('routing to pause', async () => (await paused()) === true);
  await until('the item to offer Resume', async () => (await trayMenu()).some((i) => i.label === 'Resume routing'));
  await trayClick('Resume routing');
  await until('routing to resume', async () => (await paused()) === false);
});

/// The app's tray: its D-Bus connection and the path of its StatusNotifierItem.
async function trayItem() {
  const pid = execFileSync('pgrep', ['-f', `^${bin('switchyard-desktop')}`], { encoding: 'utf8' }).trim().split('\n')[0];
  const bus = (...args) =>
    execFileSync('gdbus', ['call', '--session', '--timeout', '2', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const names = bus('--dest', 'org.freedesktop.DBus', '--object-path', '/org/freedesktop/DBus', '--method', 'org.freedesktop.DBus.ListNames');
  for (const name of names.match(/':1\.\d+'/g).map((n) => n.slice(1, -1))) {
    let owner;
    try {
      owner = bus('--dest', 'org.freedesktop.DBus', '--object-path', '/org/freedesktop/DBus',
        '--method', 'org.freedesktop.DBus.GetConnectionUnixProcessID', name).match(/uint32 (\d+)/)?.[1];
    } catch {
      continue; // gone since the list was made (each gdbus call is a connection of its own)
    }
    if (owner !== pid) continue;
    let nodes;
    try {
      nodes = bus('--dest', name, '--object-path', '/org/ayatana/NotificationItem', '--method', 'org.freedesktop.DBus.Introspectable.Introspect');
    } catch {
      continue; // one of the app's other connections (webkit's, accessibility's)
    }
    const node = nodes.match(/node name=\\?"([^"\\]+)\\?"/)?.[1];
    if (node) return { name, menu: `/org/ayatana/NotificationItem/${node}/Menu` };
  }
  throw new Error(`the app (pid ${pid}) has no tray item on the session bus yet`);
}

/// The tray menu's items: `{ id, label }`, separators left out.
async function trayMenu() {
  const { name, menu } = await trayItem();
  const layout = execFileSync('gdbus', ['call', '--session', '--timeout', '5', '--dest', name, '--object-path', menu,
    '--method', 'com.canonical.dbusmenu.GetLayout', '--', '0', '-1', '["label"]'], { encoding: 'utf8' });
  return [...layout.matchAll(/<\((\d+), \{'label': <'([^']*)'>/g)].map(([, id, label]) => ({ id: Number(id), label }));
}

/// Clicks the tray menu item labelled `label`.
async function trayClick(label) {
  const { name, menu } = await trayItem();
  const item = (await trayMenu()).find((i) => i.label === label);
  assert.ok(item, `no tray item ${label}`);
  execFileSync('gdbus', ['call', '--session', '--timeout', '5', '--dest', name, '--object-path', menu,
    '--method', 'com.canonical.dbusmenu.Event', '--', String(item.id), 'clicked', '<0>', '0']);
}
