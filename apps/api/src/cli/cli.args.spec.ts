import { UsageError, parseCli } from './cli.args';

describe('parseCli', () => {
  it('reads users add with its role and flags', () => {
    expect(parseCli(['users', 'add', 'alice', '--role', 'analyst'])).toEqual({
      kind: 'users-add',
      username: 'alice',
      role: 'analyst',
      admin: false,
      readOnly: false,
      enabled: true,
    });
    expect(
      parseCli(['users', 'add', 'bob', '--role=r', '--admin', '--read-only', '--disabled']),
    ).toMatchObject({ admin: true, readOnly: true, enabled: false });
  });

  it('reads users set with only what changes', () => {
    expect(parseCli(['users', 'set', 'alice', '--no-admin', '--password'])).toEqual({
      kind: 'users-set',
      username: 'alice',
      role: undefined,
      admin: false,
      password: true,
    });
    expect(parseCli(['users', 'set', 'alice', '--disable'])).toMatchObject({ enabled: false });
  });

  it('reads list and remove', () => {
    expect(parseCli(['users', 'list', '--json'])).toEqual({ kind: 'users-list', json: true });
    expect(parseCli(['users', 'remove', 'alice'])).toEqual({
      kind: 'users-remove',
      username: 'alice',
    });
    expect(parseCli([])).toEqual({ kind: 'help' });
    expect(parseCli(['users', 'help'])).toEqual({ kind: 'help' });
    expect(parseCli(['users', '--help'])).toEqual({ kind: 'help' });
  });

  it.each([
    [['users', 'add', 'alice', '--role', 'r', '--password=secret'], /never from the command line/],
    [['users', 'add', 'alice', '--role', 'r', '--password', 'secret'], /always reads the password/],
    [['users', 'set', 'alice', '--password=secret'], /never from the command line/],
    [['users', 'add', 'alice'], /--role/],
    [['users', 'add', '--role', 'r'], /user name/],
    [['users', 'set', 'alice'], /something to change/],
    [['users', 'set', 'alice', '--admin', '--no-admin'], /conflicting/],
    [['users', 'add', 'alice', '--role'], /--role needs/],
    [['users', 'frob'], /unknown users command/],
    [['groups', 'list'], /unknown command/],
    [['users', 'add', 'alice', '--role', 'r', '--admin=yes'], /unknown option --admin=yes/],
    [['users', 'add', 'alice', '--role', 'r', '--', '--admin'], /unknown option --$/],
    [['users', 'set', 'alice', '--passwordx'], /never from the command line/],
    [['users', 'set', 'alice', '--enable', '--disabled'], /conflicting options for enabled/],
    [['users', 'list', '--frob'], /unknown option --frob/],
    [['users', 'list', 'alice'], /unexpected argument alice/],
    [['users', 'remove', 'alice', 'bob'], /unexpected argument bob/],
    [['users', 'remove', 'alice', '-f'], /unknown option -f/],
    [['users'], /users needs a command/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseCli(argv)).toThrow(UsageError);
    expect(() => parseCli(argv)).toThrow(message);
  });
});
