// Servers on this machine: a fake Ollama on a random loopback port (the server is
// told to look there, `SWITCHYARD_LOCAL_PORTS`, beside a port nobody listens on for LM Studio)
// shows on the first-run page under "Runs on this machine" with its models, is added with one
// click, and a request for one of its models reaches it. Nothing sleeps: the page is awaited on
// what it shows.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { artifactsDir, launchBrowser, startStack } from './harness.mjs';

const MODELS = ['llama3.2:latest', 'qwen2.5-coder:7b'];

/** A fake Ollama: `GET /api/tags` lists MODELS; `POST /v1/chat/completions` answers, and records the model. */
async function fakeOllama() {
  const chats = [];
  const server = createServer((request, response) => {
    const reply = (status, body) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (request.method === 'GET' && request.url === '/api/tags') {
      return reply(200, { models: MODELS.map((name) => ({ name, model: name, size: 1_000_000 })) });
    }
    if (request.method === 'POST' && request.url === '/v1/chat/completions') {
      let text = '';
      request.on('data', (chunk) => (text += chunk));
      request.on('end', () => {
        const { model } = JSON.parse(text);
        chats.push(model);
        reply(200, {
          id: 'chatcmpl-local',
          object: 'chat.completion',
          created: 0,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: 'hello from the fake Ollama' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
        });
      });
      return undefined;
    }
    return reply(404, { error: 'not found' });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: server.address().port, chats, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** A loopback port nobody listens on: bound, then released. */
async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let ollama;
let stack;
let browser;

before(async () => {
  ollama = await fakeOllama();
  const nobody = await closedPort();
  stack = await startStack({ script: '', env: { SWITCHYARD_LOCAL_PORTS: `ollama:${ollama.port},lmstudio:${nobody}` } });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  if (stack && process.exitCode) process.stderr.write(`--- switchyard log ---\n${stack.serverLog()}\n`);
  await stack?.close();
  await ollama?.close();
});

const text = async (locator) => (await locator.textContent()) ?? '';

test('a model server running on this machine shows at first run and is added in one click, then routed to', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const p = await context.newPage();
  p.setDefaultTimeout(10_000);
  const errors = [];
  p.on('pageerror', (error) => errors.push(error));
  try {
    await p.goto(stack.link);
    await p.getByRole('heading', { name: 'Add your first provider', level: 1 }).waitFor();

    const local = p.getByRole('region', { name: 'Runs on this machine' });
    const item = local.getByRole('listitem', { name: `Ollama on port ${ollama.port}` });
    await item.waitFor();
    assert.equal(await local.getByRole('listitem').count(), 1, 'only what answered is listed');
    assert.match(await text(item), new RegExp(`http://127\\.0\\.0\\.1:${ollama.port}/v1`));
    assert.match(await text(item.getByTestId('local-models')), /^2 models: llama3\.2:latest, qwen2\.5-coder:7b$/);
    await p.screenshot({ path: path.join(artifactsDir, 'local-first-run.png'), fullPage: true });

    // The one click.
    await item.getByRole('button', { name: 'Add Ollama' }).click();
    assert.match(await text(p.getByTestId('local-added')), /Added provider ollama: send model: "ollama\/llama3\.2:latest"/);
    await item.getByText('added as ollama').waitFor();
    assert.equal(await item.getByRole('button', { name: 'Add Ollama' }).count(), 0);
    await p.screenshot({ path: path.join(artifactsDir, 'local-added.png'), fullPage: true });

    const headers = { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' };
    const provider = await (await fetch(`${stack.baseUrl}/api/providers/ollama`, { headers })).json();
    assert.equal(provider.preset, 'ollama');
    assert.equal(provider.effective_base_url, `http://127.0.0.1:${ollama.port}/v1`);
    assert.deepEqual(provider.unconfirmed, [], 'the URL that answered was confirmed with the add');

    const key = await (await fetch(`${stack.baseUrl}/api/keys`, { method: 'POST', headers, body: JSON.stringify({ name: 'local-e2e' }) })).json();
    const response = await fetch(`${stack.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'ollama/qwen2.5-coder:7b', messages: [{ role: 'user', content: 'hello' }] }),
    });
    const body = await response.json();
    assert.equal(response.status, 200, JSON.stringify(body));
    assert.equal(body.choices[0].message.content, 'hello from the fake Ollama');
    assert.deepEqual(ollama.chats, ['qwen2.5-coder:7b']);
    assert.deepEqual(errors.map(String), [], 'no uncaught error in the page');
  } finally {
    await context.close();
  }
});
