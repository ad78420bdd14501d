// The UI against a real `switchyard serve --ui` and the real mock upstream: sign in, add a
// provider and its key, create a combo, send a request that meets a 429, watch the lockout
// appear live, clear it, and get refused at the right field. Screenshots of every page go to
// e2e/artifacts/ (and, with SWITCHYARD_UPDATE_SCREENSHOTS=1, the main ones to docs/screenshots/).
import assert from 'node:assert/strict';
import { copyFile, mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { artifactsDir, eventually, launchBrowser, repoDir, startStack } from './harness.mjs';

// `rate-limited` always answers 429 with a long Retry-After; `gpt-ok` answers normally.
const SCRIPT = `
"rate-limited" = { default = { status = { code = 429, headers = { retry-after = "900" } } } }
`;

const DOC_SHOTS = new Set([
  'first-run',
  'first-run-combo',
  'connect',
  'overview',
  'overview-dark',
  'providers',
  'combos-try',
  'combos-try-auto',
  'requests-trace',
  'lockouts',
  'resilience-server-error',
  'usage',
  'usage-dark',
  'budgets',
]);

let stack;
let browser;
let page;
const pageErrors = [];
let shotNumber = 0;

async function shot(name, on = page) {
  shotNumber += 1;
  const file = path.join(artifactsDir, `${String(shotNumber).padStart(2, '0')}-${name}.png`);
  await on.screenshot({ path: file, fullPage: true });
  if (process.env.SWITCHYARD_UPDATE_SCREENSHOTS === '1' && DOC_SHOTS.has(name)) {
    const docs = path.join(repoDir, 'docs', 'screenshots');
    await mkdir(docs, { recursive: true });
    await copyFile(file, path.join(docs, `${name}.png`));
  }
}

async function go(route, heading) {
  await page.goto(`${stack.baseUrl}/#/${route}`);
  await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
}

async function api(method, route, body, on = stack) {
  const response = await fetch(`${on.baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${on.token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json().catch(() => null) };
}

async function chat(key, model) {
  const response = await fetch(`${stack.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }] }),
  });
  await response.arrayBuffer();
  return response;
}

const text = async (locator) => (await locator.textContent()) ?? '';

before(async () => {
  await rm(artifactsDir, { recursive: true, force: true });
  await mkdir(artifactsDir, { recursive: true });
  stack = await startStack({ script: SCRIPT });
  browser = await launchBrowser();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.on('pageerror', (error) => pageErrors.push(error));
});

after(async () => {
  await browser?.close();
  if (stack && process.exitCode) process.stderr.write(`--- switchyard log ---\n${stack.serverLog()}\n`);
  await stack?.close();
});

