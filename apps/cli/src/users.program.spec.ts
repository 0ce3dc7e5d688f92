import { Command } from 'commander';
import { UsageError } from './usage.error';
import { UsersCommand, refusePasswordArguments, usersCommands } from './users.program';

/** What `sluice <argv>` asks of the users commands; throws what the command line refuses. */
async function parse(argv: string[]): Promise<UsersCommand | undefined> {
  refusePasswordArguments(argv);
  let asked: UsersCommand | undefined;
  const program = new Command('sluice')
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, writeOut: () => undefined });
  usersCommands(program.command('users'), (command) => {
    asked = command;
    return Promise.resolve();
  });
  await program.parseAsync(argv, { from: 'user' });
  return asked;
}

describe(usersCommands.name, () => {
  it('reads users add with its role and flags', async () => {
    expect(await parse(['users', 'add', 'alice', '--role', 'analyst'])).toEqual({
      kind: 'users-add',
      username: 'alice',
      role: 'analyst',
      admin: false,
      readOnly: false,
      enabled: true,
    });
    expect(
      await parse(['users', 'add', 'bob', '--role=r', '--admin', '--read-only', '--disabled']),
    ).toMatchObject({ admin: true, readOnly: true, enabled: false });
  });

  it('reads users set with only what changes', async () => {
    expect(await parse(['users', 'set', 'alice', '--no-admin', '--password'])).toEqual({
      kind: 'users-set',
      username: 'alice',
      role: undefined,
      admin: false,
      password: true,
    });
    expect(await parse(['users', 'set', 'alice', '--disable'])).toMatchObject({ enabled: false });
  });

  it('reads list and remove, by their short names too', async () => {
    expect(await parse(['users', 'list', '--json'])).toEqual({ kind: 'users-list', json: true });
    expect(await parse(['users', 'ls'])).toEqual({ kind: 'users-list', json: false });
    for (const remove of ['remove', 'rm']) {
      expect(await parse(['users', remove, 'alice'])).toEqual({
        kind: 'users-remove',
        username: 'alice',
      });
    }
  });

  it('lists every option of users set in its help, as docs/api.md says', async () => {
    let help = '';
    const program = new Command('sluice').exitOverride().configureOutput({
      writeOut: (text) => (help += text),
      writeErr: () => undefined,
    });
    usersCommands(program.command('users'), () => Promise.resolve());
    await expect(
      program.parseAsync(['users', 'help', 'set'], { from: 'user' }),
    ).rejects.toMatchObject({ exitCode: 0 });
    for (const option of ['admin', 'no-admin', 'read-only', 'no-read-only', 'enable', 'disable']) {
      expect(help).toMatch(new RegExp(`--${option}\\b`));
    }
    expect(help).toMatch(/--role <role>/);
    expect(help).toMatch(/--password/);
  });

  it.each([
    [['users', 'help'], 'commander.help'],
    [['users', '--help'], 'commander.helpDisplayed'],
  ])('prints help for %j, exit code 0', async (argv, code) => {
    await expect(parse(argv)).rejects.toMatchObject({ code, exitCode: 0 });
  });

  it.each([
    [['users', 'add', 'alice', '--role', 'r', '--password=secret'], /never from the command line/],
    [['users', 'add', 'alice', '--role', 'r', '--password', 'secret'], /always reads the password/],
    [['users', 'set', 'alice', '--password=secret'], /never from the command line/],
    [['users', 'set', 'alice', '--passwordx'], /never from the command line/],
    [['users', 'set', 'alice'], /something to change/],
    [['users', 'set', 'alice', '--admin', '--no-admin'], /conflicting options for admin/],
    [['users', 'set', 'alice', '--enable', '--disabled'], /conflicting options for enabled/],
    [['users', 'add', 'alice', '--role='], /--role needs a role name/],
  ])('refuses %j', async (argv, message) => {
    const parsed = parse(argv);
    await expect(parsed).rejects.toThrow(UsageError);
    await expect(parsed).rejects.toThrow(message);
  });

  it.each([
    [['users', 'add', 'alice'], /required option '--role <role>'/],
    [['users', 'add', '--role', 'r'], /missing required argument 'name'/],
    [['users', 'add', 'alice', '--role'], /argument missing/],
    [['users', 'frob'], /unknown command 'frob'/],
    [['users', 'add', 'alice', '--role', 'r', '--admin=yes'], /unknown option '--admin=yes'/],
    [['users', 'add', 'alice', '--role', 'r', '--', '--admin'], /too many arguments/],
    [['users', 'list', '--frob'], /unknown option '--frob'/],
    [['users', 'list', 'alice'], /too many arguments/],
    [['users', 'remove', 'alice', 'bob'], /too many arguments/],
    [['users', 'remove', 'alice', '-f'], /unknown option '-f'/],
  ])('refuses %j as commander does, with a non-zero exit code', async (argv, message) => {
    const parsed = parse(argv);
    await expect(parsed).rejects.toThrow(message);
    await expect(parsed).rejects.toMatchObject({ exitCode: 1 });
  });
});
