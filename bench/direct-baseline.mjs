// The floor for bench/small-queries.mjs: the leanest SQL-over-HTTP endpoint this stack allows — a
// plain node:http server and a pg Pool, rows in array mode, no framework, no auth, no queue — in
// a process of its own (the load client does not share its event loop), so that Sluice's
// overhead is read off the fastest floor, not a flattering one.
//
// Run alone:  node bench/direct-baseline.mjs   (listens on 127.0.0.1, prints the URL, Ctrl-C stops)
import pg from 'pg';
import { floorServer } from './lib/floor-server.mjs';

const databaseUrl =
  process.env.BENCH_DATABASE_URL ??
  process.env.DATABASE_URL ??
  'postgresql://root@127.0.0.1:5432/test';
const poolSize = Number(process.env.BENCH_DIRECT_POOL_SIZE ?? 16);

const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
// An idle client that loses its connection must not crash the bench.
pool.on('error', () => {});

// rowMode array: the same row shape as Sluice's default JSON array format.
const server = floorServer((statement) =>
  pool
    .query({ text: statement, rowMode: 'array' })
    .then((result) => JSON.stringify({ data: result.rows })),
);

// Fail before the load starts if the database is unreachable.
await pool.query('select 1');
server.listen(0, '127.0.0.1', () => {
  console.log(`direct baseline on http://127.0.0.1:${server.address().port}`);
});
const stop = () => {
  server.closeAllConnections();
  server.close(() => pool.end().then(() => process.exit(0)));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