test('the whole flow, in a real browser against the real server', async (t) => {
  let localKey;

  await t.test('sign in with the management token', async () => {
    await page.goto(`${stack.baseUrl}/`);
    const field = page.getByLabel('Management token');
    await field.waitFor();
    await field.fill('not-the-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('The server refused this token.').waitFor();
    await field.fill(stack.token);
    await shot('sign-in');
    await page.getByRole('button', { name: 'Sign in' }).click();
    // An empty data directory opens on the first run; this flow builds by hand instead.
    await page.getByRole('heading', { name: 'Add your first provider', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Skip for now' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    const endpoint = await text(page.getByTestId('endpoint'));
    assert.equal(endpoint, `${stack.baseUrl}/v1`);
  });

  await t.test('add a provider and its key through the forms', async () => {
    await page.getByRole('link', { name: 'Providers' }).click();
    await page.getByRole('heading', { name: 'Providers', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Add provider' }).click();
    const form = page.getByRole('form', { name: 'New provider' });
    await form.getByLabel('Provider name').fill('mock');
    await form.getByLabel('Kind').selectOption('openai');
    await form.getByLabel('Base URL').fill(`${stack.mockUrl}/v1`);
    await form.getByLabel('Models').fill('gpt-ok\nrate-limited');
    await form.getByRole('button', { name: 'Add provider' }).click();

    const card = page.getByRole('article', { name: 'Provider mock' });
    await card.waitFor();
    await card.getByRole('button', { name: 'Add credential' }).click();
    const credential = card.getByRole('form', { name: 'New credential' });
    await credential.getByLabel('Credential name').fill('main');
    await credential.getByLabel('Environment variable').check();
    await credential.getByLabel('Variable name').fill('MOCK_KEY');
    await credential.getByRole('button', { name: 'Add credential' }).click();
    // Write-only: the list shows where the key is, never the key; and for an environment
    // variable not even its last four characters (docs/security.md).
    await card.getByText('set (env:MOCK_KEY)').waitFor();
    assert.ok(!(await text(card)).includes('6789'), 'no tail of an environment variable is shown');
    assert.ok(!(await page.content()).includes('sk-mock-e2e'), 'the key itself must never reach the page');

    await card.getByRole('button', { name: 'Test connection' }).click();
    const report = card.getByTestId('connection-report');
    await report.waitFor();
    assert.match(await text(report), /Connected with main/);
    await card.getByRole('button', { name: 'Discover models' }).click();
    const models = card.getByTestId('discovered-models');
    await models.waitFor();
    assert.match(await text(models), /gpt-ok/);
    await shot('providers');
  });

  await t.test('make lockouts long enough to watch', async () => {
    await go('settings/lockouts', 'Model Lockouts');
    await page.getByLabel('Max cooldown (ms)').fill('3600000');
    await page.getByLabel('Base cooldown (ms)').fill('600000');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText('Saved. The new settings apply to the next request.').waitFor();
    const saved = await api('GET', '/api/settings/model_lockouts');
    assert.equal(saved.body.base_cooldown_ms, 600000);
    assert.equal(saved.body.max_cooldown_ms, 3600000);
  });

  await t.test('create a combo, ordering its targets with move up', async () => {
    await page.getByRole('link', { name: 'Combos' }).click();
    await page.getByRole('heading', { name: 'Combos', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'New combo' }).click();
    const form = page.getByRole('form', { name: 'New combo' });
    await form.getByLabel('Combo name').fill('smart');
    await form.getByLabel('Target 1', { exact: true }).fill('mock/gpt-ok');
    await form.getByRole('button', { name: 'Add target' }).click();
    await form.getByLabel('Target 2', { exact: true }).fill('mock/rate-limited');
    await form.getByRole('button', { name: 'Move target 2 up' }).click();
    assert.equal(await form.getByLabel('Target 1', { exact: true }).inputValue(), 'mock/rate-limited');
    await form.getByRole('button', { name: 'Create combo' }).click();
    await page.getByRole('article', { name: 'Combo smart' }).waitFor();
    const combo = await api('GET', '/api/combos/smart');
    assert.deepEqual(
      combo.body.targets.map((target) => target.target),
      ['mock/rate-limited', 'mock/gpt-ok'],
    );
  });

  await t.test('create a local API key, shown once', async () => {
    await go('settings/general', 'General');
    await page.getByLabel('New key name').fill('e2e');
    await page.getByRole('button', { name: 'Create key' }).click();
    localKey = (await text(page.getByTestId('new-key'))).trim();
    assert.ok(localKey.length >= 20, 'a real key');
    await page.getByRole('table', { name: 'Local API keys' }).getByRole('cell', { name: 'e2e', exact: true }).waitFor();
    await shot('general');
  });

  await t.test('a request meets a 429: the lockout appears live, counts down, and clears', async () => {
    await go('settings/lockouts', 'Model Lockouts');
    await page.getByTestId('no-lockouts').waitFor();

    const response = await chat(localKey, 'smart');
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('x-switchyard-attempts'), '2');

    // No reload: the page hears the server's event.
    const row = page.getByRole('row', { name: /rate-limited/ });
    await row.waitFor();
    const cells = await row.getByRole('cell').allTextContents();
    assert.deepEqual(cells.slice(0, 3), ['mock', 'main', 'rate-limited']);
    assert.match(cells[3], /rate limit \(429\)/);
    const remaining = row.getByTestId('remaining');
    const first = await text(remaining);
    assert.match(first, /^1[45]m \d\ds$/);
    await eventually(async () => (await text(remaining)) !== first, { timeout: 5000, what: 'the countdown to tick' });
    await shot('lockouts');

    await row.getByRole('button', { name: 'Clear lockout of mock/main/rate-limited' }).click();
    await page.getByTestId('no-lockouts').waitFor();
    assert.deepEqual((await api('GET', '/api/resilience/lockouts')).body, []);

    // Locked again, then Clear all.
    assert.equal((await chat(localKey, 'smart')).status, 200);
    await row.waitFor();
    await page.getByRole('button', { name: 'Clear all' }).click();
    await page.getByTestId('no-lockouts').waitFor();
    assert.deepEqual((await api('GET', '/api/resilience/lockouts')).body, []);

    // And once more, so the other pages have something to show.
    assert.equal((await chat(localKey, 'smart')).status, 200);
    await row.waitFor();
  });

  await t.test('an invalid lockout setting is refused at its field', async () => {
    const max = page.getByLabel('Max cooldown (ms)');
    await max.fill('500');
    await page.getByText('500 is out of range; allowed 1000–86400000').waitFor();
    assert.equal(await max.getAttribute('aria-invalid'), 'true');
    assert.ok(await page.getByRole('button', { name: 'Save', exact: true }).isDisabled());
    await shot('lockout-invalid');
    await page.getByRole('button', { name: 'Revert' }).click();
    assert.equal(await max.getAttribute('aria-invalid'), null);
  });

  await t.test('the server`s own refusal lands on the field it names', async () => {
    await go('settings/resilience', 'Resilience');
    const timeouts = page.getByRole('region', { name: 'Timeouts' });
    const firstByte = timeouts.getByLabel('First event, last candidate (ms)');
    await firstByte.fill('1000'); // below first_event_ms (15 s): only the server knows that rule
    await timeouts.getByRole('button', { name: 'Save timeouts' }).click();
    const error = timeouts.locator('#timeouts-first_byte_ms-error');
    await error.waitFor();
    assert.match(await text(error), /below first_event_ms/);
    assert.equal(await firstByte.getAttribute('aria-invalid'), 'true');
    assert.equal((await api('GET', '/api/settings/timeouts')).body.first_byte_ms, 60000, 'nothing changed');
    await shot('resilience-server-error');
  });

  await t.test('the request log shows the routing trace', async () => {
    await go('requests', 'Requests');
    await page.getByTestId('request-row').first().waitFor();
    await page.getByRole('button', { name: 'Show routing trace of request 3' }).click();
    const trace = page.getByRole('table', { name: 'Routing trace of request 3' });
    await trace.waitFor();
    const rows = await trace.getByRole('row').allTextContents();
    assert.match(rows[1], /mock\/rate-limited.*attempted.*rate limit.*429/);
    // The log's trace holds the failed attempts; the one that served is named beside it.
    const served = page.locator('#trace-2 .trace-served');
    assert.match(await text(served), /served by mock\/gpt-ok/);
    await shot('requests-trace');
  });

  await t.test('try a combo from the UI', async () => {
    await go('combos', 'Combos');
    const panel = page.getByRole('region', { name: 'Try it' });
    await panel.getByLabel('Model').selectOption('smart');
    await panel.getByRole('button', { name: 'Send' }).click();
    const result = panel.getByTestId('try-result');
    await result.waitFor();
    assert.match(await text(result), /served by mock\/gpt-ok/);
    await shot('combos-try');

    // `auto` ranks every configured model and says why the winner won (issue 30, point 2).
    await panel.getByLabel('Model').selectOption('auto:cheap');
    await panel.getByRole('button', { name: 'Send' }).click();
    const why = panel.getByTestId('try-decision');
    await why.waitFor();
    assert.match(await text(why), /^Why this one: auto:cheap mock\/\S+ score=/);
    await shot('combos-try-auto');
  });

  await t.test('overview: health, lockouts, fallbacks, pause and resume', async () => {
    await go('overview', 'Overview');
    await page.getByRole('article', { name: 'Provider mock' }).waitFor();
    await page.getByRole('table', { name: 'Recent fallbacks' }).waitFor();
    await page.getByRole('region', { name: 'Active lockouts' }).getByText('mock/rate-limited').waitFor();
    await shot('overview');

    await page.getByRole('button', { name: 'Pause routing' }).click();
    await page.getByRole('button', { name: 'Resume routing' }).waitFor();
    assert.equal((await chat(localKey, 'smart')).status, 503);
    await page.getByRole('button', { name: 'Resume routing' }).click();
    await page.getByRole('button', { name: 'Pause routing' }).waitFor();
    assert.equal((await chat(localKey, 'smart')).status, 200);
  });

  await t.test('the dark theme', async () => {
    await go('settings/general', 'General');
    await page.getByLabel('Dark').check();
    await go('overview', 'Overview');
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    await page.getByRole('article', { name: 'Provider mock' }).waitFor();
    await shot('overview-dark');
  });

  assert.deepEqual(pageErrors.map(String), [], 'no uncaught error in the page');
});

// Issue 17: from an empty data directory to a routed request, as a new user would, counting
// every user action (a fill or a click). The OpenAI preset's base URL is pointed at the mock
// in the form, the way a user with a proxy would; the key is pasted (it goes to the keychain:
// scripts/ui-test runs this file inside scripts/keyring-session).
test('first run: pick a preset, paste a key, test, choose models, combo, Connect lines, a routed request', async () => {
  const MAX_ACTIONS = 10;
  const fresh = await startStack({ script: '' });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: fresh.baseUrl });
  const p = await context.newPage();
  p.setDefaultTimeout(10_000);
  const errors = [];
  p.on('pageerror', (error) => errors.push(error));
  let actions = 0;
  const act = async (step) => {
    actions += 1;
    await step();
  };
  try {
    await p.goto(`${fresh.baseUrl}/`);
    await act(() => p.getByLabel('Management token').fill(fresh.token));
    await act(() => p.getByRole('button', { name: 'Sign in' }).click());
    await p.getByRole('heading', { name: 'Add your first provider', level: 1 }).waitFor();

    await p.getByLabel('Search providers').waitFor();
    await shot('first-run', p);
    await act(() => p.getByRole('button', { name: 'Pick OpenAI' }).click());
    const form = p.getByRole('form', { name: 'Connect OpenAI' });
    assert.equal(await form.getByLabel('Base URL').inputValue(), 'https://api.openai.com/v1', 'the preset fills the URL');
    await act(() => form.getByLabel('Base URL').fill(`${fresh.mockUrl}/v1`));
    await act(() => form.getByLabel('API key').fill('sk-pasted-e2e-0123456789'));
    await act(() => form.getByRole('button', { name: 'Test connection' }).click());
    assert.match(await text(p.getByTestId('first-run-report')), /^Connected in \d+ ms/);

    // The mock serves only gpt-ok: no suggested OpenAI model is there, so the first listed is chosen.
    assert.ok(await p.getByLabel('Use gpt-ok').isChecked(), 'the model is chosen already');
    await act(() => p.getByRole('button', { name: 'Create combo “main”' }).click());
    await p.getByTestId('first-run-done').waitFor();
    await shot('first-run-combo', p);

    const provider = await api('GET', '/api/providers/openai', undefined, fresh);
    assert.equal(provider.body.preset, 'openai');
    assert.equal(provider.body.base_url, `${fresh.mockUrl}/v1`);
    assert.deepEqual(provider.body.models, ['gpt-ok']);
    assert.equal(provider.body.credentials[0].secret_ref ?? null, null, 'the pasted key is not written as a reference');
    assert.ok(!(await p.content()).includes('sk-pasted-e2e'), 'the key never comes back to the page');

    await act(() => p.getByRole('link', { name: 'Connect your tools' }).first().click());
    await p.getByRole('heading', { name: 'Connect your tools', level: 1 }).waitFor();
    const claude = p.getByRole('region', { name: 'Claude Code' });
    await act(() => claude.getByRole('button', { name: 'Create a key for Claude Code' }).click());
    await claude.getByText('Its own key is filled in').waitFor();
    assert.match(await text(p.getByRole('region', { name: 'Cursor' })), /127\.0\.0\.1|loopback/i);
    await shot('connect', p);
    await act(() => claude.getByRole('button', { name: /^Copy Claude Code lines/ }).first().click());
    const copied = await p.evaluate(() => navigator.clipboard.readText());

    assert.ok(actions <= MAX_ACTIONS, `${actions} user actions from an empty data directory; at most ${MAX_ACTIONS}`);

    // A real request through the proxy with exactly the copied settings, as Claude Code sends it.
    const env = Object.fromEntries([...copied.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1], m[2]]));
    assert.equal(env.ANTHROPIC_BASE_URL, fresh.baseUrl);
    assert.equal(env.ANTHROPIC_MODEL, 'main');
    const keys = await api('GET', '/api/keys', undefined, fresh);
    assert.deepEqual(keys.body.map((k) => k.name), ['Claude Code']);
    const response = await fetch(`${env.ANTHROPIC_BASE_URL}/v1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.ANTHROPIC_AUTH_TOKEN}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: env.ANTHROPIC_MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] }),
    });
    const body = await response.json();
    assert.equal(response.status, 200, JSON.stringify(body));
    assert.equal(body.type, 'message');
    assert.equal(response.headers.get('x-switchyard-attempts'), '1');

    // The catalogue now shows the preset as configured, with its breaker and the test.
    await p.getByRole('link', { name: 'Catalogue', exact: true }).click();
    const row = p.getByRole('listitem', { name: 'OpenAI' });
    const health = row.getByRole('list', { name: 'Configured' });
    await health.waitFor();
    assert.match(await text(health), /configured as openai.*breaker closed.*last test passed/);
    assert.deepEqual(errors.map(String), [], 'no uncaught error in the page');
  } finally {
    if (process.exitCode) process.stderr.write(`--- switchyard log (first run) ---\n${fresh.serverLog()}\n`);
    await context.close();
    await fresh.close();
  }
});

// Issue 18: what the mock reports, request by request, is what the Usage page shows, live; a
// budget set low in Settings → Budgets warns at 80 % and, enforced, refuses with a banner.
const USAGE_SCRIPT = `
"priced" = { default = { reply = { usage = { input = 1200, cache_read = 300, output = 450, reasoning = 50 } } } }
`;
// Dollars per million tokens: each request costs 1200 × 2 + 300 × 0.5 + 450 × 8 = 6150 µ$.
const PRICE = { input_per_mtok: 2, output_per_mtok: 8, cache_read_per_mtok: 0.5 };

test('usage: the mock`s counts on the Usage page, live, and a budget warning at 80 %', async () => {
  const metered = await startStack({ script: USAGE_SCRIPT });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  const p = await context.newPage();
  p.setDefaultTimeout(10_000);
  const errors = [];
  p.on('pageerror', (error) => errors.push(error));
  const call = (method, route, body) => api(method, route, body, metered);
  const nav = (name) => p.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();
  const send = async (key, stream) => {
    const response = await fetch(`${metered.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'metered/priced', stream, messages: [{ role: 'user', content: 'count me' }] }),
    });
    const text = await response.text();
    assert.equal(response.status, 200, text);
    return text;
  };
  try {
    assert.equal((await call('POST', '/api/providers', { id: 'metered', kind: 'openai', base_url: `${metered.mockUrl}/v1`, models: [{ id: 'priced', price: PRICE }] })).status, 201);
    const credential = await call('POST', '/api/providers/metered/credentials', { id: 'main', secret_ref: 'env:MOCK_KEY', confirm: true });
    assert.equal(credential.status, 201, JSON.stringify(credential.body));
    const key = (await call('POST', '/api/keys', { name: 'usage-e2e' })).body.key;

    await p.goto(`${metered.baseUrl}/`);
    await p.getByLabel('Management token').fill(metered.token);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    await nav('Usage');
    await p.getByRole('heading', { name: 'No requests in this range' }).waitFor();

    // What the mock reports for each request, as the client sees it.
    const reported = JSON.parse(await send(key, false)).usage;
    assert.deepEqual(
      [reported.prompt_tokens, reported.prompt_tokens_details.cached_tokens, reported.completion_tokens, reported.completion_tokens_details.reasoning_tokens],
      [1500, 300, 450, 50],
    );
    await send(key, false);
    assert.match(await send(key, true), /data: \[DONE\]/);

    // No reload: the page hears the requests complete.
    const figure = (id) => text(p.getByTestId(id));
    await eventually(async () => (await figure('total-requests')) === '3', { what: 'the three requests on the Usage page' });
    assert.equal(await figure('tokens-uncached_input'), '3,600');
    assert.equal(await figure('tokens-cache_read'), '900');
    assert.equal(await figure('tokens-cache_write'), '0');
    assert.equal(await figure('tokens-output'), '1,350');
    assert.equal(await figure('tokens-reasoning'), '150');
    assert.equal(await figure('total-spend'), '$0.01845');
    assert.equal(await figure('total-fallbacks'), '0');
    const ttft = p.getByRole('table', { name: 'Time to first token by provider' });
    // Against the local mock a first token can come in under half a millisecond: `< 1 ms`.
    assert.match(await text(ttft.getByRole('row').nth(1)), /^metered(?:\d+|< 1) ms(?:\d+|< 1) ms1$/);
    assert.match(await text(p.getByRole('table', { name: 'Top keys by spend' }).getByRole('row').nth(1)), /^usage-e2e\$0\.018453$/);
    for (const chart of ['Spend per day by model', 'Tokens per day by model', 'Requests and fallbacks per hour']) {
      await p.getByRole('figure', { name: chart }).locator('canvas').first().waitFor();
    }

    // The CSV is the report shown, as the server writes it.
    const [csv] = await Promise.all([p.waitForEvent('download'), p.getByRole('button', { name: 'Download CSV' }).click()]);
    const shown = await text(p.getByTestId('usage-range'));
    const [from, to] = shown.match(/\d{4}-\d{2}-\d{2}/g);
    const server = await fetch(`${metered.baseUrl}/api/usage.csv?from=${from}&to=${to}&bucket=day&group_by=model`, { headers: { authorization: `Bearer ${metered.token}` } });
    assert.equal(await readFile(await csv.path(), 'utf8'), await server.text());
    assert.match(csv.suggestedFilename(), /^switchyard-usage-\d{4}-\d{2}-\d{2}-to-\d{4}-\d{2}-\d{2}-by-model\.csv$/);

    // A budget set low: 0.01845 of 0.02 is past 80 %.
    await nav('Budgets');
    await p.getByRole('heading', { name: 'Budgets', level: 1 }).waitFor();
    const everything = p.getByRole('group', { name: 'Every request' });
    // A limit the server refuses is named at its field, and nothing is saved.
    await everything.getByLabel('Monthly limit (USD)').fill('0');
    await p.getByRole('button', { name: 'Save budgets' }).click();
    await everything.getByText('0 is out of range; allowed more than 0 and at most 1000000 (USD)').waitFor();
    assert.equal(await everything.getByLabel('Monthly limit (USD)').getAttribute('aria-invalid'), 'true');
    assert.deepEqual((await call('GET', '/api/settings/budgets')).body, { keys: {} }, 'nothing saved');
    await everything.getByLabel('Monthly limit (USD)').fill('');
    await everything.getByLabel('Daily limit (USD)').fill('0.02');
    await p.getByRole('button', { name: 'Save budgets' }).click();
    await p.getByText('Saved. Budgets apply from the next request.').waitFor();
    assert.deepEqual((await call('GET', '/api/settings/budgets')).body, { daily: { limit_usd: 0.02, enforce: false }, keys: {} });
    // And a monthly one for the key, picked from the live keys.
    await p.getByLabel('Budgets for a local key').fill('usage-e2e');
    await p.getByRole('button', { name: 'Add key budgets' }).click();
    await p.getByRole('group', { name: 'Key “usage-e2e”' }).getByLabel('Monthly limit (USD)').fill('1');
    await p.getByRole('button', { name: 'Save budgets' }).click();
    await p.getByText('Saved. Budgets apply from the next request.').waitFor();
    assert.deepEqual((await call('GET', '/api/settings/budgets')).body.keys, { 'usage-e2e': { monthly: { limit_usd: 1, enforce: false } } });
    await shot('budgets', p);

    await nav('Usage');
    const warning = p.getByTestId('budget-warning');
    await warning.waitFor();
    const [view, own] = (await call('GET', '/api/usage/budgets')).body;
    assert.equal(view.state, 'warning');
    assert.deepEqual([own.key, own.spent, own.state], ['usage-e2e', '0.01845', 'ok']);
    assert.equal(await p.getByTestId('budget-warning').count(), 1, 'the key`s budget, at 1 %, warns of nothing');
    assert.equal(await text(warning), `The daily budget over every request is ${view.percent} % spent ($0.018 of $0.02); it is not enforced. It starts again at ${new Date(view.resets_at).toISOString().slice(0, 16).replace('T', ' ')} UTC.`);
    await p.getByRole('meter', { name: 'Daily, every request' }).waitFor();
    await p.getByRole('figure', { name: 'Spend per day by model' }).locator('canvas').first().waitFor();
    await shot('usage', p);

    // The overview warns too.
    await nav('Overview');
    await p.getByTestId('budget-warning').waitFor();
    assert.equal(await text(p.getByTestId('week-spend')), '$0.01845');

    // Enforced and spent: requests are refused, and the page says so.
    await nav('Budgets');
    const daily = p.getByRole('group', { name: 'Every request' });
    await daily.getByLabel('Daily limit (USD)').fill('0.015');
    await daily.getByLabel('Enforce the daily limit').check();
    await p.getByRole('button', { name: 'Save budgets' }).click();
    await p.getByText('Saved. Budgets apply from the next request.').waitFor();
    const refused = await fetch(`${metered.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'metered/priced', messages: [{ role: 'user', content: 'one more' }] }),
    });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('x-should-retry'), 'false');
    await nav('Usage');
    assert.match(await text(p.getByTestId('budget-refusal')), /^Requests are refused: the daily budget over every request is spent \(\$0\.018 of \$0\.015\)/);

    // The dark theme, with the budget back to a warning.
    await nav('Budgets');
    await p.getByRole('group', { name: 'Every request' }).getByLabel('Daily limit (USD)').fill('0.02');
    await p.getByRole('group', { name: 'Every request' }).getByLabel('Enforce the daily limit').uncheck();
    await p.getByRole('button', { name: 'Save budgets' }).click();
    await p.getByText('Saved. Budgets apply from the next request.').waitFor();
    await nav('General');
    await p.getByLabel('Dark').check();
    await nav('Usage');
    assert.equal(await p.evaluate(() => document.documentElement.dataset.theme), 'dark');
    await p.getByTestId('budget-warning').waitFor();
    await p.getByRole('figure', { name: 'Spend per day by model' }).locator('canvas').first().waitFor();
    await shot('usage-dark', p);
    assert.deepEqual(errors.map(String), [], 'no uncaught error in the page');
  } finally {
    if (process.exitCode) process.stderr.write(`--- switchyard log (usage) ---\n${metered.serverLog()}\n`);
    await context.close();
    await metered.close();
  }
});

test('import: a subscription moved to another host names the login, which only its provider`s Confirm sends', async () => {
  const moved = await startStack({ script: '' });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const p = await context.newPage();
  p.setDefaultTimeout(10_000);
  const errors = [];
  p.on('pageerror', (error) => errors.push(error));
  const nav = (name) => p.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();
  const login = 'sk-ant-oat01-playwright-moved-login';
  const host = new URL(moved.mockUrl).host;
  try {
    const key = (await api('POST', '/api/keys', { name: 'login-e2e' }, moved)).body.key;
    const asSubscriber = () =>
      fetch(`${moved.baseUrl}/v1/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${login}`, 'x-switchyard-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'plan', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
      });

    await p.goto(`${moved.baseUrl}/`);
    await p.getByLabel('Management token').fill(moved.token);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('button', { name: 'Skip for now' }).click();
    await nav('General');
    await p.getByRole('button', { name: 'Import config…' }).click();
    const dialog = p.getByRole('dialog', { name: 'Import config' });
    await dialog.getByLabel('Or paste the config').fill(
      `[[providers]]\nid = "sub"\npreset = "claude-subscription"\nbase_url = "${moved.mockUrl}"\nmodels = ["sub-plan"]\n\n[[combos]]\nname = "plan"\ntargets = [{ target = "sub/sub-plan" }]\n`,
    );
    await dialog.getByRole('button', { name: 'Check' }).click();
    const named = dialog.getByTestId('import-login');
    await named.waitFor();
    assert.match(await text(named), new RegExp(`^New: your Claude login will be sent to http://${host}, not the subscription's own host\\.`));
    const row = dialog.getByRole('table', { name: 'What it sends where' }).getByRole('row').filter({ hasText: 'Your Claude login' });
    assert.equal(await text(row), `Your Claude loginhttp://${host}sub/loginnew`);
    await shot('import-login', p);
    await dialog.getByRole('button', { name: 'Import and allow these destinations' }).click();
    const waiting = dialog.getByTestId('import-login-waiting');
    await waiting.waitFor();
    assert.equal(await text(waiting), `Your Claude login is not sent to http://${host} until you confirm sub on the Providers page.`);

    // Allowing the destinations did not confirm it: a subscriber's turn goes nowhere.
    const before = await asSubscriber();
    assert.equal(before.status, 503, await before.text());

    await nav('Providers');
    const card = p.getByRole('article', { name: 'Provider sub' });
    const asked = new Promise((resolve) => {
      p.once('dialog', async (question) => {
        resolve(question.message());
        await question.accept();
      });
    });
    await card.getByRole('button', { name: 'Confirm provider sub' }).click();
    assert.equal(await asked, `Send your Claude login to http://${host}?`);
    await eventually(async () => (await asSubscriber()).status === 200, { what: 'the confirmed login to be sent' });
    assert.deepEqual(errors.map(String), [], 'no uncaught error in the page');
  } finally {
    if (process.exitCode) process.stderr.write(`--- switchyard log (login) ---\n${moved.serverLog()}\n`);
    await context.close();
    await moved.close();
  }
});
