import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { tokenTimes } from './jwt.claims';
import { ndjsonLines } from './ndjson.reader';

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

async function collect(body: ReadableStream<Uint8Array>): Promise<string[]> {
  const out: string[] = [];
  for await (const line of ndjsonLines(body)) out.push(line);
  return out;
}

describe('ndjsonLines', () => {
  it('splits lines across chunks and keeps a character cut between two chunks whole', async () => {
    const bytes = new TextEncoder().encode('{"a":"é"}\n{"b":1}\n\n{"c":2}');
    const cut = bytes.indexOf(0xa9); // the second byte of é
    const lines = await collect(
      streamOf([bytes.slice(0, cut), bytes.slice(cut, 14), bytes.slice(14)]),
    );
    expect(lines).toEqual(['{"a":"é"}', '{"b":1}', '{"c":2}']);
  });
});

describe('tokenTimes', () => {
  it("reads a JWT's iat and exp in ms, and nothing from what is not a JWT", () => {
    const payload = Buffer.from(
      JSON.stringify({ sub: 'ü', iat: 1_899_996_400, exp: 1_900_000_000 }),
    ).toString('base64url');
    expect(tokenTimes(`h.${payload}.s`)).toEqual({
      issuedAt: 1_899_996_400_000,
      expiresAt: 1_900_000_000_000,
    });
    expect(tokenTimes('opaque')).toEqual({});
    expect(tokenTimes('a.!!!.b')).toEqual({});
  });
});

describe('@sluice/client package', () => {
  it("compiles with the browser's library and no Node types (fetch and web streams only)", () => {
    const root = join(__dirname, '..', '..', '..');
    const run = spawnSync(
      process.execPath,
      [
        join(root, 'node_modules/typescript/bin/tsc'),
        '-p',
        join(__dirname, '..', 'tsconfig.json'),
        '--noEmit',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.stdout + run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});
