/** Injection tokens of the api's outside connections. */
// The users lib's, which needs the pool too: one token, made there.
export { METADATA_POOL } from '@app/users';
export const REDIS = Symbol('REDIS');
export const JOB_QUEUE = Symbol('JOB_QUEUE');
export const RESULT_SOURCE = Symbol('RESULT_SOURCE');
export const RESULT_SINK = Symbol('RESULT_SINK');
export const QUERY_REGISTRY = Symbol('QUERY_REGISTRY');
/** The BullMQ queues behind JOB_QUEUE (one per lane), for bull-board; undefined in standalone mode (no BullMQ). */
export const DASHBOARD_QUEUE = Symbol('DASHBOARD_QUEUE');
/** Where kept results' bodies are (ResultSpool); null: kept results are in Redis (no SLUICE_SPOOL_URL). */
export const RESULT_SPOOL = Symbol('RESULT_SPOOL');
