//! Files the UI hands to the browser: an exported config, a usage CSV.

/**
 * Offers `text` as a file download named `name`. Where the browser refuses (no object URLs),
 * nothing happens: callers also show the text for copying.
 */
export function download(name: string, type: string, text: string): void {
  if (typeof URL.createObjectURL !== 'function') return;
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  URL.revokeObjectURL(url);
}
