import { createHmac } from 'node:crypto';
import { purposeKey } from './credential.key';

/** Key purpose of the application_name a query's statement runs under (see purposeKey). */
export const APPLICATION_NAME_PURPOSE = 'statement-application-names';

/** What every statement's application_name starts with: Sluice's sessions, found by a prefix. */
export const APPLICATION_NAME_PREFIX = 'sluice:';

/** 18 bytes (144 bits): 24 base64url characters, well inside NAMEDATALEN - 1 with the prefix. */
const TAG_BYTES = 18;

/**
 * The application_name of a query's statement: `sluice:` and a keyed hash of its query id.
 * pg_stat_activity shows application_name to every role, so the query id itself there would hand
 * any user the ids of everyone's queries; this tag tells them nothing, while every api and worker
 * process (all keyed by SLUICE_CREDENTIAL_KEY) gives the same one for the same query.
 */
export class ApplicationNames {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = purposeKey(secret, APPLICATION_NAME_PURPOSE);
  }

  of(queryId: string): string {
    const tag = createHmac('sha256', this.key).update(queryId).digest().subarray(0, TAG_BYTES);
    return APPLICATION_NAME_PREFIX + tag.toString('base64url');
  }
}
