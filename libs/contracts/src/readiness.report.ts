import { statusOf } from './error.catalogue';
import { Status, okStatus } from './status';

/** How long one dependency may take to answer before it counts as down (ms). */
const CHECK_TIMEOUT_MS = 2_000;

/** Outcome of one readiness check. */
export interface CheckResult {
  ok: boolean;
  /** What was found, or why it failed. */
  detail: string;
  ms: number;
}

/** Body of /health/ready on the api and on workers: OK, or the 57P03 envelope plus checks. */
export interface ReadinessReport {
  status: Status;
  checks: Record<string, CheckResult>;
}

/** Runs a check, timing it; a throw or a timeout is a failed check with the reason. */
export async function check(what: string, run: () => Promise<string>): Promise<CheckResult> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not answer within ${CHECK_TIMEOUT_MS} ms`)),
      CHECK_TIMEOUT_MS,
    );
  });
  try {
    const detail = await Promise.race([run(), late]);
    return { ok: true, detail, ms: Date.now() - started };
  } catch (err) {
    return { ok: false, detail: (err as Error).message, ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

/** The report for a set of checks: OK, or 57P03 naming every check that failed. */
export function report(checks: Record<string, CheckResult>): ReadinessReport {
  const failed = Object.entries(checks).filter(([, c]) => !c.ok);
  if (failed.length === 0) return { status: okStatus('ready'), checks };
  const reason = `not ready: ${failed.map(([name, c]) => `${name}: ${c.detail}`).join('; ')}`;
  return { status: statusOf('UNAVAILABLE', reason), checks };
}
