import { ERROR_CATALOGUE, type CatalogueEntry } from './error.catalogue';
import { Status } from './status';

/** What stands in for a withheld reason, after the kind of error it was. */
export const WITHHELD_REASON_NOTE = "the reason is shown to the query's owner only";

/**
 * A failed query's status as someone other than its owner sees it: the catalogue's generic reason
 * for its vendor code, its SQLSTATE and vendor code as they were. PostgreSQL quotes values in its
 * messages (`invalid input syntax for type integer: "…"`), normalised (a cast's output, a number
 * reprinted) or passed through a function or RAISE of the statement's own, so no search for the
 * bound values in the text could be sure to find them all: the whole reason goes. A success keeps
 * its reason (a command tag quotes nothing).
 */
export function withheldReason(status: Status): Status {
  if (status.vendor_code === 0) return status;
  const entry = (Object.values(ERROR_CATALOGUE) as CatalogueEntry[]).find(
    (e) => e.vendorCode === status.vendor_code,
  );
  const kind = entry?.reason ?? 'error';
  return { ...status, reason: `${kind} (${WITHHELD_REASON_NOTE})` };
}
