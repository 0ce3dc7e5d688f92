import { CommanderError } from 'commander';
import { SluiceClientError } from '@sluice/client';
import { UsageError } from './usage.error';
import { cliEnvironment } from './cli.environment';
import { ClientCommands } from './client.commands';
import { cliProgram } from './cli.program';
import { EXIT_CODES } from './exit.codes';
import { LoginRequiredError } from './login-required.error';
import { UsersCommand, refusePasswordArguments } from './users.program';

/** Runs a `sluice users …` command; answers its exit code (EXIT_CODES). */
export type UsersRunner = (command: UsersCommand) => Promise<number>;

/**
 * `sluice users …` where it cannot run: this package talks to the service over HTTP only, and
 * the users commands work straight on the metadata database, with the server's code.
 */
const usersNeedTheServer: UsersRunner = () => {
  process.stderr.write(
    'sluice: the users commands need the server install: run `npx sluice users …` where Sluice ' +
      'itself is installed (its checkout or its image); @sluice/cli has the client commands only\n',
  );
  return Promise.resolve(EXIT_CODES.usage);
};

/**
 * `sluice`: the client commands (login, query, export, queries, cancel) over HTTP, and, given
 * `users` (the server install's `sluice`), the operators' `sluice users …` straight on the
 * metadata database. Answers the exit code (exit.codes.ts).
 */
export async function runSluice(
  argv: string[],
  options: { users?: UsersRunner } = {},
): Promise<number> {
  let code: number = EXIT_CODES.ok;
  const program = cliProgram({
    client: () => new ClientCommands(cliEnvironment()),
    users: options.users ?? usersNeedTheServer,
    exitCode: (c) => (code = c),
  });
  try {
    refusePasswordArguments(argv);
    await program.parseAsync(argv, { from: 'user' });
    return code;
  } catch (err) {
    return report(err);
  }
}

/** Prints why the command failed (reason, SQLSTATE, query id) and picks its exit code. */
function report(err: unknown): number {
  if (err instanceof CommanderError) {
    // Commander has printed the help or the complaint already.
    return err.exitCode === 0 ? EXIT_CODES.ok : EXIT_CODES.usage;
  }
  if (err instanceof UsageError) {
    process.stderr.write(`sluice: ${err.message}\n`);
    return EXIT_CODES.usage;
  }
  if (err instanceof LoginRequiredError) {
    process.stderr.write(`sluice: ${err.message}\n`);
    return EXIT_CODES.auth;
  }
  if (err instanceof SluiceClientError) {
    const details = [
      err.sqlState && `SQLSTATE ${err.sqlState}`,
      err.vendorCode !== undefined && `vendor code ${err.vendorCode}`,
      err.httpStatus !== undefined && `HTTP ${err.httpStatus}`,
      err.queryId && `query id ${err.queryId}`,
    ].filter(Boolean);
    process.stderr.write(
      `sluice: ${err.message}\n${details.length ? `  ${details.join('  ')}\n` : ''}`,
    );
    if (err.kind === 'aborted') return EXIT_CODES.interrupted;
    if (err.httpStatus === 401) return EXIT_CODES.auth;
    if (err.retryable) return EXIT_CODES.unavailable;
    return EXIT_CODES.failed;
  }
  process.stderr.write(`sluice: failed: ${err instanceof Error ? err.message : String(err)}\n`);
  return EXIT_CODES.failed;
}

/** Ends the process with `code` once stdout has drained: process.exit() at once would cut a large piped result short. */
export function exitWhenDrained(code: number): void {
  process.exitCode = code;
  setImmediate(() => process.exit(code));
}
