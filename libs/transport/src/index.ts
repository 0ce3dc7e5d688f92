export * from './redis.keys';
export * from './result.channel';
export * from './job.queue';
export * from './redis/stream.codec';
export * from './redis/redis-result.writer';
export * from './redis/redis-result.reader';
export * from './redis/bullmq-job.queue';
export * from './redis/redis-result.source';
