import { parseArgs, type ParseArgsConfig } from 'node:util';

/** What the command line asks for. */
export type CliCommand =
  | { kind: 'help' }
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

/** A command line that cannot be run; the message says why. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const USAGE = `Usage: sluice users <command>   (from a checkout: npx sluice users …)

  users list [--json]                     list the users
  users add <name> --role <role> [--admin] [--read-only] [--disabled]
                                          add a user; the password is read from stdin
  users set <name> [--role <role>] [--admin|--no-admin] [--read-only|--no-read-only]
                   [--enable|--disable] [--password]
                                          change a user; --password reads a new one from stdin
  users remove <name>                     remove a user

Connects like the api: DATABASE_URL and SLUICE_METADATA_DATABASE_URL, or without them the
embedded PostgreSQL of standalone mode (which must be running: npm start).
Passwords are never taken from the command line: pipe them in, or type them when asked.`;

// The flags that set one of a user's booleans, and the value each sets.
const FLAGS = {
  admin: ['admin', true],
  'no-admin': ['admin', false],
  'read-only': ['readOnly', true],
  'no-read-only': ['readOnly', false],
  enable: ['enabled', true],
  disable: ['enabled', false],
  disabled: ['enabled', false],
} as const;

type Flags = { admin?: boolean; readOnly?: boolean; enabled?: boolean };

const OPTIONS = {
  role: { type: 'string' },
  password: { type: 'boolean' },
  json: { type: 'boolean' },
  ...Object.fromEntries(Object.keys(FLAGS).map((name) => [name, { type: 'boolean' }])),
} satisfies ParseArgsConfig['options'];

interface Args {
  positionals: string[];
  flags: Flags;
  role?: string;
  password: boolean;
  json: boolean;
}

/**
 * Reads a command's arguments with util.parseArgs, not strict so that each refusal gets its own
 * message; `allowed` are the options the command takes. Refuses in argument order.
 */
function read(args: string[], allowed: readonly string[]): Args {
  const { tokens } = parseArgs({
    args,
    options: OPTIONS,
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const out: Args = { positionals: [], flags: {}, password: false, json: false };
  for (const token of tokens) {
    if (token.kind === 'positional') {
      out.positionals.push(token.value);
      continue;
    }
    const arg = args[token.index];
    if (token.kind === 'option-terminator') throw new UsageError(`unknown option ${arg}`);
    const { name, value } = token;
    // Before any message that could echo it: a password given inline is never printed back.
    if (name.startsWith('password') && (name !== 'password' || value !== undefined)) {
      throw new UsageError('passwords are read from stdin, never from the command line');
    }
    if (name === 'password' && !allowed.includes(name)) {
      throw new UsageError('users add always reads the password from stdin');
    }
    if (!allowed.includes(name)) throw new UsageError(`unknown option ${arg}`);
    if (name === 'role') {
      if (value === undefined || value === '') throw new UsageError('--role needs a role name');
      out.role = value;
    } else if (value !== undefined) {
      throw new UsageError(`unknown option ${arg}`); // a flag given a value: --admin=yes
    } else if (name === 'password') {
      out.password = true;
    } else if (name === 'json') {
      out.json = true;
    } else {
      const [field, set] = FLAGS[name as keyof typeof FLAGS];
      if (out.flags[field] !== undefined && out.flags[field] !== set) {
        throw new UsageError(`conflicting options for ${field}`);
      }
      out.flags[field] = set;
    }
  }
  return out;
}

const USER_FLAGS = Object.keys(FLAGS);

/** The user name, the one argument that is not an option; nothing else is. */
function userName(args: Args, command: string): string {
  const [name, extra] = args.positionals;
  if (name === undefined) throw new UsageError(`users ${command} needs a user name`);
  if (extra !== undefined) throw new UsageError(`unexpected argument ${extra}`);
  return name;
}

/** Parses the arguments after `sluice` (without node and the script). */
export function parseCli(argv: string[]): CliCommand {
  const [group, command, ...rest] = argv;
  if (group === undefined || group === 'help' || group === '--help' || group === '-h') {
    return { kind: 'help' };
  }
  if (group !== 'users') throw new UsageError(`unknown command ${group}`);
  if (command === 'help' || command === '--help' || command === '-h') return { kind: 'help' };
  switch (command) {
    case 'list':
    case 'ls': {
      const args = read(rest, ['json']);
      if (args.positionals.length > 0) {
        throw new UsageError(`unexpected argument ${args.positionals[0]}`);
      }
      return { kind: 'users-list', json: args.json };
    }
    case 'add': {
      const args = read(rest, ['role', ...USER_FLAGS]);
      const username = userName(args, 'add');
      const { flags, role } = args;
      if (role === undefined) throw new UsageError('users add needs --role <role>');
      return {
        kind: 'users-add',
        username,
        role,
        admin: flags.admin ?? false,
        readOnly: flags.readOnly ?? false,
        enabled: flags.enabled ?? true,
      };
    }
    case 'set': {
      const args = read(rest, ['role', 'password', ...USER_FLAGS]);
      const username = userName(args, 'set');
      const { flags, role, password } = args;
      if (role === undefined && !password && Object.keys(flags).length === 0) {
        throw new UsageError('users set needs something to change');
      }
      return { kind: 'users-set', username, role, ...flags, password };
    }
    case 'remove':
    case 'rm':
      return { kind: 'users-remove', username: userName(read(rest, []), 'remove') };
    default:
      throw new UsageError(command ? `unknown users command ${command}` : 'users needs a command');
  }
}
