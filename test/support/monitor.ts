import type Redis from 'ioredis';
import { randomUUID } from 'node:crypto';

/** Every command Redis receives while it runs, as argument lists; `stop()` ends it. */
export interface CommandLog {
  readonly commands: string[][];
  readonly stop: () => void;
}

/**
 * Starts MONITOR on a connection of its own and resolves once it is seen to log (a marker sent
 * through `redis` came through). ioredis drops, with a "Command queue state error" event, the
 * lines that arrive together with MONITOR's own reply on a busy Redis: those precede the marker,
 * so nothing the caller does afterwards is lost.
 */
export async function logCommands(redis: Redis): Promise<CommandLog> {
  const monitor = redis.duplicate({ monitor: true, lazyConnect: false });
  monitor.on('error', () => undefined);
  const commands: string[][] = [];
  const marker = `monitor-ready-${randomUUID()}`;
  let ready!: () => void;
  const seen = new Promise<void>((resolve) => (ready = resolve));
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (args[1] === marker) ready();
    else commands.push(args);
  });
  for (let tries = 0; ; tries++) {
    await redis.echo(marker);
    let timer: NodeJS.Timeout | undefined;
    const done = await Promise.race([
      seen.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 50))),
    ]);
    // Callers count the timers left behind.
    clearTimeout(timer);
    if (done) break;
    if (tries === 40) throw new Error('MONITOR logged nothing within 2 s');
  }
  commands.length = 0;
  return { commands, stop: () => monitor.disconnect() };
}
