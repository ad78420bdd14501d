import { useEffect, useRef, useState } from 'react';
import type uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Bucket } from '../bindings/Bucket';
import { useAppliedTheme } from '../app/theme';
import { COUNT_STEPS, drawnValues, type ChartData } from '../usage/chart';
import { formatBucket, timeTick } from '../usage/range';

const BUCKET_MS: Record<Bucket, number> = { hour: 3_600_000, day: 86_400_000 };
/** Colours of the series, in order; the stylesheet sets them per theme. */
const SERIES_VARS = ['--chart-1', '--chart-2', '--chart-3', '--chart-4', '--chart-5', '--chart-6'];
/** Where no stylesheet answers (tests). */
const FALLBACK = '#2f6fde';

let plotClass: Promise<typeof uPlot> | undefined;

/** uPlot, fetched once by the first chart drawn (one import, however many charts ask at once). */
function loadPlot(): Promise<typeof uPlot> {
  plotClass ??= import('uplot').then((module) => module.default);
  return plotClass;
}

type Palette = { series: string[]; text: string; grid: string };

function palette(element: Element): Palette {
  const style = getComputedStyle(element);
  const read = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback;
  return {
    series: SERIES_VARS.map((name) => read(name, FALLBACK)),
    text: read('--muted', '#5c6570'),
    grid: read('--border', '#d9dde3'),
  };
}

/**
 * A usage chart on one canvas (uPlot, loaded with the first chart so pages without one do not
 * carry it): bars per bucket, stacked (the first series on top) or overlaid (later series in
 * front, for a part of a whole such as fallbacks among requests). The legend shows each
 * series' total over the range, and its own value in the bucket under the pointer. Times are
 * UTC, as the aggregates are. Redrawn when the data or the theme changes.
 */
export function UsageChart({
  label,
  data,
  bucket,
  format,
  ticks,
  counts = false,
  stacked = false,
  height = 220,
  testId,
}: {
  label: string;
  data: ChartData;
  bucket: Bucket;
  /** A value for the legend. */
  format: (value: number) => string;
  /** The y axis' labels, all at once (default: `format` of each). */
  ticks?: (values: number[]) => string[];
  /** Whole numbers: the y axis steps by 1, 2, 5, 10, ... */
  counts?: boolean;
  stacked?: boolean;
  height?: number;
  testId?: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const theme = useAppliedTheme();
  const [failed, setFailed] = useState(false);

  useEffect(() => {
    const element = box.current;
    if (!element) return undefined;
    let plot: uPlot | undefined;
    let resize: ResizeObserver | undefined;
    let cancelled = false;
    loadPlot()
      .then((UPlot) => {
        if (cancelled) return;
        const colours = palette(element);
        const drawn = drawnValues(
          data.series.map((s) => s.values),
          stacked,
        );
        const width = Math.max(element.clientWidth, 280);
        const half = BUCKET_MS[bucket] / 2;
        const first = data.x[0] ?? 0;
        const last = data.x[data.x.length - 1] ?? first;
        const axis: uPlot.Axis = {
          stroke: colours.text,
          grid: { stroke: colours.grid, width: 1 },
          ticks: { stroke: colours.grid, width: 1 },
        };
        const options: uPlot.Options = {
          width,
          height,
          ms: 1,
          tzDate: (ms) => UPlot.tzDate(new Date(ms), 'Etc/UTC'),
          cursor: { drag: { x: false, y: false }, points: { show: false } },
          legend: { live: true },
          scales: {
            x: { time: true, range: () => [first - half, last + half] },
            y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.08 : 1] },
          },
          axes: [
            { ...axis, values: (_u, at) => at.map(timeTick) },
            { ...axis, size: 64, values: (_u, at) => (ticks ? ticks(at) : at.map(format)), ...(counts ? { incrs: COUNT_STEPS } : {}) },
          ],
          series: [
            { label: 'UTC', value: (_u, ms) => (ms === null ? `all ${bucket}s` : formatBucket(ms, bucket)) },
            ...data.series.map((s, i): uPlot.Series => {
              const total = s.values.reduce((a, b) => a + b, 0);
              const colour = colours.series[i % colours.series.length] ?? FALLBACK;
              return {
                label: s.label,
                stroke: colour,
                fill: colour,
                width: 1,
                points: { show: false },
                paths: UPlot.paths.bars?.({ size: [0.7, 48] }),
                // The legend tells each series' own value (not where its stack ends), and its
                // total while the pointer is elsewhere.
                value: (_u, _drawn, _series, index) => format(index === null ? total : (s.values[index] ?? 0)),
              };
            }),
          ],
        };
        plot = new UPlot(options, [data.x, ...drawn], element);
        if (typeof ResizeObserver !== 'undefined') {
          resize = new ResizeObserver(() => plot?.setSize({ width: Math.max(element.clientWidth, 280), height }));
          resize.observe(element);
        }
      })
      .catch(() => {
        if (!cancelled) setFailed(true);
      });
    return () => {
      cancelled = true;
      resize?.disconnect();
      plot?.destroy();
    };
  }, [data, bucket, format, ticks, counts, stacked, height, theme]);

  return (
    <figure className="usage-chart" aria-label={label} data-testid={testId}>
      <div ref={box} className="usage-chart-canvas" />
      {failed ? <p className="muted">This chart cannot be drawn here; the figures above are the same.</p> : null}
    </figure>
  );
}
