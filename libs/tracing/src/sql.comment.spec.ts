import type { Client } from 'pg';
import { connectTestDatabase } from '@test/settings';
import { withSqlComment } from './sql.comment';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe(withSqlComment.name, () => {
  it('appends the fields on a line of their own, keys sorted, values URL-encoded and quoted', () => {
    expect(withSqlComment('select 1', { traceparent: TRACEPARENT, tracestate: "a=1,b='*/" })).toBe(
      `select 1\n/*traceparent='${TRACEPARENT}',tracestate='a%3D1%2Cb%3D\\'%2A%2F'*/`,
    );
  });

  it('leaves a statement without fields as it is', () => {
    expect(withSqlComment('select 1', {})).toBe('select 1');
  });

  describe('on PostgreSQL', () => {
    let client: Client;
    beforeAll(async () => {
      client = await connectTestDatabase();
    });
    afterAll(async () => {
      await client.end();
    });

    it.each([
      ['a plain statement', 'select $1::int + 1 as n'],
      ['one that ends with a semicolon', 'select $1::int + 1 as n;'],
      ['one that ends in a line comment', 'select $1::int + 1 as n -- the end'],
    ])('runs %s with its comment, parameters bound', async (_case, statement) => {
      const { rows } = await client.query<{ n: number }>(
        withSqlComment(statement, { traceparent: TRACEPARENT }),
        [41],
      );
      expect(rows).toEqual([{ n: 42 }]);
    });

    it('shows the comment in pg_stat_activity', async () => {
      const { rows } = await client.query<{ query: string }>(
        withSqlComment('select query from pg_stat_activity where pid = pg_backend_pid()', {
          traceparent: TRACEPARENT,
        }),
      );
      expect(rows[0].query).toContain(`/*traceparent='${TRACEPARENT}'*/`);
    });

    // pg_stat_statements groups statements by the query identifier PostgreSQL computes from the
    // parsed statement (compute_query_id); the comment never reaches the parse tree.
    it('gives the statement the same query identifier with and without its comment', async () => {
      await client.query('set compute_query_id = on');
      const identifier = async (sql: string) => {
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(
          `explain (verbose, costs off) ${sql}`,
        );
        const line = rows.map((r) => r['QUERY PLAN']).find((l) => l.startsWith('Query Identifier'));
        return line;
      };
      const plain = await identifier('select n from generate_series(1, 3) n where n > 1');
      const commented = await identifier(
        withSqlComment('select n from generate_series(1, 3) n where n > 1', {
          traceparent: TRACEPARENT,
        }),
      );
      expect(plain).toMatch(/^Query Identifier: -?\d+$/);
      expect(commented).toBe(plain);
    });
  });
});
