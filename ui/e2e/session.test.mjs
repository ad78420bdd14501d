// Issue 26, point 2: the web UI never keeps the management token, and a restart of the server
// ends its session. In a real browser against a real `switchyard serve --ui`: sign in, see
// that only the sign-in carried the management token and that nothing is stored, kill and
// restart the server on the same port, and see the page ask to sign in again without sending
// any credential, while the new server refuses the old session and still takes the token.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually, launchBrowser, startStack } from './harness.mjs';

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

/** `GET route` with `credential` as the bearer token, as a script would: the status. */
async function status(route, credential) {
  const response = await fetch(`${stack.baseUrl}${route}`, { headers: { authorization: `Bearer ${credential}` } });
  await response.body?.cancel();
  return response.status;
}

test('a restart of the server ends the UI session: the page asks to sign in again, the old session is refused', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const errors = [];
  page.on('pageerror', (error) => errors.push(error));
  // Every request the page sends to the server, with the credential it carried.
  const sent = [];
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.origin !== stack.baseUrl) return;
    sent.push(request.allHeaders().then((headers) => ({ method: request.method(), path: url.pathname, auth: headers.authorization ?? null })));
  });
  const requests = () => Promise.all(sent);
  const signIn = async () => {
    await page.getByLabel('Management token').fill(stack.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Add your first provider', level: 1 }).waitFor();
  };
  /** The session the page's event stream carries, once it has opened one. */
  const streamSession = async (nth) => {
    const streams = await eventually(async () => {
      const opened = (await requests()).filter((r) => r.path === '/api/events');
      return opened.length > nth && opened;
    }, { what: `event stream ${nth + 1}` });
    return streams[nth].auth.replace(/^Bearer /, '');
  };
  try {
    await page.goto(`${stack.baseUrl}/`);
    await signIn();
    const session = await streamSession(0);
    assert.match(session, /^sy-ui-[0-9a-f]{32}$/);
    assert.notEqual(session, stack.token);

    // The management token went to the sign-in and nowhere else; nothing is stored.
    const all = await requests();
    const withToken = all.filter((r) => r.auth === `Bearer ${stack.token}`).map((r) => `${r.method} ${r.path}`);
    assert.deepEqual(withToken, ['POST /api/session']);
    assert.ok(all.filter((r) => r.path.startsWith('/api/') && r.path !== '/api/session').every((r) => r.auth === `Bearer ${session}`));
    const storage = await page.evaluate(() => JSON.stringify([{ ...sessionStorage }, { ...localStorage }]));
    assert.ok(!storage.includes(stack.token) && !storage.includes(session), `nothing secret is stored: ${storage}`);

    // The management token is for the CLI and scripts, but not for the event stream.
    assert.equal(await status('/api/events', stack.token), 403);
    assert.equal(await status('/api/monitoring/health', session), 200);

    await stack.restart();
    await page.getByText('The connection to the server was lost (it may have stopped or restarted). Sign in again.').waitFor();
    await page.getByLabel('Management token').waitFor();
    const asked = (await requests()).length;

    // The new server refuses the old session everywhere and still takes the management token.
    assert.equal(await status('/api/monitoring/health', session), 401);
    assert.equal(await status('/api/events', session), 401);
    assert.equal(await status('/api/monitoring/health', stack.token), 200);

    // Since the stream dropped the page sent nothing with a credential: no reconnection.
    const since = (await requests()).slice(asked);
    assert.deepEqual(since.filter((r) => r.auth !== null), []);
    assert.equal((await requests()).filter((r) => r.path === '/api/events').length, 1);

    // Signing in again works against the new server, with a new session.
    await signIn();
    const again = await streamSession(1);
    assert.notEqual(again, session);
    assert.equal(await status('/api/monitoring/health', again), 200);

    // A reload forgets the session too.
    await page.reload();
    await page.getByLabel('Management token').waitFor();
    assert.deepEqual(errors.map(String), [], 'no uncaught error in the page');
  } finally {
    await context.close();
  }
});
