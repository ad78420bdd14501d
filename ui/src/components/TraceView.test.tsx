import { render, screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { TraceEntry } from '../bindings/TraceEntry';
import { TraceView } from './TraceView';

describe('a routing trace', () => {
  it('marks the recovery probes a request triggered, sent or not', () => {
    const trace: TraceEntry[] = [
      { target: 'an/claude', credential: 'work', event: 'probe', bench: 'model_lock_lapsed' },
      { target: 'oa/gpt-4o', credential: 'k1', event: 'probe', bench: 'breaker_half_open', not_sent: 'probe_in_flight' },
      { target: 'oa/gpt-4o-mini', credential: 'k1', event: 'attempted', outcome: 'success', status: 200, millis: 12 },
    ];
    render(<TraceView trace={trace} label="trace" servedBy="oa/gpt-4o-mini" />);
    expect(screen.getAllByText('probe')).toHaveLength(2);
    expect(screen.getByText('· sent alongside, one token')).toBeInTheDocument();
    expect(screen.getByText('· not sent: probe in flight')).toBeInTheDocument();
  });

  it('says where a broken stream was continued, after how many characters, or why it was not', () => {
    const trace: TraceEntry[] = [
      { target: 'oa/gpt-4o', credential: 'k1', event: 'attempted', outcome: 'success', status: 200, millis: 12 },
      { target: 'ds/deepseek-chat', credential: 'main', event: 'continued', after_chars: 42, mechanism: 'prefix' },
      { target: 'smart', credential: '', event: 'not_continued', reason: 'inside_tool_call' },
    ];
    render(<TraceView trace={trace} label="trace" servedBy="oa/gpt-4o" />);
    expect(screen.getByText(/on ds\/deepseek-chat after 42 characters/)).toBeInTheDocument();
    expect(screen.getByText('not continued')).toBeInTheDocument();
    expect(screen.getByText(/inside tool call/)).toBeInTheDocument();
  });

  it('says where a session is pinned, where it moved from, and a wait for a free slot', () => {
    const trace: TraceEntry[] = [
      { target: 'an/claude', credential: 'k1', event: 'queued', millis: 300 },
      { target: 'an/claude', credential: 'k1', event: 'skipped', reason: 'at_capacity' },
      { target: 'an/claude', credential: 'k2', event: 'attempted', outcome: 'success', status: 200, millis: 40 },
      { target: 'an/claude', credential: 'k2', event: 'session', session: '1a2b3c4d5e6f', pin: 'moved', from: 'an/claude@k1' },
    ];
    render(<TraceView trace={trace} label="trace" servedBy="an/claude" />);
    expect(screen.getByText('queued')).toBeInTheDocument();
    expect(screen.getByText('300 ms')).toBeInTheDocument();
    expect(screen.getByText(/1a2b3c4d5e6f: moved here from an\/claude@k1/)).toBeInTheDocument();
  });

  it('says a session moved off where its stream broke, and why it came back', () => {
    const trace: TraceEntry[] = [
      { target: 'oa/gpt-4o', credential: 'k1', event: 'session', session: 'aaaaaaaaaaaa', pin: 'moved', from: 'oa/gpt-4o@k1', because: 'broke' },
      { target: 'an/claude', credential: 'k2', event: 'session', session: 'bbbbbbbbbbbb', pin: 'moved', from: 'oa/gpt-4o@k1', because: 'broke' },
      { target: 'oa/gpt-4o', credential: 'k1', event: 'session', session: 'cccccccccccc', pin: 'returned', because: 'served_whole_stream' },
    ];
    render(<TraceView trace={trace} label="trace" servedBy="oa/gpt-4o" />);
    expect(screen.getByText(/aaaaaaaaaaaa: its stream broke here: its next request starts elsewhere/)).toBeInTheDocument();
    expect(screen.getByText(/bbbbbbbbbbbb: moved here from oa\/gpt-4o@k1 \(its stream broke there\)/)).toBeInTheDocument();
    expect(screen.getByText(/cccccccccccc: back on its target \(it served a whole stream since\)/)).toBeInTheDocument();
  });

  it('says which attempt of a hedged first token won, and after how long', () => {
    const trace: TraceEntry[] = [
      { target: 'oa/gpt-4o', credential: 'k1', event: 'hedge', hedge: 'started', millis: 200 },
      { target: 'an/slow', credential: 'work', event: 'hedge', hedge: 'lost', millis: 260 },
      { target: 'oa/gpt-4o', credential: 'k1', event: 'hedge', hedge: 'won', millis: 260 },
      { target: 'oa/gpt-4o', credential: 'k1', event: 'attempted', outcome: 'success', status: 200, millis: 60 },
    ];
    render(<TraceView trace={trace} label="trace" servedBy="oa/gpt-4o" />);
    expect(screen.getAllByText('hedge')).toHaveLength(3);
    expect(screen.getByText(/hedged: oa\/gpt-4o won after 260 ms/)).toBeInTheDocument();
    expect(screen.getByText(/cancelled: the other answered first; charged nothing/)).toBeInTheDocument();
  });

  it('says when a fallback was started early, to answer by the deadline', () => {
    const trace: TraceEntry[] = [
      { target: 'oa/gpt-4o', credential: 'k1', event: 'hedge', hedge: 'started_early', millis: 2000 },
      { target: 'an/slow', credential: 'work', event: 'hedge', hedge: 'lost', millis: 2900 },
      { target: 'oa/gpt-4o', credential: 'k1', event: 'hedge', hedge: 'won', millis: 2900 },
    ];
    render(<TraceView trace={trace} label="trace" servedBy="oa/gpt-4o" />);
    expect(screen.getByText(/started early, so its answer could begin by the first-event deadline/)).toBeInTheDocument();
    expect(screen.getByText(/hedged: oa\/gpt-4o won after 2900 ms/)).toBeInTheDocument();
  });
});
