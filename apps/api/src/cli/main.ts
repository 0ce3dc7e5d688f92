#!/usr/bin/env node
import { CommanderError } from 'commander';
import { SluiceClientError } from '@app/client';
import { UsageError } from './usage.error';
import { cliEnvironment } from './cli.environment';
import { ClientCommands } from './client.commands';
import { cliProgram } from './cli.program';
import { EXIT_CODES } from './exit.codes';
import { LoginRequiredError } from './login-required.error';
import { refusePasswordArguments } from './users.program';

/**
 * `sluice`: the client commands (login, query, export, queries, cancel) over HTTP, and the
 * operators' `sluice users …` straight on the metadata database. Exit codes: exit.codes.ts.
 */
async function main(argv: string[]): Promise<number> {
  let code: number = EXIT_CODES.ok;
  const program = cliProgram({
    client: () => new ClientCommands(cliEnvironment()),
    // Loaded only here: the client commands need neither Nest nor the service's configuration.
    users: async (command) => (await import('./users.command')).runUsers(command),
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

void main(process.argv.slice(2)).then((code) => {
  // Lets stdout drain first: process.exit() would cut a large piped result short.
  process.exitCode = code;
  setImmediate(() => process.exit(code));
});
