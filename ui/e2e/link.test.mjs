// Issue 32: the first five minutes without the desktop app. From an empty data directory,
// `switchyard serve` with no --ui serves the UI compiled into the binary and prints a sign-in
// link as its last line; opening it signs in (no token typed), the code leaves the address bar
// at once and works only once, and the first-run flow adds a preset provider and routes a
// request, in at most 10 counted user actions (opening the link is one).
//
// The binary is SWITCHYARD_BIN (a release build), else target/debug/switchyard, as scripts/ui-test
// builds it: `include_dir` compiles the files in for both profiles alike.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { launchBrowser, startStack, uiDir } from './harness.mjs';

let stack;
let browser;

before(async () => {
  stack = await startStack({ script: '', ui: 'embedded' });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  if (stack && process.exitCode) process.stderr.write(`--- switchyard log ---\n${stack.serverLog()}\n`);
  await stack?.close();
});

const text = async (locator) => (await locator.textContent()) ?? '';

test('the printed link opens the embedded UI signed in, and the first run routes a request in at most 10 actions', async () => {
  const MAX_ACTIONS = 10;
  // The page at `/` is the built UI itself, from the binary (no --ui was given).
  const root = await fetch(`${stack.baseUrl}/`);
  assert.equal(root.status, 200);
  assert.equal(await root.text(), await readFile(path.join(uiDir, 'dist', 'index.html'), 'utf8'));
  // Static files open no API path: each keeps its own rule.
  for (const route of ['/v1', '/v1/models', '/api', '/api/providers', '/metrics']) {
    const refused = await fetch(`${stack.baseUrl}${route}`);
    assert.equal(refused.status, 401, route);
    await refused.body?.cancel();
  }

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.baseUrl });
  const p = await context.newPage();
  p.setDefaultTimeout(10_000);
  const errors = [];
  p.on('pageerror', (error) => errors.push(error));
  const tokens = [];
  p.on('request', (request) => {
    const auth = request.headers().authorization;
    if (auth) tokens.push(`${request.method()} ${new URL(request.url()).pathname} ${auth}`);
  });
  let actions = 0;
  const act = async (step) => {
    actions += 1;
    await step();
  };
  try {
    assert.match(stack.link, /^http:\/\/127\.0\.0\.1:\d+\/#code=sy-code-[0-9a-f]{32}$/);
    await act(() => p.goto(stack.link));
    await p.getByRole('heading', { name: 'Add your first provider', level: 1 }).waitFor();
    assert.equal(new URL(p.url()).hash, '', 'the code left the address bar');
    const code = stack.link.split('#code=')[1];
    assert.deepEqual(tokens.filter((t) => t.includes(code)), [`POST /api/session Bearer ${code}`], 'the code went to the sign-in only');
    assert.ok(!tokens.some((t) => t.includes(stack.token)), 'no management token was typed or sent');

    await act(() => p.getByRole('button', { name: 'Pick OpenAI' }).click());
    const form = p.getByRole('form', { name: 'Connect OpenAI' });
    await act(() => form.getByLabel('Base URL').fill(`${stack.mockUrl}/v1`));
    await act(() => form.getByLabel('API key').fill('sk-pasted-link-0123456789'));
    await act(() => form.getByRole('button', { name: 'Test connection' }).click());
    assert.match(await text(p.getByTestId('first-run-report')), /^Connected in \d+ ms/);
    await act(() => p.getByRole('button', { name: 'Create combo “main”' }).click());
    await p.getByTestId('first-run-done').waitFor();

    await act(() => p.getByRole('link', { name: 'Connect your tools' }).first().click());
    const claude = p.getByRole('region', { name: 'Claude Code' });
    await act(() => claude.getByRole('button', { name: 'Create a key for Claude Code' }).click());
    await claude.getByText('Its own key is filled in').waitFor();
    await act(() => claude.getByRole('button', { name: /^Copy Claude Code lines/ }).first().click());
    const copied = await p.evaluate(() => navigator.clipboard.readText());
    assert.ok(actions <= MAX_ACTIONS, `${actions} user actions from an empty data directory; at most ${MAX_ACTIONS}`);

    const env = Object.fromEntries([...copied.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1], m[2]]));
    const response = await fetch(`${env.ANTHROPIC_BASE_URL}/v1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.ANTHROPIC_AUTH_TOKEN}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: env.ANTHROPIC_MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] }),
    });
    const body = await response.json();
    assert.equal(response.status, 200, JSON.stringify(body));
    assert.equal(body.type, 'message');

    // The printed link is spent: opened again (a recorded terminal, a second browser), it
    // signs nobody in and says why.
    const again = await browser.newContext();
    const q = await again.newPage();
    await q.goto(stack.link);
    await q.getByText(/sign-in link was used already or has expired/).waitFor();
    await q.getByLabel('Management token').waitFor();
    await again.close();
    assert.deepEqual(errors.map(String), [], 'no uncaught error in the page');
  } finally {
    await context.close();
  }
});
