import { Logger } from '@nestjs/common';

/** One line a Nest Logger was asked to write. */
export interface CapturedLog {
  level: 'error' | 'warn';
  context: string | undefined;
  message: string;
}

/**
 * Keeps the error and warning lines Nest's Logger would print during each test of the describe it
 * is called in, instead of printing them: a spec that causes a fault on purpose ("registry down")
 * asserts the line it expects, and a red line in a test run always means something is wrong.
 * Read `lines` in the test; they are emptied before each one.
 */
export function captureLogs(): { lines: CapturedLog[] } {
  const captured = { lines: [] as CapturedLog[] };
  let spies: jest.SpyInstance[] = [];
  beforeEach(() => {
    captured.lines.length = 0;
    spies = (['error', 'warn'] as const).map((level) =>
      jest.spyOn(Logger.prototype, level).mockImplementation(function (
        this: Logger & { context?: string },
        ...args: unknown[]
      ) {
        const [message] = args;
        const text =
          message instanceof Error ? (message.stack ?? message.message) : String(message);
        captured.lines.push({ level, context: this.context, message: text });
      }),
    );
  });
  afterEach(() => {
    for (const spy of spies) spy.mockRestore();
    spies = [];
  });
  return captured;
}
