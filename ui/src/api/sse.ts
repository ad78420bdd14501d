//! A tiny parser of server-sent events (the subset `/api/events` uses: `event:` and `data:`
//! lines, frames separated by a blank line), fed with text as it arrives in any chunking.

export type SseFrame = { event: string; data: string };

export class SseParser {
  private buffer = '';
  /** A chunk that ended in `\r` may continue with `\n`: decide once the next one arrives. */
  private pendingCr = false;

  /** Feeds a chunk; answers the frames it completed, in order. */
  push(chunk: string): SseFrame[] {
    let text = (this.pendingCr ? '\r' : '') + chunk;
    this.pendingCr = text.endsWith('\r');
    if (this.pendingCr) text = text.slice(0, -1);
    this.buffer += text.replace(/\r\n?/g, '\n');
    const frames: SseFrame[] = [];
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) !== -1) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const frame = parseBlock(block);
      if (frame) frames.push(frame);
    }
    return frames;
  }
}

function parseBlock(block: string): SseFrame | null {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'event') event = value;
    else if (name === 'data') data.push(value);
  }
  if (data.length === 0 && event === 'message') return null;
  return { event, data: data.join('\n') };
}
