import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SluiceConfig } from '@app/config';
import { FileResultSpool, ResultSource, ResultSpool } from '@app/transport';
import type { ApiMetricsService } from '../metrics/api-metrics.service';
import { SpoolSweepService } from './spool-sweep.service';

/** The sweep over a directory spool, with results kept as the test says. */
describe(SpoolSweepService.name, () => {
  let root: string;
  let spool: ResultSpool;
  const metrics = { spoolError: jest.fn(), spooled: jest.fn() };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'spool-sweep-spec-'));
    spool = new FileResultSpool(root);
    jest.clearAllMocks();
  });

  afterEach(() => rmSync(root, { recursive: true, force: true }));

  /** A file at `key` under the spool, written a minute ago. */
  function leave(key: string): void {
    mkdirSync(join(root, key, '..'), { recursive: true });
    writeFileSync(join(root, key), 'bytes');
    const minuteAgo = new Date(Date.now() - 60_000);
    utimesSync(join(root, key), minuteAgo, minuteAgo);
  }

  function sweeper(kept: (queryId: string) => boolean): SpoolSweepService {
    const config = { spool: { orphanSeconds: 10, sweepSeconds: 0 } } as unknown as SluiceConfig;
    const results = { kept: (id: string) => Promise.resolve(kept(id)) } as ResultSource;
    return new SpoolSweepService(config, spool, results, metrics as unknown as ApiMetricsService);
  }

  async function keys(): Promise<string[]> {
    const found: string[] = [];
    for await (const entry of spool.list()) found.push(entry.key);
    return found.sort();
  }

  it("deletes the segments of results that are gone, and nothing that is not Sluice's", async () => {
    const [gone, live, notOurs] = [randomUUID(), randomUUID(), randomUUID()];
    const untouched = [
      `${live}/a1b2c3d4.000001`,
      `${notOurs}/notes.txt`,
      'reports/a1b2c3d4.000001',
      'reports/2026.csv',
    ];
    for (const key of [`${gone}/a1b2c3d4.000001`, `${gone}/a1b2c3d4.000002.tmp-0badcafe`]) {
      leave(key);
    }
    for (const key of untouched) leave(key);
    expect(await sweeper((id) => id === live).sweep()).toEqual({ deleted: 2, failed: 0 });
    expect(await keys()).toEqual([...untouched].sort());
  });

  it('goes on past a query whose segments the store will not delete, and says so', async () => {
    const [refused, gone] = [randomUUID(), randomUUID()];
    leave(`${refused}/a1b2c3d4.000001`);
    leave(`${gone}/a1b2c3d4.000001`);
    const remove = spool.remove.bind(spool);
    jest
      .spyOn(spool, 'remove')
      .mockImplementation((keys) =>
        keys.some((k) => k.startsWith(refused))
          ? Promise.reject(new Error('access denied'))
          : remove(keys),
      );
    expect(await sweeper(() => false).sweep()).toEqual({ deleted: 1, failed: 1 });
    expect(await keys()).toEqual([`${refused}/a1b2c3d4.000001`]);
    expect(metrics.spoolError).toHaveBeenCalledWith('sweep');
  });
});
