import { homedir } from 'node:os';
import { join } from 'node:path';

/** What the `sluice` command takes from its environment. */
export interface CliEnvironment {
  /** SLUICE_URL: the service to talk to. */
  url?: string;
  /** SLUICE_USER and SLUICE_PASSWORD: credentials for `sluice login` without a terminal. */
  user?: string;
  password?: string;
  /** Where the token is kept: $XDG_CONFIG_HOME/sluice, or ~/.config/sluice. */
  configDir: string;
}

/**
 * The one place the command line reads process.env. libs/config holds the service's settings,
 * validated at its start; these configure a client on the user's own machine, which the service
 * never reads, so they stay out of libs/config and .env.example.
 */
export function cliEnvironment(env: NodeJS.ProcessEnv = process.env): CliEnvironment {
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return {
    url: env.SLUICE_URL || undefined,
    user: env.SLUICE_USER || undefined,
    password: env.SLUICE_PASSWORD || undefined,
    configDir: join(base, 'sluice'),
  };
}
