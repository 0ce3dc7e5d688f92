export * from './bullmq-job.queue';
export * from './user-share.processor';
