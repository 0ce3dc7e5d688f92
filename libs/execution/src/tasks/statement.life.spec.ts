import type { PoolClient } from 'pg';
import { RowBatch, type TextRow } from '@app/formats';
import { ProducerStoppedError, ResultWriter, StopReason } from '@app/transport';
import { DatabaseHandle } from './database.registry';
import type { Backend } from './backend.signal';
import { StatementLife, TERMINATE_AFTER_MS } from './statement.life';
import { TextCursor, copyRefused } from './text.cursor';
import { TransactionEnd } from './transaction.end';

/**
 * The order of what StatementLife asks of its connection, over fakes that record it. That the
 * real PostgreSQL and result channel end up clean is query.runner.spec.ts's part.
 */
const BACKEND: Backend = {
  pid: 4242,
  secretKey: -737815848,
  user: 'sluice_login',
  host: '127.0.0.1',
  port: 5432,
};

/** A portal whose reads stay in flight until answered, or cut short by a cancel. */
class FakeCursor {
  open = true;
  /** A statement that catches its cancel (an exception handler) and goes on. */
  trapsCancel = false;
  private pending: { resolve(rows: RowBatch): void; reject(err: Error): void } | undefined;

  readBatch(): Promise<RowBatch> {
    return new Promise((resolve, reject) => (this.pending = { resolve, reject }));
  }

  answer(rows: TextRow[]): void {
    this.pending?.resolve(RowBatch.fromText(rows));
  }

  cancelled(): void {
    if (this.trapsCancel) return;
    const err = Object.assign(new Error('canceling statement due to user request'), {
      code: '57014',
    });
    this.pending?.reject(err);
  }

  terminated(): void {
    const err = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    });
    this.pending?.reject(err);
  }

  close(): Promise<void> {
    this.open = false;
    return Promise.resolve();
  }

  closePortal(): Promise<void> {
    return this.close();
  }
}

/** What the statement did, in order: SQL sent, cancels, the connection's release. */
let log: string[];
let cursor: FakeCursor;
let stopClient: ((reason: StopReason) => void) | undefined;

const writer: ResultWriter = {
  write: () => Promise.resolve(),
  writeFinal: () => Promise.resolve(),
  watch: (onStop) => {
    stopClient = onStop;
    return () => (stopClient = undefined);
  },
  interrupt: () => undefined,
  endRecorded: false,
};

/**
 * How the fake's COMMIT goes: its command tags, then an error or none; or, `held`, no answer
 * until a cancel fails it (deferred triggers still running). The reset after it (DISCARD ALL, a
 * query of its own) fails with `resetError`, or goes through.
 */
let commitAnswer: { tags: string[]; error?: Error; held?: boolean; resetError?: Error };
/** A COMMIT held unanswered, as its cancel would end it. */
let heldCommit: (() => void) | undefined;

const client = {
  ...BACKEND,
  processID: BACKEND.pid,
  query(sql: string | FakeCursor | TransactionEnd | object) {
    if (sql instanceof TransactionEnd) {
      log.push('COMMIT; reset');
      if (commitAnswer.held) {
        const cancelled = Object.assign(new Error('canceling statement'), { code: '57014' });
        heldCommit = () => sql.handleError(cancelled);
        return sql;
      }
      commitAnswer.tags.forEach((text) => sql.handleCommandComplete({ text }));
      if (commitAnswer.error) sql.handleError(commitAnswer.error);
      else sql.handleReadyForQuery();
      return sql;
    }
    if (typeof sql !== 'string' && !(sql instanceof FakeCursor)) {
      // The reset's turn, queued right after the COMMIT's: its answer comes after the COMMIT's.
      const reset = sql as { handleError(err: Error): void; handleReadyForQuery(): void };
      const answer = () =>
        commitAnswer.resetError
          ? reset.handleError(commitAnswer.resetError)
          : reset.handleReadyForQuery();
      if (heldCommit) {
        const held = heldCommit;
        heldCommit = () => (held(), answer());
      } else answer();
      return sql;
    }
    if (typeof sql !== 'string') {
      log.push('BEGIN');
      return sql;
    }
    log.push(sql);
    return Promise.resolve();
  },
  release(broken: boolean) {
    log.push(broken ? 'destroy' : 'release');
  },
};

const db = {
  cancel(backend: Backend) {
    log.push(`cancel ${backend.pid} ${backend.secretKey}`);
    cursor.cancelled();
    heldCommit?.();
    return Promise.resolve();
  },
  terminate(backend: Backend) {
    log.push(`terminate ${backend.pid} ${backend.user}`);
    cursor.terminated();
    return Promise.resolve(true);
  },
};
const CANCEL = `cancel ${BACKEND.pid} ${BACKEND.secretKey}`;
const TERMINATE = `terminate ${BACKEND.pid} ${BACKEND.user}`;

/** A started statement, its first read answered with no rows. */
async function started(): Promise<StatementLife> {
  const life = new StatementLife(db as unknown as DatabaseHandle, writer, undefined);
  const first = life.start(client as unknown as PoolClient, cursor as unknown as TextCursor, 10);
  cursor.answer([]);
  await first;
  return life;
}

beforeEach(() => {
  log = [];
  commitAnswer = { tags: ['COMMIT'] };
  heldCommit = undefined;
  cursor = new FakeCursor();
  stopClient = undefined;
});

