/** The pool on the metadata database (schema `sluice`), provided by whoever wires the lib in. */
export const METADATA_POOL = Symbol('METADATA_POOL');

/** What becomes of a user's queries when the user goes or changes role (QueriesOfUser). */
export const QUERIES_OF_USER = Symbol('QUERIES_OF_USER');
