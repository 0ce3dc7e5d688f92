import { SingleBar } from 'cli-progress';

interface Counts {
  rows?: number;
  bytes: number;
  /** Where the bytes come from, when not through the service (`from the store, 4 at a time`). */
  source?: string;
}

/**
 * The progress line of long work — rows, bytes, rate, elapsed — on stderr, and only when stderr
 * is a terminal: piped or redirected, nothing is written, so logs and CI output stay clean.
 */
export class ProgressReporter {
  private readonly bar: SingleBar | undefined;
  private readonly started = Date.now();
  private counts: Counts = { bytes: 0 };
  private stopped = false;

  constructor(
    stream: NodeJS.WriteStream = process.stderr,
    options: { clearOnStop?: boolean } = {},
  ) {
    if (!stream.isTTY) return;
    this.bar = new SingleBar({
      stream,
      fps: 5,
      hideCursor: true,
      // Kept for an export (what it did); cleared for a table printed after it.
      clearOnComplete: options.clearOnStop ?? false,
      // Over a narrow terminal the line is cut, never wrapped onto a second line.
      linewrap: false,
      format: () => this.line(),
    });
    this.bar.start(0, 0);
  }

  update(counts: Partial<Counts>): void {
    this.counts = { ...this.counts, ...counts };
    this.bar?.update(0);
  }

  /** Draws the last line and moves to the next; every way out calls it, more than once is fine. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.bar?.update(0);
    this.bar?.stop();
  }

  private line(): string {
    const seconds = (Date.now() - this.started) / 1000;
    const rows =
      this.counts.rows === undefined ? '' : `${this.counts.rows.toLocaleString('en-US')} rows  `;
    const rate = seconds > 0 ? this.counts.bytes / seconds : 0;
    const source = this.counts.source === undefined ? '' : `  ${this.counts.source}`;
    return `${rows}${size(this.counts.bytes)}  ${size(rate)}/s  ${clock(seconds)}${source}`;
  }
}

function size(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? value.toFixed(0) : value.toFixed(1)} ${units[unit]}`;
}

function clock(seconds: number): string {
  const s = Math.floor(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}
