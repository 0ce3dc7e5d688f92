import { Command, Option } from 'commander';
import { UsageError } from './usage.error';

/** What `sluice users …` asks for. */
export type UsersCommand =
  | { kind: 'users-list'; json: boolean }
  | {
      kind: 'users-add';
      username: string;
      role: string;
      admin: boolean;
      readOnly: boolean;
      enabled: boolean;
    }
  | {
      kind: 'users-set';
      username: string;
      role?: string;
      admin?: boolean;
      readOnly?: boolean;
      enabled?: boolean;
      /** Read a new password from stdin. */
      password: boolean;
    }
  | { kind: 'users-remove'; username: string };

type Flags = { admin?: boolean; readOnly?: boolean; enabled?: boolean };

// The flags that set one of a user's booleans, the value each sets, and what it says in help.
const FLAGS = {
  admin: ['admin', true, 'an administrator'],
  'no-admin': ['admin', false, 'not an administrator'],
  'read-only': ['readOnly', true, 'statements run read-only'],
  'no-read-only': ['readOnly', false, 'statements may write'],
  enable: ['enabled', true, 'may log in'],
  disable: ['enabled', false, 'may not log in'],
  disabled: ['enabled', false, 'may not log in (as --disable)'],
} as const;

type FlagName = keyof typeof FLAGS;

/**
 * Adds the flags to a command; answers what they set, read as commander meets them, so that two
 * that disagree (`--admin --no-admin`) are refused instead of the last one winning.
 */
function userFlags(command: Command, names: readonly FlagName[]): Flags {
  const flags: Flags = {};
  for (const name of names) {
    const [field, value, help] = FLAGS[name];
    command.addOption(new Option(`--${name}`, help));
    command.on(`option:${name}`, () => {
      if (flags[field] !== undefined && flags[field] !== value) {
        throw new UsageError(`conflicting options for ${field}`);
      }
      flags[field] = value;
    });
  }
  return flags;
}

/** A role given as `--role=`: no role at all. */
function roleName(role: string | undefined): string | undefined {
  if (role === '') throw new UsageError('--role needs a role name');
  return role;
}

/**
 * Passwords are never taken from the command line, where `ps` and the shell's history would keep
 * them: `argv` (after `sluice`) is refused before commander reads it, whose complaints could echo
 * a password given inline.
 */
export function refusePasswordArguments(argv: readonly string[]): void {
  const [group, command, ...args] = argv;
  if (group !== 'users') return;
  for (const arg of args) {
    if (arg === '--') return;
    if (!arg.startsWith('--password')) continue;
    if (arg !== '--password') {
      throw new UsageError('passwords are read from stdin, never from the command line');
    }
    if (command === 'add') throw new UsageError('users add always reads the password from stdin');
  }
}

const CONNECTS =
  '\nRuns where Sluice itself is installed (its checkout or its image), not from @sluice/cli alone.\n' +
  'Connects like the api: DATABASE_URL and SLUICE_METADATA_DATABASE_URL, or without them the\n' +
  'embedded PostgreSQL of standalone mode (which must be running: npm start); and REDIS_URL,\n' +
  "where it ends a removed or moved user's queries as the api does.\n" +
  'Passwords are never taken from the command line: pipe them in, or type them when asked.\n';

/**
 * `sluice users …`: its subcommands, added to `users`; each action hands `run` what was asked.
 * docs/cli.md's and docs/api.md's examples are parsed with it in test/docs.spec.ts.
 */
export function usersCommands(users: Command, run: (command: UsersCommand) => Promise<void>): void {
  users.addHelpText('after', CONNECTS);

  users
    .command('list')
    .alias('ls')
    .description('list the users')
    .option('--json', 'as JSON')
    .action((options: { json?: boolean }) => run({ kind: 'users-list', json: !!options.json }));

  const add = users
    .command('add')
    .description('add a user; the password is read from stdin')
    .argument('<name>', 'the user name')
    .requiredOption('--role <role>', 'the PostgreSQL role its statements run as');
  const addFlags = userFlags(add, Object.keys(FLAGS) as FlagName[]);
  add.action((username: string, options: { role: string }) =>
    run({
      kind: 'users-add',
      username,
      role: roleName(options.role)!,
      admin: addFlags.admin ?? false,
      readOnly: addFlags.readOnly ?? false,
      enabled: addFlags.enabled ?? true,
    }),
  );

  const set = users
    .command('set')
    .description('change a user; --password reads a new one from stdin')
    .argument('<name>', 'the user name')
    .option('--role <role>', 'the PostgreSQL role its statements run as')
    .option('--password', 'read a new password from stdin');
  const setFlags = userFlags(set, Object.keys(FLAGS) as FlagName[]);
  set.action((username: string, options: { role?: string; password?: boolean }) => {
    const role = roleName(options.role);
    if (role === undefined && !options.password && Object.keys(setFlags).length === 0) {
      throw new UsageError('users set needs something to change');
    }
    return run({ kind: 'users-set', username, role, ...setFlags, password: !!options.password });
  });

  users
    .command('remove')
    .alias('rm')
    .description('remove a user')
    .argument('<name>', 'the user name')
    .action((username: string) => run({ kind: 'users-remove', username }));
}
