import { QueryRecord } from '@app/transport';
import { AuthUser } from '../auth/auth-user';

/**
 * Whether `user` owns the query of `record`: the same name and the same user — one deleted and
 * re-created under the name is another, and owns nothing of the first one's.
 */
export function ownsQuery(
  user: Pick<AuthUser, 'username' | 'userId'>,
  record: Pick<QueryRecord, 'owner' | 'ownerId'>,
): boolean {
  return record.owner === user.username && record.ownerId === user.userId;
}
