// Large exports running beside another load: what isolation.mjs and small-queries.mjs share.
import { setTimeout as sleep } from 'node:timers/promises';
import { executeRequest } from './service.mjs';

/** The mixed-type select of bench/large-result.mjs over `rows` generated rows. */
export function exportStatement(rows) {
  return (
    `select g::int as i, (g::bigint * 1000003) as b, (g / 7.0)::numeric(20,6) as n, md5(g::text) as t, ` +
    `timestamptz '2024-01-01' + g * interval '1 second' as ts, (g % 2 = 0) as flag, ` +
    `jsonb_build_object('g', g, 'h', md5(g::text)) as j, g / 3.0::float8 as f, ` +
    `case when g % 100 = 0 then g end as sparse from generate_series(1, ${rows}) g`
  );
}

/**
 * The stored table of issue 39's mix, `rows` rows (the same columns, its last a text, 95% NULL):
 * large results are read from it, so that PostgreSQL generating rows is not what is measured.
 */
export const storedTableName = (rows) => `bench_large_result_${rows}`;
export function createStoredTable(table, rows) {
  return (
    `create table ${table} as select g::int as i, (g::bigint * 1000003) as b, ` +
    `(g / 7.0)::numeric(20,6) as n, md5(g::text) as t, ` +
    `timestamptz '2024-01-01' + g * interval '1 second' as ts, (g % 2 = 0) as flag, ` +
    `jsonb_build_object('g', g, 'h', md5(g::text)) as j, g / 3.0::float8 as f, ` +
    `case when g % 20 = 0 then 'note ' || (g % 7) end as sparse from generate_series(1, ${rows}) g`
  );
}

/** One export, body read at full speed and discarded; resolves with its outcome. */
function exportOnce(sluice, statement, accept, inFlight) {
  return new Promise((resolve) => {
    const body = Buffer.from(JSON.stringify({ statement }));
    const started = performance.now();
    let bytes = 0;
    const req = executeRequest(sluice, body, accept, (res) => {
      res.on('data', (c) => (bytes += c.length));
      res.on('end', () =>
        resolve({
          ok: res.statusCode === 200,
          status: res.statusCode,
          bytes,
          seconds: (performance.now() - started) / 1000,
        }),
      );
      res.on('error', () => resolve({ ok: false, aborted: true, bytes }));
      res.on('aborted', () => resolve({ ok: false, aborted: true, bytes }));
    });
    req.on('error', () => resolve({ ok: false, aborted: true, bytes }));
    req.end(body);
    inFlight.add(req);
    req.on('close', () => inFlight.delete(req));
  });
}

/**
 * `clients` clients exporting `statement` back to back (Accept: `accept`) until stop(); stop()
 * aborts the ones in flight and tells what was done: the whole exports and the bytes of the cut ones.
 */
export function startExports(sluice, { statement, accept, clients }) {
  const inFlight = new Set();
  let stopping = false;
  const done = [];
  let partialBytes = 0;
  const loops = Array.from({ length: clients }, async () => {
    while (!stopping) {
      const r = await exportOnce(sluice, statement, accept, inFlight);
      if (stopping && !r.ok) {
        partialBytes += r.bytes;
        break;
      }
      done.push(r);
      if (!r.ok) await sleep(200);
    }
  });
  return {
    done,
    async stop() {
      stopping = true;
      for (const req of inFlight) req.destroy();
      await Promise.all(loops);
      return { done, partialBytes };
    },
  };
}
