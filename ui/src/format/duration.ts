//! Durations for people: countdowns ("4m 05s") and setting hints ("10 s", "5 min").

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const pad = (n: number) => String(n).padStart(2, '0');

/**
 * A countdown: whole seconds, rounded up so "0s" only shows once the time is really over.
 * `59s`, `4m 05s`, `1h 02m`, `2d 03h`.
 */
export function formatCountdown(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return '0s';
  const total = Math.ceil(ms / SECOND);
  const days = Math.floor(total / 86_400);
  const hours = Math.floor((total % 86_400) / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  if (days > 0) return `${days}d ${pad(hours)}h`;
  if (hours > 0) return `${hours}h ${pad(minutes)}m`;
  if (minutes > 0) return `${minutes}m ${pad(seconds)}s`;
  return `${seconds}s`;
}

/** What is left of `remainingMs` (as read at `readAt`) at `now`, never below zero. */
export function remainingAt(remainingMs: number, readAt: number, now: number): number {
  return Math.max(0, remainingMs - Math.max(0, now - readAt));
}

/** A configured duration in the largest unit that keeps it exact: `250 ms`, `10 s`, `1.5 min`. */
export function formatSetting(ms: number): string {
  if (!Number.isFinite(ms)) return '';
  const units: Array<[number, string]> = [
    [DAY, 'd'],
    [HOUR, 'h'],
    [MINUTE, 'min'],
    [SECOND, 's'],
  ];
  for (const [size, name] of units) {
    if (ms >= size) {
      const value = ms / size;
      const shown = Number.isInteger(value) ? String(value) : value.toFixed(value < 10 ? 2 : 1).replace(/\.?0+$/, '');
      return `${shown} ${name}`;
    }
  }
  return `${ms} ms`;
}

/** "3 min ago", "just now": for log timestamps. */
export function formatAgo(at: number, now: number): string {
  const ms = now - at;
  if (ms < 5 * SECOND) return 'just now';
  if (ms < MINUTE) return `${Math.floor(ms / SECOND)} s ago`;
  if (ms < HOUR) return `${Math.floor(ms / MINUTE)} min ago`;
  if (ms < DAY) return `${Math.floor(ms / HOUR)} h ago`;
  return new Date(at).toLocaleString();
}

/** A latency: `< 1 ms`, `85 ms`, `1.25 s`. */
export function formatLatency(ms: number): string {
  if (!Number.isFinite(ms)) return '';
  if (ms < 0.5) return '< 1 ms';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}
