import Redis from 'ioredis';
import { startSluice, runMain, installGuards, executeOptions, request, cleanup } from './lib/service.mjs';
installGuards(120000);
await runMain(async () => {
  const sluice = await startSluice({});
  const stmt = 'select g, md5(g::text) from generate_series(1,10) g';
  const one = () => fetch(`${sluice.baseUrl}/v1/execute`, { method: 'POST', headers: { ...sluice.headers, 'content-type': 'application/json' }, body: JSON.stringify({ statement: stmt }) }).then((r) => r.text());
  for (let i = 0; i < 50; i++) await one();
  const r = new Redis();
  const list = await r.client('LIST');
  const names = new Map();
  for (const line of list.split('\n')) { const a = /addr=(\S+)/.exec(line)?.[1]; const n = /name=(\S*)/.exec(line)?.[1]; const id = /id=(\d+)/.exec(line)?.[1]; if (a) names.set(a, n || 'c' + id); }
  const pidOf = new Map();
  const mon = await new Redis().monitor();
  const lines = [];
  mon.on('monitor', (time, args, source, database) => lines.push([source, args]));
  await new Promise((r) => setTimeout(r, 300));
  lines.length = 0;
  await one();
  await new Promise((r) => setTimeout(r, 300));
  mon.disconnect();
  for (const [src, args] of lines) console.log((names.get(src) ?? src).padEnd(30), args.slice(0, 3).map((a) => String(a).slice(0, 60)).join(' '));
  r.disconnect();
});
