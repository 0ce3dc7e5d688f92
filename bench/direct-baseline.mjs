// The "direct" baseline for bench/small-queries.mjs: the least a SQL-over-HTTP endpoint can do on
// this stack (Fastify + pg Pool, no auth, no queue), so that Sluice's overhead can be read off it.
//
// Run alone:  node bench/direct-baseline.mjs   (listens on 127.0.0.1, prints the URL, Ctrl-C stops)
import Fastify from 'fastify';
import pg from 'pg';
import { pathToFileURL } from 'node:url';

/**
 * Starts the baseline server in this process on a free loopback port.
 * @param {{ databaseUrl: string, poolSize?: number }} options
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
export async function startDirectBaseline({ databaseUrl, poolSize = 16 }) {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  // An idle client that loses its connection must not crash the bench.
  pool.on('error', () => {});
  const app = Fastify({ logger: false });

  app.post('/v1/execute', async (request, reply) => {
    const statement = request.body?.statement;
    if (typeof statement !== 'string' || statement === '') {
      return reply.code(400).send({ error: 'statement required' });
    }
    try {
      // rowMode array: the same row shape as Sluice's default JSON array format.
      const result = await pool.query({ text: statement, rowMode: 'array' });
      return { data: result.rows };
    } catch (err) {
      return reply.code(400).send({ error: err instanceof Error ? err.message : String(err) });
    }
  });

  // Fail before the load starts if the database is unreachable.
  await pool.query('select 1');
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  let closing;
  return {
    url: address,
    // Idempotent: the bench closes it after its run and again in its cleanup.
    close() {
      closing ??= app.close().then(() => pool.end());
      return closing;
    },
  };
}

// Stand-alone use: `node bench/direct-baseline.mjs`.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const databaseUrl =
    process.env.BENCH_DATABASE_URL ??
    process.env.DATABASE_URL ??
    'postgresql://root@127.0.0.1:5432/test';
  const server = await startDirectBaseline({ databaseUrl });
  console.log(`direct baseline on ${server.url}  (POST /v1/execute {"statement": "..."})`);
  const stop = () => server.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
