/**
 * A pino JSON line as a person reads it on a terminal, for standalone mode started there:
 * `09:43:41 INFO  [Context] message  key=value …`, a request as `GET /v1/login → 200 (5 ms)`.
 * Nest's start-up chatter at info (each controller's and route's line, each module loaded) is
 * dropped: some fifty lines that scrolled the banner away; its warnings and errors stay.
 */

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};

/** Nest's own contexts whose info lines say only that the wiring is as the code declares it. */
const CHATTER = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestApplication',
]);

/** Fields every line has, or that are shown another way. */
const SHOWN = new Set([
  'level',
  'time',
  'pid',
  'hostname',
  'name',
  'context',
  'msg',
  'req',
  'res',
  'responseTime',
]);

interface PinoLine {
  level?: number;
  time?: string | number;
  context?: string;
  msg?: string;
  req?: { method?: string; url?: string };
  res?: { statusCode?: number };
  responseTime?: number;
  err?: { message?: string; stack?: string };
  [field: string]: unknown;
}

function clockOf(time: PinoLine['time']): string {
  const date = time === undefined ? new Date() : new Date(time);
  return Number.isNaN(date.getTime()) ? '--:--:--' : date.toTimeString().slice(0, 8);
}

function valueText(value: unknown): string {
  return typeof value === 'string' && !/\s/.test(value) ? value : JSON.stringify(value);
}

/** The line to print for one JSON line, or undefined for none. Text that is not JSON is kept. */
export function readableLogLine(json: string): string | undefined {
  let line: PinoLine;
  try {
    line = JSON.parse(json) as PinoLine;
  } catch {
    return json.replace(/\n$/, '');
  }
  const level = line.level ?? 30;
  if (level <= 30 && line.context !== undefined && CHATTER.has(line.context)) return undefined;
  const parts = [clockOf(line.time), (LEVELS[level] ?? String(level)).padEnd(5)];
  if (line.context) parts.push(`[${line.context}]`);
  if (line.req?.method && line.res?.statusCode !== undefined) {
    const took = line.responseTime === undefined ? '' : ` (${line.responseTime} ms)`;
    parts.push(`${line.req.method} ${line.req.url ?? ''} → ${line.res.statusCode}${took}`);
  } else if (line.msg !== undefined) {
    parts.push(line.msg);
  }
  const extra = Object.entries(line)
    .filter(([key, value]) => !SHOWN.has(key) && value !== undefined && key !== 'err')
    .map(([key, value]) => `${key}=${valueText(value)}`);
  if (extra.length > 0) parts.push(` ${extra.join(' ')}`);
  const text = parts.join(' ');
  return line.err?.stack ? `${text}\n${line.err.stack}` : text;
}
