#!/usr/bin/env node
import { exitWhenDrained, runSluice } from '@sluice/cli';

/**
 * `sluice` of the server install (the root package's bin): @sluice/cli's command line, with the
 * users commands, which need the server's code and its settings. Loaded only for them: the
 * client commands need neither Nest nor the service's configuration.
 */
void runSluice(process.argv.slice(2), {
  users: async (command) => (await import('./users.command')).runUsers(command),
}).then(exitWhenDrained);
