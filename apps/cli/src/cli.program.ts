import { Command, Option } from 'commander';
import { EXPORT_FORMATS, PARQUET_COMPRESSIONS } from '@sluice/client';
import { VERSION } from './version';
import { ClientCommands, QUERY_FORMATS } from './client.commands';
import { UsersCommand, usersCommands } from './users.program';

/** What the program's actions call: the client commands, and the users commands (lazily). */
export interface CliHandlers {
  client: () => ClientCommands;
  /** Runs a users command; answers its exit code (EXIT_CODES). */
  users: (command: UsersCommand) => Promise<number>;
  /** Where the users command puts its exit code. */
  exitCode: (code: number) => void;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** The `sluice` command line; docs/cli.md's examples are parsed with it in test/docs.spec.ts. */
export function cliProgram(handlers: CliHandlers): Command {
  const program = new Command('sluice')
    .description('Sluice from the command line: run SQL, export results, manage queries and users')
    .version(VERSION, '-V, --version', 'print the version of sluice')
    .enablePositionalOptions()
    .showHelpAfterError()
    // Before the commands are added, so that they inherit it: errors come back as exceptions,
    // and main() picks the exit code.
    .exitOverride();
  const url = () => new Option('--url <url>', 'the service (default: SLUICE_URL, then the login)');
  const statement = (command: Command) =>
    command
      .argument('[sql]', 'the statement (or -f)')
      .option('-f, --file <file>', 'read the statement from a file (- for stdin)')
      .option(
        '-p, --param <name=value>',
        'a {name} placeholder value, JSON or text (repeatable)',
        collect,
      )
      .option('--database <name>', 'the database to run in')
      .option('--schema <name>', 'search_path for the statement')
      .option('--max-rows <n>', 'return at most n rows')
      .option('--timeout <ms>', 'time limit of the statement')
      .addOption(url());

  program
    .command('login')
    .description(
      'log in and keep the token (0600) under $XDG_CONFIG_HOME/sluice or ~/.config/sluice; ' +
        'without a terminal, from SLUICE_URL, SLUICE_USER and SLUICE_PASSWORD, or the password piped on stdin',
    )
    .option('--user <name>', 'the user (default: SLUICE_USER, or asked)')
    .addOption(url())
    .action((options: { user?: string; url?: string }) => handlers.client().login(options));

  statement(
    program
      .command('query')
      .description('run a statement: a table on a terminal, CSV when piped')
      .addOption(new Option('--format <format>', 'output format').choices(QUERY_FORMATS)),
  ).action((sql: string | undefined, options: Parameters<ClientCommands['query']>[1]) =>
    handlers.client().query(sql, options),
  );

  statement(
    program
      .command('export')
      .description('write a result as Parquet, Arrow, CSV … to a file (or stdout)')
      .option('-o, --output <file>', 'the file; its extension picks the format (- for stdout)')
      .addOption(
        new Option('--format <format>', 'the format, if not the extension’s').choices(
          Object.keys(EXPORT_FORMATS),
        ),
      )
      .addOption(
        new Option(
          '--compression <codec>',
          'Parquet only: the codec of the file’s pages (default: zstd)',
        ).choices(PARQUET_COMPRESSIONS),
      )
      .option(
        '--keep',
        'the service keeps the result (wait_timeout 0) and it is downloaded from there: in segments straight from its store when it gives their URLs',
      )
      .option(
        '--parallel <n>',
        'with --keep: segments downloaded at once from the store (default 4; 0: through the service)',
      ),
  ).action((sql: string | undefined, options: Parameters<ClientCommands['export']>[1]) =>
    handlers.client().export(sql, options),
  );

  program
    .command('queries')
    .description(
      'your recent queries (an admin’s: everyone’s), newest first: a table on a terminal, CSV when piped',
    )
    .option('--json', 'as JSON (--format json)')
    .addOption(
      new Option(
        '--format <format>',
        'output format (a table on a terminal, CSV when piped)',
      ).choices(QUERY_FORMATS),
    )
    .addOption(url())
    .action((options: Parameters<ClientCommands['queries']>[0]) =>
      handlers.client().queries(options),
    );

  program
    .command('cancel')
    .description('cancel a query by its id')
    .argument('<query-id>')
    .addOption(url())
    .action((id: string, options: { url?: string }) => handlers.client().cancel(id, options));

  usersCommands(
    program
      .command('users')
      .description('manage users on the metadata database (operators; sluice users help)'),
    async (command) => handlers.exitCode(await handlers.users(command)),
  );

  return program;
}
