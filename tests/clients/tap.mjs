// A relay between a CLI and the server it is pointed at that notes every HTTP/1.1 exchange it
// carries: the request's method, path, headers and body, the status of the answer, and when each
// arrived. The mock records only what reaches an upstream; this sees what the CLI itself sent to
// Switchyard, including what Switchyard answers on its own (a WebSocket upgrade's 426, a 404 for
// a path it does not serve), and how long the CLI took to go on after such an answer.
//
// Bytes go through unchanged but for the `Host` header, which names the relay's port and is
// rewritten to the server's (Switchyard refuses a Host that is not its own). A connection that
// switches protocols (101) is relayed raw from then on. A request body that is not framed by
// `Content-Length` (chunked) is not read: its exchange says so (`body: null`), and so does every
// later request on that connection, so an assertion on bodies fails rather than passing on
// nothing.

import net from 'node:net';
import { performance } from 'node:perf_hooks';

/** The most of one body kept for the record; a CLI's turn is far below it. */
const BODY_LIMIT = 16 * 1024 * 1024;

/**
 * Starts a relay on 127.0.0.1 in front of `target` (an `http://127.0.0.1:PORT` origin) and
 * resolves with `{ url, exchanges(), close() }`: `url` is the relay's origin, `exchanges()` every
 * exchange so far in the order the requests arrived, each `{ conn, seq, at, method, path,
 * headers, body, status, answeredAt }` (`at` and `answeredAt` in `performance.now()`
 * milliseconds; `status` and `answeredAt` null until the answer's head came; header names in
 * lower case).
 */
