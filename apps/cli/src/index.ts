/**
 * The `sluice` command line, for the server install's `sluice` (apps/api), which adds the users
 * commands to it: nothing here needs more than @sluice/client.
 */
export { runSluice, exitWhenDrained, type UsersRunner } from './sluice';
export { EXIT_CODES } from './exit.codes';
export { UsageError } from './usage.error';
export { readPassword } from './terminal.prompt';
export type { UsersCommand } from './users.program';