describe(StatementLife.name, () => {
  it('commits and resets the session in one query, then pools the connection', async () => {
    const life = await started();
    const reading = life.read(10);
    cursor.answer([['1']]);
    expect((await reading).text()).toEqual([['1']]);
    await life.commit();
    await life.release();
    expect(log).toEqual(['BEGIN', 'COMMIT; reset', 'release']);
  });

  it('a COMMIT that fails fails the statement; the reset after it still ran, the connection is pooled', async () => {
    const refused = Object.assign(new Error('duplicate key value'), { code: '23505' });
    commitAnswer = { tags: [], error: refused };
    const life = await started();
    await expect(life.commit()).rejects.toBe(refused);
    await life.abandon(refused);
    await life.release();
    expect(log).toEqual(['BEGIN', 'COMMIT; reset', 'release']);
  });

  it('a COMMIT and a reset that both fail: the connection is reset again, or dropped', async () => {
    const refused = Object.assign(new Error('duplicate key value'), { code: '23505' });
    const timeout = Object.assign(new Error('canceling statement due to statement timeout'), {
      code: '57014',
    });
    commitAnswer = { tags: [], error: refused, resetError: timeout };
    const life = await started();
    await expect(life.commit()).rejects.toBe(refused);
    await life.abandon(refused);
    await life.release();
    expect(log).toEqual(['BEGIN', 'COMMIT; reset', 'DISCARD ALL', 'release']);
  });

  it('a reset that fails after the commit went through keeps the commit; the connection is dropped', async () => {
    const timeout = Object.assign(new Error('canceling statement due to statement timeout'), {
      code: '57014',
    });
    commitAnswer = { tags: ['COMMIT'], resetError: timeout };
    const life = await started();
    await life.commit();
    await life.release();
    expect(log).toEqual(['BEGIN', 'COMMIT; reset', 'destroy']);
  });

  it('cancels a read in flight when told to stop, and the statement reads no more', async () => {
    const life = await started();
    const reading = life.read(10);
    stopClient!('cancelled');
    await expect(reading).rejects.toMatchObject({ code: '57014' });
    expect(life.stopReason).toBe('cancelled');
    await expect(life.read(10)).rejects.toEqual(new ProducerStoppedError('cancelled'));
    expect(log).toEqual(['BEGIN', CANCEL]);
  });

  it('ends the session of a statement that outlives its cancel; the connection is dropped after', async () => {
    cursor.trapsCancel = true;
    const life = await started();
    const reading = life.read(10);
    const at = Date.now();
    stopClient!('timeout');
    await expect(reading).rejects.toMatchObject({ code: '57P01' });
    expect(Date.now() - at).toBeGreaterThanOrEqual(TERMINATE_AFTER_MS - 50);
    expect(log).toEqual(['BEGIN', CANCEL, TERMINATE]);
    await life.abandon(await reading.catch((err: unknown) => err));
    await life.release();
    expect(log).toEqual(['BEGIN', CANCEL, TERMINATE, 'destroy']);
  });

  it('hands the connection back only once its signals are done', async () => {
    cursor.trapsCancel = true;
    const life = await started();
    const reading = life.read(10).catch((err: unknown) => err);
    stopClient!('cancelled');
    // The statement's failure is reported at once; the connection waits for the signals.
    await life.abandon(new Error('result stream write was aborted'));
    await life.release();
    await reading;
    expect(log).toEqual(['BEGIN', CANCEL, TERMINATE, 'destroy']);
  });

  it('stops a COMMIT under way (deferred triggers run in it)', async () => {
    commitAnswer = { tags: [], held: true };
    const life = await started();
    const committing = life.commit();
    await new Promise((resolve) => setImmediate(resolve));
    stopClient!('timeout');
    await expect(committing).rejects.toMatchObject({ code: '57014' });
    expect(log).toEqual(['BEGIN', 'COMMIT; reset', CANCEL]);
  });

  it('does not cancel when nothing runs in PostgreSQL; commit then refuses', async () => {
    const life = await started();
    stopClient!('consumer-gone');
    await expect(life.commit()).rejects.toEqual(new ProducerStoppedError('consumer-gone'));
    expect(cursor.open).toBe(false);
    expect(log).toEqual(['BEGIN']);
  });

  it('after a failure mid-read: cancels and awaits the read, rolls back, pools the connection', async () => {
    const life = await started();
    void life.read(10).catch(() => undefined); // a prefetch, in flight
    await life.abandon(new ProducerStoppedError('client-idle'));
    await life.release();
    expect(log).toEqual(['BEGIN', CANCEL, 'ROLLBACK', 'DISCARD ALL', 'release']);
  });

  it('after a failure that may leave the connection out of step: drops it', async () => {
    const life = await started();
    await life.abandon(new Error('result stream write was aborted'));
    await life.release();
    expect(log).toEqual(['BEGIN', 'destroy']);
  });

  it('cancels a statement whose output the cursor refused, and rolls back once the cancel landed', async () => {
    const life = await started();
    const reading = life.read(10);
    // What TextCursor does on a COPY TO STDOUT or a value too long, mid-read.
    (cursor as unknown as TextCursor).onRefused!();
    // The fake's cancel ends the read; the real cursor fails it with its refusal.
    await expect(reading).rejects.toMatchObject({ code: '57014' });
    await life.abandon(copyRefused());
    await life.release();
    expect(log).toEqual(['BEGIN', CANCEL, 'ROLLBACK', 'DISCARD ALL', 'release']);
  });

  it('never asks PostgreSQL for 0 rows, its "every row": such a read fails, nothing is sent', async () => {
    const life = await started();
    const read = jest.spyOn(cursor, 'readBatch');
    await expect(life.read(0)).rejects.toThrow('a read must ask for at least one row, not 0');
    expect(read).not.toHaveBeenCalled();
  });

  it('releases once, however often asked', async () => {
    const life = await started();
    await life.commit();
    await life.release();
    await life.release();
    expect(log.filter((entry) => entry === 'release')).toHaveLength(1);
    expect(stopClient).toBeUndefined();
  });
});
