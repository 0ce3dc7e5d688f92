/** The worker's Redis connection for heartbeats, readiness and queue counts. */
export const OPS_REDIS = Symbol('OPS_REDIS');
