import { HttpException } from '@nestjs/common';
import Redis from 'ioredis';
import { Client } from 'pg';
import { SluiceError } from '@app/contracts';
import { toEnvelope } from './error.envelope';
import { testDatabaseUrl, testRedisUrl } from '@test/settings';
import { captureLogs } from '@test/support/captured-logs';

/** Errors of a Redis that is gone or failing over, as ioredis raises them, answer 503. */
describe(toEnvelope.name, () => {
  const logs = captureLogs();
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
  });

  afterAll(() => redis.quit());

  it('answers 503 with Retry-After for a cluster that is down or moving a slot', async () => {
    for (const reply of [
      'CLUSTERDOWN The cluster is down',
      'MOVED 3999 127.0.0.1:7002',
      'TRYAGAIN Multiple keys request during rehashing of slot',
    ]) {
      // A real ReplyError, as Redis sends it.
      const err = await redis.eval(`return redis.error_reply('${reply}')`, 0).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(toEnvelope(err)).toEqual({
        httpStatus: 503,
        headers: { 'retry-after': '1' },
        body: {
          status: {
            reason: 'Redis is unavailable or failing over; retry later',
            sql_state: '57P03',
            vendor_code: -109,
          },
        },
      });
    }
  });

  it('answers 503 when the connection to Redis is gone', async () => {
    const gone = new Redis({ port: 1, maxRetriesPerRequest: 0, retryStrategy: () => null });
    gone.on('error', () => undefined);
    const err = await gone.ping().then(
      () => undefined,
      (e: unknown) => e,
    );
    gone.disconnect();
    expect(toEnvelope(err).httpStatus).toBe(503);
  });

  it('answers 503 with Retry-After when PostgreSQL cannot be reached', async () => {
    const gone = new Client({ connectionString: 'postgresql://nobody@127.0.0.1:1/none' });
    const err = await gone.connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(toEnvelope(err)).toMatchObject({
      httpStatus: 503,
      headers: { 'retry-after': '1' },
      body: { status: { reason: 'database unavailable' } },
    });
  });

  it('gives every 503 a Retry-After, keeping one its cause set', () => {
    expect(toEnvelope(new SluiceError('DB_UNAVAILABLE', 'cannot read roles')).headers).toEqual({
      'retry-after': '1',
    });
    const own = new SluiceError('UNAVAILABLE', 'no worker', undefined, { 'Retry-After': '5' });
    expect(toEnvelope(own).headers).toEqual({ 'Retry-After': '5' });
    expect(toEnvelope(new SluiceError('INVALID_REQUEST')).headers).toEqual({});
  });

  it("names the accepted body types in a 415, as Nest passes on Fastify's parser error", () => {
    // What Nest's routes-resolver makes of FST_ERR_CTP_INVALID_MEDIA_TYPE.
    const reply = toEnvelope(new HttpException('Unsupported Media Type', 415));
    expect(reply.httpStatus).toBe(415);
    expect(reply.body.status).toEqual({
      reason:
        'Content-Type must be application/json or text/plain (UTF-8), for the statement as JSON or as text',
      sql_state: '0A000',
      vendor_code: -107,
    });
  });

  it('still answers 500, logged only, for an error it does not know', () => {
    expect(toEnvelope(new Error('something else')).httpStatus).toBe(500);
    expect(toEnvelope(new Error('ERR unknown command')).body.status.vendor_code).toBe(-103);
    expect(
      logs.lines.map(({ level, context, message }) => [level, context, message.split('\n')[0]]),
    ).toEqual([
      ['error', 'Errors', 'Error: something else'],
      ['error', 'Errors', 'Error: ERR unknown command'],
    ]);
  });

  it("never takes a PostgreSQL error for Redis's, whatever its message says", async () => {
    const pg = new Client({ connectionString: testDatabaseUrl });
    await pg.connect();
    try {
      for (const message of [
        'Connection is closed.',
        'CLUSTERDOWN The cluster is down',
        'timeout expired',
        'Connection terminated due to connection timeout',
      ]) {
        // What a hostile user would raise to pass a failure off as an outage.
        const err = await pg.query(`DO $$ BEGIN RAISE EXCEPTION '${message}'; END $$`).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect((err as Error).message).toBe(message);
        expect(toEnvelope(err).httpStatus).not.toBe(503);
      }
      // Each answered as the unknown error it is: 500, logged.
      expect(logs.lines.map((l) => l.message.split('\n')[0])).toEqual([
        'error: Connection is closed.',
        'error: CLUSTERDOWN The cluster is down',
        'error: timeout expired',
        'error: Connection terminated due to connection timeout',
      ]);
    } finally {
      await pg.end();
    }
  });
});
