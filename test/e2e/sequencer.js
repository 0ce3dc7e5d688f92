// @ts-check
const { basename } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

/**
 * Seconds each slow e2e file takes, about (a quiet 2-core machine, either mode): the files of a
 * `--shard` are chosen by these, longest first onto the shard with the least so far, so that the
 * shards of a pass (test/e2e/passes.sh) end together. Jest's own sharding splits by a hash of the
 * path: one shard of the standalone pass got the three longest files and ran 294 s to the other's
 * 205. A file not listed counts DEFAULT_SECONDS; a figure gone stale unbalances, never drops.
 */
/** @type {Record<string, number>} */
const SECONDS = {
  faults: 85,
  async: 45,
  hostile: 35,
  cli: 30,
  standalone: 30,
  'admin-page': 27,
  'redis-failover': 26,
  tokens: 15,
  lifecycle: 15,
  retention: 13,
  spool: 13,
  'kept-slots': 14,
  'database-users': 14,
  'slow-clients': 12,
  packages: 12,
  client: 11,
  streaming: 10,
  users: 9,
  tracing: 8,
  ops: 7,
  compression: 7,
  service: 7,
  'cross-site': 7,
};
const DEFAULT_SECONDS = 4;

/** @param {import('@jest/test-result').Test} test */
function secondsOf(test) {
  return SECONDS[basename(test.path).replace(/\.e2e-spec\.ts$/, '')] ?? DEFAULT_SECONDS;
}

class E2eSequencer extends Sequencer {
  /**
   * @param {Array<import('@jest/test-result').Test>} tests
   * @param {{ shardIndex: number, shardCount: number }} options
   */
  shard(tests, { shardIndex, shardCount }) {
    const loads = new Array(shardCount).fill(0);
    const mine = [];
    const longestFirst = [...tests].sort(
      (a, b) => secondsOf(b) - secondsOf(a) || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0),
    );
    for (const test of longestFirst) {
      const least = loads.indexOf(Math.min(...loads));
      loads[least] += secondsOf(test);
      if (least === shardIndex - 1) mine.push(test);
    }
    return mine;
  }
}

module.exports = E2eSequencer;