export function startTap(target) {
  const upstream = new URL(target);
  const exchanges = [];
  const sockets = new Set();
  let connections = 0;
  const server = net.createServer((client) => {
    const conn = ++connections;
    const onward = net.connect(Number(upstream.port), upstream.hostname);
    sockets.add(client);
    sockets.add(onward);
    client.setNoDelay(true);
    onward.setNoDelay(true);
    // Requests on this connection still waiting for their answer, oldest first.
    const waiting = [];
    let raw = false;
    const requests = new MessageReader('request');
    const responses = new MessageReader('response');
    client.on('data', (data) => {
      if (raw) return void onward.write(data);
      for (const part of requests.feed(data)) {
        if (part.kind === 'head') {
          const exchange = {
            conn,
            seq: exchanges.length,
            at: performance.now(),
            method: part.method,
            path: part.target,
            headers: part.headers,
            // The body's bytes as they come; `null` when it cannot be read (see above).
            chunks: part.framing === 'length' || part.framing === 'none' ? [] : null,
            status: null,
            answeredAt: null,
          };
          exchanges.push(exchange);
          waiting.push(exchange);
          onward.write(hostRewritten(part.raw, upstream.host));
        } else {
          if (part.kind === 'body') {
            const exchange = exchanges.findLast((e) => e.conn === conn);
            exchange.kept = (exchange.kept ?? 0) + part.raw.length;
            if (exchange.chunks !== null && exchange.kept <= BODY_LIMIT) exchange.chunks.push(part.raw);
          }
          if (part.raw.length > 0) onward.write(part.raw);
        }
        if (part.kind === 'opaque') raw = true;
      }
    });
    onward.on('data', (data) => {
      if (raw) return void client.write(data);
      for (const part of responses.feed(data)) {
        // An interim answer (100 Continue) is not the answer, but 101 ends the HTTP part.
        if (part.kind === 'head' && (part.status >= 200 || part.status === 101)) {
          const exchange = waiting.shift();
          if (exchange) {
            exchange.status = part.status;
            exchange.answeredAt = performance.now();
          }
        }
        if (part.kind === 'opaque') raw = true;
        if (part.raw.length > 0) client.write(part.raw);
      }
    });
    const end = () => {
      client.destroy();
      onward.destroy();
      sockets.delete(client);
      sockets.delete(onward);
    };
    client.on('end', () => onward.end());
    onward.on('end', () => client.end());
    client.on('close', end);
    onward.on('close', end);
    client.on('error', end);
    onward.on('error', end);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        exchanges: () =>
          exchanges.map(({ chunks, kept: _, ...exchange }) => ({
            ...exchange,
            body: chunks && Buffer.concat(chunks).toString('utf8'),
          })),
        close: () =>
          new Promise((done) => {
            for (const socket of sockets) socket.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

/** A request head with its `Host` header naming `host`. */
function hostRewritten(head, host) {
  const text = head.toString('latin1');
  return Buffer.from(text.replace(/^host:[^\r\n]*\r\n/im, `Host: ${host}\r\n`), 'latin1');
}

/**
 * Splits one direction of an HTTP/1.1 connection into parts, each with the raw bytes it covers:
 * `head` (a start line and headers), `body` (bytes of a body, framing included), `opaque` (the
 * rest of a connection that can no longer be read: a chunked request body, a body read until
 * the connection closes). The raw bytes of all parts, in order, are the bytes fed.
 */
class MessageReader {
  constructor(kind) {
    this.kind = kind;
    this.buffer = Buffer.alloc(0);
    this.state = 'head';
    this.remaining = 0;
    this.chunk = null;
  }

  feed(data) {
    const parts = [];
    if (this.state === 'opaque') return [{ kind: 'opaque', raw: data }];
    this.buffer = Buffer.concat([this.buffer, data]);
    for (;;) {
      if (this.state === 'head') {
        const end = this.buffer.indexOf('\r\n\r\n');
        if (end < 0) break;
        const raw = this.buffer.subarray(0, end + 4);
        this.buffer = this.buffer.subarray(end + 4);
        const head = parseHead(raw, this.kind);
        parts.push(head);
        if (head.framing === 'length') {
          this.remaining = head.length;
          this.state = head.length > 0 ? 'length' : 'head';
        } else if (head.framing === 'chunked' && this.kind === 'response') {
          this.state = 'chunked';
          this.chunk = { phase: 'size' };
        } else if (head.framing === 'none') {
          this.state = 'head';
        } else {
          this.state = 'opaque';
          parts.push({ kind: 'opaque', raw: this.buffer });
          this.buffer = Buffer.alloc(0);
          break;
        }
      } else if (this.state === 'length') {
        if (this.buffer.length === 0) break;
        const take = Math.min(this.remaining, this.buffer.length);
        parts.push({ kind: 'body', raw: this.buffer.subarray(0, take) });
        this.buffer = this.buffer.subarray(take);
        this.remaining -= take;
        if (this.remaining === 0) this.state = 'head';
      } else if (this.state === 'chunked') {
        const taken = this.readChunked();
        if (taken === 0) break;
        parts.push({ kind: 'body', raw: this.buffer.subarray(0, taken) });
        this.buffer = this.buffer.subarray(taken);
      }
    }
    return parts;
  }

  /** How many bytes of the buffer the chunked body's framing and data cover, at most. */
  readChunked() {
    let at = 0;
    for (;;) {
      const chunk = this.chunk;
      if (chunk.phase === 'size' || chunk.phase === 'trailer' || chunk.phase === 'crlf') {
        const end = this.buffer.indexOf('\r\n', at);
        if (end < 0) return at;
        const line = this.buffer.subarray(at, end).toString('latin1');
        at = end + 2;
        if (chunk.phase === 'size') {
          const size = parseInt(line.split(';')[0].trim(), 16);
          if (size === 0) chunk.phase = 'trailer';
          else Object.assign(chunk, { phase: 'data', remaining: size });
        } else if (chunk.phase === 'crlf') {
          chunk.phase = 'size';
        } else if (line === '') {
          this.state = 'head';
          return at;
        }
      } else {
        const take = Math.min(chunk.remaining, this.buffer.length - at);
        if (take === 0) return at;
        at += take;
        chunk.remaining -= take;
        if (chunk.remaining === 0) chunk.phase = 'crlf';
      }
    }
  }
}

/** A start line and headers; how the body that follows is framed. */
function parseHead(raw, kind) {
  const [start, ...lines] = raw.toString('latin1').slice(0, -4).split('\r\n');
  const headers = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  const head = { kind: 'head', raw, headers };
  if (kind === 'request') {
    const [method, target] = start.split(' ');
    Object.assign(head, { method, target });
  } else {
    head.status = Number(start.split(' ')[1]);
  }
  const chunked = /\bchunked\b/i.test(headers['transfer-encoding'] ?? '');
  if (kind === 'response' && (head.status < 200 || head.status === 204 || head.status === 304)) {
    head.framing = head.status === 101 ? 'opaque' : 'none';
  } else if (chunked) {
    head.framing = 'chunked';
  } else if ('content-length' in headers) {
    head.framing = 'length';
    head.length = Number(headers['content-length']);
  } else {
    head.framing = kind === 'request' ? 'none' : 'opaque';
  }
  return head;
}
