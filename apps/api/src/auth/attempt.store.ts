/** Failed attempts counted for one key (a user name or a client address). */
export interface AttemptCount {
  failures: number;
  /** Milliseconds until the count starts over. */
  resetInMs: number;
}

/** Where failed logins are counted: Redis in cluster mode, memory in standalone mode. */
export interface AttemptStore {
  get(key: string): Promise<AttemptCount>;
  /** Counts one failure; the count starts over `windowSeconds` after the first. */
  add(key: string, windowSeconds: number): Promise<void>;
  clear(key: string): Promise<void>;
}
