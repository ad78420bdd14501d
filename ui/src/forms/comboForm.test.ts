import { describe, expect, it } from 'vitest';
import { checkComboDraft, comboDraftOf, comboFields, emptyTarget, move } from './comboForm';
import { formFieldOf } from './fieldErrors';

describe('combo form', () => {
  it('moves rows up and down, and not past the ends', () => {
    expect(move(['a', 'b', 'c'], 2, -1)).toEqual(['a', 'c', 'b']);
    expect(move(['a', 'b', 'c'], 0, 1)).toEqual(['b', 'a', 'c']);
    expect(move(['a', 'b'], 0, -1)).toEqual(['a', 'b']);
    expect(move(['a', 'b'], 1, 1)).toEqual(['a', 'b']);
  });

  it('makes a ComboForm, leaving blank optional fields out', () => {
    const checked = checkComboDraft({
      name: 'smart',
      strategy: 'weighted',
      hedge: '',
      targets: [
        { target: 'openai/gpt-4o', credential: '', weight: '3', context_window: '' },
        { target: 'groq/llama', credential: 'main', weight: '', context_window: '128000' },
      ],
    });
    expect(checked.value).toEqual({
      name: 'smart',
      strategy: 'weighted',
      targets: [
        { target: 'openai/gpt-4o', weight: 3 },
        { target: 'groq/llama', credential: 'main', context_window: 128000 },
      ],
    });
  });

  it('round-trips a combo through the draft', () => {
    const combo = { name: 'c', strategy: 'priority' as const, targets: [{ target: 'p/m', weight: 2 }] };
    expect(checkComboDraft(comboDraftOf(combo)).value).toEqual(combo);
  });

  it('hedges after a percentile or milliseconds, and not when blank', () => {
    const draft = { name: 'c', strategy: 'priority' as const, hedge: 'p95', targets: [{ ...emptyTarget, target: 'p/m' }] };
    expect(checkComboDraft(draft).value?.hedge_after).toBe('p95');
    expect(checkComboDraft({ ...draft, hedge: ' 800 ' }).value?.hedge_after_ms).toBe(800);
    const off = checkComboDraft({ ...draft, hedge: '' }).value;
    expect(off).not.toHaveProperty('hedge_after');
    expect(off).not.toHaveProperty('hedge_after_ms');
    expect(checkComboDraft({ ...draft, hedge: 'soon' }).errors).toEqual({ hedge_after: 'A percentile such as p95, or milliseconds such as 800' });
    expect(checkComboDraft({ ...draft, hedge: '0' }).errors).toEqual({ hedge_after_ms: 'Milliseconds, 1–600000' });
    const combo = { name: 'c', strategy: 'priority' as const, targets: [{ target: 'p/m' }], hedge_after_ms: 800 };
    expect(checkComboDraft(comboDraftOf(combo)).value).toEqual(combo);
  });

  it('names the row and field at fault', () => {
    const checked = checkComboDraft({ name: '', strategy: 'priority', hedge: '', targets: [{ ...emptyTarget, target: 'p/m' }, { ...emptyTarget, target: 'nomodel', weight: '0' }] });
    expect(checked.errors).toEqual({ name: 'Name the combo', 'targets[1].target': 'Write provider/model', 'targets[1].weight': 'A whole number, 1–1000' });
  });

  it('places the server`s row errors on the row`s input', () => {
    const draft = { name: 'x', strategy: 'priority' as const, hedge: '', targets: [{ ...emptyTarget }, { ...emptyTarget }] };
    expect(formFieldOf('targets[1].target', comboFields(draft))).toBe('targets[1].target');
    expect(formFieldOf('targets[1].price.input_per_mtok', comboFields(draft))).toBe('targets[1]');
  });
});
