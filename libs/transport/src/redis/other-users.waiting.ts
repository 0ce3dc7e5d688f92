import { Script, luaScript, scriptFile } from './lua.script';
import { RedisClient } from './redis.connector';

/** The BullMQ keys of one lane's queue that the check reads (`queue.keys`, `queue.toKey`). */
export interface WaitingKeys {
  /** Plain waiting jobs: pushed left, taken right. */
  wait: string;
  /** Waiting jobs with a priority: lowest score taken first. */
  prioritized: string;
  /** Jobs put off (userShareProcessor), due back first first. */
  delayed: string;
  /** The key of a job's hash, without its id (`queue.toKey('')`). */
  jobPrefix: string;
}

/**
 * How many waiting jobs, from the head of each of the two sets, the check reads. Jobs are taken by
 * priority, and a job's priority is its user's queries already queued or running plus one
 * (admission): another user's job that would be taken before this user's next lies at the head.
 */
export const PEEK_JOBS = 8;

/**
 * Whether a job of a user other than `user` waits in one lane's queue, at its head: what makes a
 * user's share of a worker's slots a limit (userShareProcessor). The job keys share the queue's
 * hash tag, so the script stays on one Redis Cluster node.
 */
export class OtherUsersWaiting {
  private readonly script: Script;

  constructor(
    redis: RedisClient,
    private readonly keys: WaitingKeys,
  ) {
    this.script = luaScript(redis, scriptFile('othersWaiting-3'));
  }

  async check(user: string): Promise<boolean> {
    const { wait, prioritized, delayed, jobPrefix } = this.keys;
    return (
      (await this.script(wait, prioritized, delayed, jobPrefix, user, String(PEEK_JOBS))) === 1
    );
  }
}
