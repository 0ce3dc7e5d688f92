import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { HttpResult, e2eEnv, eventually, execute, request } from './client';
import { connectTestRedis, keysMatching, unlinkEach } from './redis';
import { ExtraApi, startExtraApi } from './extra-api';
import { ServiceProcess, startProcess } from './service';

/** What the lanes specs share: reading queries and metrics, and deployments of their own. */
const env = e2eEnv();
export const PARQUET = { accept: 'application/parquet' };

export interface QueryView {
  query_id: string;
  state: string;
  lane: string;
  queue_position: number | null;
  started_at: string | null;
}

export async function queryOf(id: string, token: string, baseUrl?: string): Promise<QueryView> {
  const res = await request(undefined, {
    method: 'GET',
    path: `/v1/queries/${id}`,
    token,
    baseUrl,
  });
  expect(res.status).toBe(200);
  return res.json as QueryView;
}

/** The caller's queries as GET /v1/queries lists them, newest first. */
export async function queries(token: string, baseUrl: string): Promise<QueryView[]> {
  const res = await request(undefined, { method: 'GET', path: '/v1/queries', token, baseUrl });
  expect(res.status).toBe(200);
  return res.json as QueryView[];
}

/** One sample of a Prometheus text exposition; undefined when it is absent. */
export function sample(
  text: string,
  name: string,
  labels: Record<string, string>,
): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.includes(w)));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

/** A worker on a deployment's own key prefix, serving the given lanes. */
export function startWorker(prefix: string, extra: Record<string, string>): ServiceProcess {
  return startProcess('worker', {
    ...env.serviceEnv,
    ...env.redisEnv,
    SLUICE_KEY_PREFIX: prefix,
    SLUICE_WORKER_METRICS_PORT: '0',
    ...extra,
  });
}

/**
 * A deployment of its own (cluster: an api and workers on a key prefix of their own; standalone:
 * a second api with its own in-process queue and pool), so that the suite's other queries never
 * share its slots.
 */
export async function deployment(
  overrides: Record<string, string>,
  stops: (() => Promise<unknown>)[],
): Promise<{ api: ExtraApi; prefix: string }> {
  const prefix = `sluice-lanes-${randomBytes(4).toString('hex')}`;
  const api = await startExtraApi({
    SLUICE_KEY_PREFIX: prefix,
    SLUICE_MAX_QUEUE_WAIT_MS: '60000',
    ...overrides,
  });
  stops.push(async () => {
    await api.stop();
    if (e2eEnv().mode !== 'cluster') return;
    // Its queues, registry and streams: every key of the prefix.
    const redis = connectTestRedis();
    try {
      for (const pattern of [`${prefix}:*`, `{${prefix}}:*`]) {
        await unlinkEach(redis, await keysMatching(redis, pattern));
      }
    } finally {
      redis.disconnect();
    }
  });
  return { api, prefix };
}

/** Waits (30 s at most) until a deployment answers a query 200: its workers beat. */
export function firstAnswer(
  baseUrl: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<HttpResult> {
  return eventually(async () => {
    const res = await execute({ statement: 'select 1 as one' }, { token, baseUrl, headers });
    return res.status === 200 ? res : undefined;
  }, 30_000);
}

/** The nice value of a thread (Linux: /proc/<pid>/task/<tid>/stat, field 19). */
export function niceOf(pid: number, tid: number | string): number {
  const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  // After "pid (comm) ": state is field 3, nice field 19.
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19 - 3]);
}

/** The nice values of all a process's threads. */
export function niceOfThreads(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => niceOf(pid, tid));
}
