import { ResultRecord, okStatus } from '@app/contracts';
import { ProducerStoppedError, StopReason } from '@app/transport';

/** What the flow-control specs of both result channels share. */
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const data = (n: number, size = 10): ResultRecord => ({
  kind: 'data',
  rows: n,
  bytes: Buffer.alloc(size, n),
});

export const end = (): ResultRecord => ({
  kind: 'end',
  status: okStatus(),
  bytes: Buffer.from('e'),
});

/** Whether a promise has settled after `waitMs`, without waiting for it longer. */
export async function settledAfter(promise: Promise<unknown>, waitMs: number): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await sleep(waitMs);
  return done;
}

/** Why a write was refused: it must have been, with ProducerStoppedError. */
export async function stoppedWith(promise: Promise<unknown>): Promise<StopReason> {
  const err = await promise.then(
    () => {
      throw new Error('the write went through');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProducerStoppedError);
  return (err as ProducerStoppedError).reason;
}
