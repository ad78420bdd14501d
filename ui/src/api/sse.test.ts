import { describe, expect, it } from 'vitest';
import { SseParser } from './sse';

const stream = 'data: {"layer":"breaker"}\n\nevent: resync\ndata: {}\n\n: comment\n\ndata: a\ndata: b\n\n';

describe('SseParser', () => {
  it('parses whole frames', () => {
    expect(new SseParser().push(stream)).toEqual([
      { event: 'message', data: '{"layer":"breaker"}' },
      { event: 'resync', data: '{}' },
      { event: 'message', data: 'a\nb' },
    ]);
  });

  it('gives the same frames in any chunking, CRLF included', () => {
    const text = stream.replace(/\n/g, '\r\n');
    for (let size = 1; size < 9; size++) {
      const parser = new SseParser();
      const frames = [];
      for (let i = 0; i < text.length; i += size) frames.push(...parser.push(text.slice(i, i + size)));
      expect(frames.map((f) => f.event)).toEqual(['message', 'resync', 'message']);
      expect(frames[2]?.data).toBe('a\nb');
    }
  });

  it('holds an incomplete frame back', () => {
    const parser = new SseParser();
    expect(parser.push('data: x\n')).toEqual([]);
    expect(parser.push('\n')).toEqual([{ event: 'message', data: 'x' }]);
  });
});
