import { drainWithin } from './job.runner';

describe('drainWithin', () => {
  it('waits for the running jobs, and cancels nothing when they end within the grace period', async () => {
    const cancel = jest.fn(() => Promise.resolve());
    let end!: () => void;
    const running = new Promise<void>((resolve) => (end = resolve));
    const drained = drainWithin(running, 1_000, cancel);
    setTimeout(end, 20);
    await expect(drained).resolves.toBe(false);
    expect(cancel).not.toHaveBeenCalled();
  });

  it('cancels what still runs once the grace period ends, then waits for it to end', async () => {
    let end!: () => void;
    const running = new Promise<void>((resolve) => (end = resolve));
    let ended = false;
    void running.then(() => (ended = true));
    const cancel = jest.fn(() => {
      // A cancelled job ends soon after.
      setTimeout(end, 20);
      return Promise.resolve();
    });
    await expect(drainWithin(running, 30, cancel)).resolves.toBe(true);
    expect(cancel).toHaveBeenCalledTimes(1);
    expect(ended).toBe(true);
  });
});
