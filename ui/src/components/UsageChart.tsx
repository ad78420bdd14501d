import { useEffect, useRef, useState } from 'react';
import type uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Bucket } from '../bindings/Bucket';
import { useAppliedTheme } from '../app/theme';
import { stackFromTop, type ChartData } from '../usage/chart';
import { formatBucket } from '../usage/range';

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
 * front, for a part of a whole such as fallbacks among requests). Hovering shows each series'
 * own value in the legend. Times are UTC, as the aggregates are. Redrawn when the data or the
 * theme changes.
 */
export function UsageChart({
  label,
  data,
  bucket,
  format,
  stacked = false,
  height = 220,
  testId,
}: {
  label: string;
  data: ChartData;
  bucket: Bucket;
  format: (value: number) => string;
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
        const raw = data.series.map((s) => s.values);
        const drawn = stacked ? stackFromTop(raw) : raw;
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
          axes: [axis, { ...axis, size: 64, values: (_u, ticks) => ticks.map(format) }],
          series: [
            { value: (_u, ms) => (ms === null ? '—' : formatBucket(ms, bucket)) },
            ...data.series.map((s, i): uPlot.Series => {
              const colour = colours.series[i % colours.series.length] ?? FALLBACK;
              return {
                label: s.label,
                stroke: colour,
                fill: colour,
                width: 1,
                points: { show: false },
                paths: UPlot.paths.bars?.({ size: [0.7, 48] }),
                // The legend tells each series' own value, not where its stack ends.
                value: (_u, _drawn, _series, index) => (index === null ? '—' : format(s.values[index] ?? 0)),
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
  }, [data, bucket, format, stacked, height, theme]);

  return (
    <figure className="usage-chart" aria-label={label} data-testid={testId}>
      <div ref={box} className="usage-chart-canvas" />
      {failed ? <p className="muted">This chart cannot be drawn here; the figures above are the same.</p> : null}
    </figure>
  );
}
