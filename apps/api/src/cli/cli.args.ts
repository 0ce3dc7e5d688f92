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

export const USAGE = `Usage: npm run sluice -- <command>

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

const FLAGS = {
  '--admin': ['admin', true],
  '--no-admin': ['admin', false],
  '--read-only': ['readOnly', true],
  '--no-read-only': ['readOnly', false],
  '--enable': ['enabled', true],
  '--disable': ['enabled', false],
  '--disabled': ['enabled', false],
} as const;

type Flags = { admin?: boolean; readOnly?: boolean; enabled?: boolean };

/** Options after the user name: --role <role>, the boolean flags, and (set) --password. */
function options(args: string[], allowPassword: boolean) {
  const flags: Flags = {};
  let role: string | undefined;
  let password = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg.startsWith('--password')) {
      if (arg !== '--password') {
        throw new UsageError('passwords are read from stdin, never from the command line');
      }
      if (!allowPassword) throw new UsageError('users add always reads the password from stdin');
      password = true;
    } else if (arg === '--role' || arg.startsWith('--role=')) {
      role = arg === '--role' ? args[++i] : arg.slice('--role='.length);
      if (role === undefined || role === '') throw new UsageError('--role needs a role name');
    } else if (Object.hasOwn(FLAGS, arg)) {
      const [name, value] = FLAGS[arg as keyof typeof FLAGS];
      if (flags[name] !== undefined && flags[name] !== value) {
        throw new UsageError(`conflicting options for ${name}`);
      }
      flags[name] = value;
    } else {
      throw new UsageError(`unknown option ${arg}`);
    }
  }
  return { flags, role, password };
}

function userName(args: string[], command: string): string {
  const name = args[0];
  if (name === undefined || name.startsWith('-')) {
    throw new UsageError(`users ${command} needs a user name`);
  }
  return name;
}

/** Parses the arguments after `sluice` (without node and the script). */
export function parseCli(argv: string[]): CliCommand {
  const [group, command, ...rest] = argv;
  if (group === undefined || group === 'help' || group === '--help' || group === '-h') {
    return { kind: 'help' };
  }
  if (group !== 'users') throw new UsageError(`unknown command ${group}`);
  switch (command) {
    case 'list':
    case 'ls': {
      const extra = rest.filter((a) => a !== '--json');
      if (extra.length > 0) throw new UsageError(`unknown option ${extra[0]}`);
      return { kind: 'users-list', json: rest.includes('--json') };
    }
    case 'add': {
      const username = userName(rest, 'add');
      const { flags, role } = options(rest.slice(1), false);
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
      const username = userName(rest, 'set');
      const { flags, role, password } = options(rest.slice(1), true);
      if (role === undefined && !password && Object.keys(flags).length === 0) {
        throw new UsageError('users set needs something to change');
      }
      return { kind: 'users-set', username, role, ...flags, password };
    }
    case 'remove':
    case 'rm': {
      const username = userName(rest, 'remove');
      if (rest.length > 1) throw new UsageError(`unexpected argument ${rest[1]}`);
      return { kind: 'users-remove', username };
    }
    default:
      throw new UsageError(command ? `unknown users command ${command}` : 'users needs a command');
  }
}
