/** A command line that cannot be run; the message says why (exit code EXIT_CODES.usage). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
