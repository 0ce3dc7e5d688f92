/**
 * The queries side of a change of user, as UserAdminService needs it: the api's QueriesService
 * in both the api and `sluice users`, which reach the same queue and records.
 */
export interface QueriesOfUser {
  /** Forgets everything of a deleted user's: records, slots, Idempotency-Keys, kept results. */
  forgetUser(username: string): Promise<void>;
  /** Ends what the user queued or kept as their old role. */
  roleChanged(username: string): Promise<void>;
}
