// Issue 30, point 3: the doctor on the Overview, in a real browser against a real
// `switchyard serve --ui` and the real mock upstream. A provider added through the API at a
// host nobody confirmed is a finding (`destination_unconfirmed`): the Overview lists it with
// its evidence, Apply confirms it with the digest shown, the finding is gone, and the provider
// that was benched now routes.
import assert from 'node:assert/strict';
import { copyFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { artifactsDir, eventually, launchBrowser, repoDir, startStack } from './harness.mjs';

let stack;
let browser;

before(async () => {
  stack = await startStack({ script: '' });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  if (stack && process.exitCode) process.stderr.write(`--- switchyard log ---\n${stack.serverLog()}\n`);
  await stack?.close();
});

async function api(method, route, body) {
  const response = await fetch(`${stack.baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
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
  return response.status;
}

test('Apply on the Overview confirms a destination the doctor found unconfirmed: the finding is gone and the provider routes', async () => {
  const id = 'destination_unconfirmed:newp';
  // No `confirm`: its requests would go to a host never confirmed, so it is benched.
  const created = await api('POST', '/api/providers', { id: 'newp', kind: 'openai', base_url: `${stack.mockUrl}/v1`, models: ['gpt-ok'] });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const key = (await api('POST', '/api/keys', { name: 'doctor-e2e' })).body.key;
  assert.notEqual(await chat(key, 'newp/gpt-ok'), 200, 'benched before');
  const seen = (await api('GET', '/api/doctor')).body.find((f) => f.id === id);
  assert.ok(seen, 'the doctor names it');
  assert.equal(seen.action.kind, 'apply');

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const errors = [];
  page.on('pageerror', (error) => errors.push(error));
  const applies = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && new URL(request.url()).pathname.startsWith('/api/doctor/')) {
      applies.push({ path: new URL(request.url()).pathname, body: request.postDataJSON() });
    }
  });
  try {
    await page.goto(`${stack.baseUrl}/`);
    await page.getByLabel('Management token').fill(stack.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();

    const doctor = page.getByTestId('doctor');
    const finding = doctor.getByRole('listitem', { name: seen.title });
    await finding.waitFor();
    for (const line of seen.evidence) await finding.getByText(line, { exact: true }).waitFor();
    await finding.getByText(seen.action.says, { exact: true }).waitFor();
    const shot = path.join(artifactsDir, 'doctor-finding.png');
    await page.screenshot({ path: shot, fullPage: true });
    if (process.env.SWITCHYARD_UPDATE_SCREENSHOTS === '1') {
      await copyFile(shot, path.join(repoDir, 'docs', 'screenshots', 'doctor.png'));
    }

    await finding.getByRole('button', { name: /^Apply/ }).click();
    await doctor.getByTestId('doctor-applied').waitFor();
    assert.equal(await doctor.getByTestId('doctor-applied').textContent(), `Applied: ${seen.action.says}.`);
    await finding.waitFor({ state: 'detached' });
    assert.deepEqual(applies, [{ path: '/api/doctor/destination_unconfirmed%3Anewp/apply', body: { digest: seen.digest } }]);

    // The fix happened in the server: nothing left to confirm, the finding is gone, it routes.
    assert.deepEqual((await api('GET', '/api/providers/newp')).body.unconfirmed, []);
    assert.ok(!(await api('GET', '/api/doctor')).body.some((f) => f.id === id), 'the finding is gone');
    await eventually(async () => (await chat(key, 'newp/gpt-ok')) === 200, { what: 'newp to route once confirmed' });
    await page.screenshot({ path: path.join(artifactsDir, 'doctor-applied.png'), fullPage: true });
    assert.deepEqual(errors.map(String), [], 'no uncaught error in the page');
  } finally {
    await context.close();
  }
});
