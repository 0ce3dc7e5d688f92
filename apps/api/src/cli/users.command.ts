import 'reflect-metadata';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import Table from 'cli-table3';
import { ConfigError, SluiceConfig, loadConfig } from '@app/config';
import { SluiceError } from '@app/contracts';
import { CreateUserDto, UpdateUserDto, UserDto } from '@app/http-contracts';
import { UserAdminService } from '@app/users';
import { EXIT_CODES, UsersCommand, readPassword } from '@sluice/cli';
import { validateAs } from '../http/validation';
import { embeddedUrls } from '../standalone/embedded.database';
import { loadStandaloneState } from '../standalone/standalone.state';
import { UsersCommandModule } from './users-command.module';

/**
 * `sluice users …`: user management straight on the metadata database, for operators (no running
 * api or admin token needed). Passwords come from stdin, never from argv. UserAdminService is
 * built as the api builds it (UsersCommandModule), so a user removed here is forgotten (records,
 * slots, Idempotency-Keys, kept results) as DELETE /v1/users forgets them.
 */
export async function runUsers(command: UsersCommand): Promise<number> {
  try {
    await usersMain(command);
    return EXIT_CODES.ok;
  } catch (err) {
    const message =
      err instanceof SluiceError || err instanceof ConfigError
        ? err.message
        : `failed: ${(err as Error).message}`;
    process.stderr.write(`sluice: ${message}\n`);
    return EXIT_CODES.failed;
  }
}

async function usersMain(command: UsersCommand): Promise<void> {
  const config = connections(loadConfig());
  const app = await NestFactory.createApplicationContext(UsersCommandModule.forRoot(config), {
    // stdout carries the command's answer: only warnings and errors are logged (to stderr).
    logger: ['warn', 'error'],
    // A failure to start is thrown, and reported as the command's (not a process.exit of Nest's).
    abortOnError: false,
  });
  try {
    await run(command, app.get(UserAdminService));
  } finally {
    await app.close();
  }
}

async function run(command: UsersCommand, admin: UserAdminService) {
  switch (command.kind) {
    case 'users-list': {
      const list = await admin.list();
      process.stdout.write(command.json ? `${JSON.stringify(list, null, 2)}\n` : table(list));
      return;
    }
    case 'users-add': {
      const user = await validateAs(CreateUserDto, {
        username: command.username,
        role: command.role,
        admin: command.admin,
        read_only: command.readOnly,
        enabled: command.enabled,
        password: await readPassword(),
      });
      const created = await admin.create(user);
      process.stdout.write(`added user ${created.username} (role ${created.role})\n`);
      return;
    }
    case 'users-set': {
      const change = await validateAs(UpdateUserDto, {
        role: command.role,
        admin: command.admin,
        read_only: command.readOnly,
        enabled: command.enabled,
        password: command.password ? await readPassword() : undefined,
      });
      const updated = await admin.update(command.username, change);
      process.stdout.write(`updated user ${updated.username}\n`);
      return;
    }
    case 'users-remove':
      await admin.remove(command.username);
      process.stdout.write(`removed user ${command.username}\n`);
      return;
  }
}

/** Without DATABASE_URL: the embedded PostgreSQL of standalone mode, from its state file. */
function connections(config: SluiceConfig): SluiceConfig {
  const file = join(config.dataDir, 'standalone.json');
  if (config.databaseUrl) {
    // Standalone on the operator's own PostgreSQL keeps its generated key in the state file.
    if (config.credentialKey || config.redis || !existsSync(file)) return config;
    return { ...config, credentialKey: loadStandaloneState(config.dataDir).credentialKey };
  }
  if (!existsSync(file)) {
    throw new ConfigError(
      'DATABASE_URL',
      `is not set and ${file} does not exist: set DATABASE_URL, or start Sluice once (npm start)`,
    );
  }
  const state = loadStandaloneState(config.dataDir);
  return {
    ...config,
    ...embeddedUrls(state, config.embeddedPgPort),
    credentialKey: state.credentialKey,
  };
}

/** The users as aligned columns, a header and one line each, no rules (cli-table3). */
function table(users: UserDto[]): string {
  const table = new Table({
    head: ['USERNAME', 'ROLE', 'ADMIN', 'READ_ONLY', 'ENABLED'],
    chars: NO_RULES,
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 2, compact: true },
  });
  for (const u of users) {
    table.push([u.username, u.role, yes(u.admin), yes(u.read_only), yes(u.enabled)]);
  }
  return `${table.toString().replace(/ +$/gm, '')}\n`;
}

/** cli-table3's rules and corners, all left out. */
const NO_RULES = Object.fromEntries(
  [
    'top',
    'top-mid',
    'top-left',
    'top-right',
    'bottom',
    'bottom-mid',
    'bottom-left',
    'bottom-right',
    'left',
    'left-mid',
    'mid',
    'mid-mid',
    'right',
    'right-mid',
    'middle',
  ].map((name) => [name, '']),
);

const yes = (flag: boolean) => (flag ? 'yes' : 'no');
