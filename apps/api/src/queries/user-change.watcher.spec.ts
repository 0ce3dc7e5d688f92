import type { SluiceConfig } from '@app/config';
import type { MetadataEventsService, UsersService } from '@app/users';
import type { QueriesService } from './queries.service';
import { captureLogs } from '@test/support/captured-logs';
import { CHECKS_AT_ONCE, MOST_WAITING, UserChangeWatcher } from './user-change.watcher';

describe(UserChangeWatcher.name, () => {
  const logs = captureLogs();
  /** A watcher whose checks each wait until `finish` is called; what it checked, in order. */
  function watcher() {
    const checked: string[] = [];
    const finishes: (() => void)[] = [];
    let inFlight = 0;
    let most = 0;
    const queries = {
      ownersToCheck: () => Promise.resolve(['alice', 'bob']),
      userChanged: async (username: string, read: () => Promise<unknown>) => {
        inFlight++;
        most = Math.max(most, inFlight);
        checked.push(username);
        await read();
        await new Promise<void>((resolve) => finishes.push(resolve));
        inFlight--;
      },
    } as unknown as QueriesService;
    const users = {
      forget: () => undefined,
      find: () => Promise.resolve({ userId: 'id', role: 'r' }),
    } as unknown as UsersService;
    const events = { subscribe: () => undefined } as unknown as MetadataEventsService;
    const watcher = new UserChangeWatcher(
      { authMode: 'service' } as SluiceConfig,
      events,
      users,
      queries,
    );
    const heard = (username: string) => watcher.onMetadataEvent({ kind: 'user', username });
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    /** Lets every check under way finish, and the ones they start, until none is left. */
    const finishAll = async () => {
      for (;;) {
        await tick();
        if (finishes.length === 0) return;
        for (const finish of finishes.splice(0)) finish();
      }
    };
    return { watcher, heard, checked, finishAll, tick, most: () => most };
  }

  it('checks a flood of notices a few users at a time, each name once, and at most MOST_WAITING of them', async () => {
    const { heard, checked, finishAll, tick, most } = watcher();
    // What one `select pg_notify(…) from generate_series(…)` sends: every name, several times.
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < MOST_WAITING * 2; i++) heard(`n${i}`);
    }
    await tick();
    expect(most()).toBe(CHECKS_AT_ONCE);
    await finishAll();
    expect(most()).toBe(CHECKS_AT_ONCE);
    // The first checks started at once; the names heard again while they ran, after them.
    expect(checked.length).toBeLessThanOrEqual(MOST_WAITING + 2 * CHECKS_AT_ONCE);
    expect(new Set(checked.slice(0, MOST_WAITING)).size).toBe(MOST_WAITING);
    // The flood is said once as it starts, and how much of it went, not once a notice.
    expect(logs.lines).toEqual([
      {
        level: 'warn',
        context: 'UserChangeWatcher',
        message: `more than ${MOST_WAITING} users changed, waiting to be checked: dropping notices`,
      },
      {
        level: 'warn',
        context: 'UserChangeWatcher',
        message: expect.stringMatching(/^\d+ notices of changed users were dropped$/),
      },
    ]);
  });

  it('checks a user again when they are heard of during their check', async () => {
    const { heard, checked, finishAll, tick } = watcher();
    heard('alice');
    await tick();
    // Changed again (role set twice, removed and re-created) while the first check reads.
    heard('alice');
    heard('alice');
    await finishAll();
    expect(checked).toEqual(['alice', 'alice']);
  });

  it('checks the owners of every query under way when notices may have been missed, and at start', async () => {
    for (const missed of ['resync', 'bootstrap'] as const) {
      const made = watcher();
      if (missed === 'resync') made.watcher.onMetadataResync();
      else made.watcher.onApplicationBootstrap();
      const { checked, finishAll } = made;
      await finishAll();
      expect(checked.sort()).toEqual(['alice', 'bob']);
    }
  });
});
