//! uPlot draws on a canvas, which jsdom does not have (and it reads `matchMedia` as it loads):
//! tests get this stand-in, which keeps what each chart was given.

type Options = { series: Array<{ label?: string; value?: (...args: unknown[]) => unknown }> } & Record<string, unknown>;

export default class FakePlot {
  static instances: FakePlot[] = [];
  static paths = { bars: () => () => null };
  static tzDate(date: Date): Date {
    return date;
  }

  destroyed = false;

  constructor(
    readonly opts: Options,
    readonly data: number[][],
    readonly target: HTMLElement,
  ) {
    FakePlot.instances.push(this);
  }

  setSize(): void {}

  destroy(): void {
    this.destroyed = true;
  }
}

/** The charts on screen now, by their figure's label. */
export function chartsShown(): Map<string, FakePlot> {
  const shown = new Map<string, FakePlot>();
  for (const plot of FakePlot.instances) {
    if (plot.destroyed) continue;
    const label = plot.target.closest('figure')?.getAttribute('aria-label');
    if (label) shown.set(label, plot);
  }
  return shown;
}

/** What a chart's legend says for each series at bucket `index` (`null`: the pointer is away). */
export function legendAt(plot: FakePlot, index: number | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  plot.opts.series.slice(1).forEach((s, i) => {
    out[s.label ?? `#${i}`] = s.value?.(null, index === null ? null : plot.data[i + 1]?.[index], i + 1, index);
  });
  return out;
}
