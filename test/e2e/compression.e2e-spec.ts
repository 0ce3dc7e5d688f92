import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { closeDb, login, request } from './support/client';
import { open, readAll } from './support/raw';

afterAll(closeDb);

// About 1.4 MB of CSV each. CSV carries no query id, so every request gets the same bytes.
const RESULTS: [string, string, boolean][] = [
  // The case: hex digests, where brotli's higher qualities compressed worse than 1.
  ['md5 digests', 'select g, md5(g::text) as h from generate_series(1, 35000) g', false],
  [
    'mixed order rows',
    `select 100000 + g as id, 'customer ' || (g * 7919 % 500) as customer,
            (array['new','paid','shipped','delivered','returned'])[g % 5 + 1] as status,
            (g * 7919 % 50000) / 100.0 as amount,
            timestamptz '2024-01-01' + g * interval '37 seconds' as created,
            case when g % 3 = 0 then null else 'ref-' || substr(md5(g::text), 1, 6) end as ref,
            g % 7 = 0 as flagged
       from generate_series(1, 16000) g`,
    true,
  ],
];

async function fetchCompressed(statement: string, encoding: string, level: number) {
  const res = await open(
    { statement },
    {
      accept: 'text/csv',
      'accept-encoding': 'gzip, br',
      'preferred-encoding': encoding,
      'preferred-compression-level': String(level),
    },
  );
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-encoding']).toBe(encoding);
  return readAll(res);
}

describe('Preferred-Compression-Level', () => {
  describe.each(RESULTS)('on %s', (_, statement, levelsPayOff) => {
    it.each(['gzip', 'br'])(
      'never gives a larger %s body for a higher level, and every level the same bytes',
      async (encoding) => {
        const sizes: number[] = [];
        let plain: Buffer | undefined;
        for (let level = 1; level <= 9; level++) {
          const body = await fetchCompressed(statement, encoding, level);
          const bytes = encoding === 'gzip' ? gunzipSync(body) : brotliDecompressSync(body);
          if (plain === undefined) {
            plain = bytes;
            expect(plain.length).toBeGreaterThan(1_000_000);
          } else {
            expect(bytes.equals(plain)).toBe(true);
          }
          sizes.push(body.length);
        }
        for (let level = 2; level <= 9; level++) {
          // [level, size] so that a failure names the level.
          expect([level, sizes[level - 1]]).toEqual([
            level,
            Math.min(sizes[level - 1], sizes[level - 2]),
          ]);
        }
        expect(sizes[8]).toBeLessThan(plain!.length * 0.6);
        // Ordinary rows still gain from a higher level: the levels did not all collapse to one.
        expect(sizes[8]).toBeLessThanOrEqual(sizes[0] * (levelsPayOff ? 0.95 : 1));
      },
    );
  });
});

describe('a compressed stream cancelled while it runs', () => {
  it.each(['gzip', 'br'])(
    'still decodes (%s), to every row it sent and the cancelled status, wherever the cancel lands',
    async (encoding) => {
      const token = await login();
      const decode = encoding === 'gzip' ? gunzipSync : brotliDecompressSync;
      // A batch of 5 rows takes 50 ms: the cancels land in its read, its encoding or its write.
      for (let i = 0; i < 16; i++) {
        const res = await open(
          {
            statement: 'select g, pg_sleep(0.01) from generate_series(1, 100000) g',
            fetch_size: 5,
          },
          { accept: 'application/stream+json', 'accept-encoding': encoding },
          token,
        );
        expect(res.headers['content-encoding']).toBe(encoding);
        const body = readAll(res);
        await new Promise((resolve) => setTimeout(resolve, (i % 8) * 7));
        const cancel = await request(undefined, {
          method: 'DELETE',
          path: `/v1/queries/${String(res.headers['x-query-id'])}`,
          token,
        });
        expect(cancel.status).toBe(200);
        const lines = decode(await body)
          .toString()
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as { data?: [number, string][]; status?: object });
        expect(lines[lines.length - 1].status).toMatchObject({ sql_state: '57014' });
        const rows = lines.flatMap((line) => line.data ?? []).map(([g]) => g);
        expect(rows).toEqual(rows.map((_, at) => at + 1));
      }
    },
  );
});
