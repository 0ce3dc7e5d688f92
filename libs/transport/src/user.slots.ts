import { LANES, Lane } from '@app/contracts';

/**
 * The slots of one worker's lanes (or standalone mode's) that one user's queries hold at once:
 * its share, at most `percent` of each lane's, rounded up, at least one
 * (SLUICE_WORKER_USER_SHARE_PERCENT), and past it, borrowed, every slot but one while no other
 * user's job waits. Priority only orders the queue; a slot a long statement holds stays held
 * until it ends, so without a share one user's long statements leave every other user waiting;
 * and the slot never borrowed is where another user's query starts at once when it comes.
 */
export class UserSlots {
  /** The most slots one user holds in each lane by its share. */
  readonly most: Readonly<Record<Lane, number>>;
  /** The most slots one user holds in each lane, borrowed ones included. */
  readonly mostBorrowing: Readonly<Record<Lane, number>>;
  private readonly held = new Map<string, number>();

  constructor(capacity: Readonly<Record<Lane, number>>, percent: number) {
    const share = (slots: number) => Math.max(1, Math.ceil((slots * percent) / 100));
    this.most = Object.fromEntries(LANES.map((lane) => [lane, share(capacity[lane])])) as Record<
      Lane,
      number
    >;
    this.mostBorrowing = Object.fromEntries(
      LANES.map((lane) => [lane, Math.max(this.most[lane], capacity[lane] - 1)]),
    ) as Record<Lane, number>;
  }

  /** Whether `user` could borrow a slot past its share in `lane` (see borrow). */
  mayBorrow(user: string, lane: Lane): boolean {
    return this.heldBy(user, lane) < this.mostBorrowing[lane];
  }

  /**
   * Takes a slot past `user`'s share, once the caller knows that no other user's job waits; false
   * (and nothing taken) when the user holds every slot but one. Given back by `release`.
   */
  borrow(user: string, lane: Lane): boolean {
    return this.hold(user, lane, this.mostBorrowing[lane]);
  }

  /** Whether `user` may start one more query in `lane` now. */
  free(user: string, lane: Lane): boolean {
    return this.heldBy(user, lane) < this.most[lane];
  }

  /** Takes a slot for `user` in `lane`; false (and nothing taken) when its share is held. */
  take(user: string, lane: Lane): boolean {
    return this.hold(user, lane, this.most[lane]);
  }

  /** Gives back a slot `take` or `borrow` gave. */
  release(user: string, lane: Lane): void {
    const key = this.key(user, lane);
    const held = (this.held.get(key) ?? 0) - 1;
    if (held > 0) this.held.set(key, held);
    else this.held.delete(key);
  }

  private heldBy(user: string, lane: Lane): number {
    return this.held.get(this.key(user, lane)) ?? 0;
  }

  /** One more slot for `user` in `lane` unless it holds `most` already. */
  private hold(user: string, lane: Lane, most: number): boolean {
    const held = this.heldBy(user, lane);
    if (held >= most) return false;
    this.held.set(this.key(user, lane), held + 1);
    return true;
  }

  private key(user: string, lane: Lane): string {
    // A user name never holds a NUL (PostgreSQL refuses it in text).
    return `${lane}\0${user}`;
  }
}
