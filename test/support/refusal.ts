import { SluiceError } from '@app/contracts';

/** The SluiceError that `run` throws (a test fails if it throws nothing, or something else). */
export function refusal(run: () => unknown): SluiceError {
  try {
    run();
  } catch (err) {
    if (err instanceof SluiceError) return err;
    throw err;
  }
  throw new Error('not refused');
}
