import { Readable } from 'node:stream';
import { SluiceError } from '@app/contracts';
import { BodyCheck, jsonDepth } from './request.checks';

async function run(chunks: Buffer[], maxDepth?: number): Promise<Buffer> {
  const out: Buffer[] = [];
  const check = Readable.from(chunks).pipe(new BodyCheck(maxDepth));
  for await (const chunk of check) out.push(chunk as Buffer);
  return Buffer.concat(out);
}

async function failure(chunks: Buffer[], maxDepth?: number): Promise<SluiceError> {
  try {
    await run(chunks, maxDepth);
  } catch (err) {
    return err as SluiceError;
  }
  throw new Error('expected the check to fail');
}

describe(BodyCheck.name, () => {
  it('passes valid UTF-8 through unchanged, also when a character is split across chunks', async () => {
    const text = Buffer.from('{"statement":"select \'São Paulo\' — 東京"}');
    const cut = text.indexOf(0xe6) + 1;
    expect(await run([text.subarray(0, cut), text.subarray(cut)], 8)).toEqual(text);
  });

  it('refuses invalid UTF-8 with a 400', async () => {
    const err = await failure([Buffer.from([0x7b, 0xff, 0xfe, 0x7d])]);
    expect(err.code).toBe('INVALID_REQUEST');
    expect(err.message).toMatch(/UTF-8/);
  });

  it('refuses a body that ends inside a multi-byte character', async () => {
    expect((await failure([Buffer.from([0x22, 0xe6, 0x9d])])).message).toMatch(/UTF-8/);
  });

  it('refuses JSON nested deeper than the limit, ignoring brackets inside strings', async () => {
    const ok = '{"a":[[["[[[[[[[[{{{{"]]]}';
    expect((await run([Buffer.from(ok)], 4)).toString()).toBe(ok);
    const err = await failure([Buffer.from('{"a":[[[[1]]]]}')], 4);
    expect(err.code).toBe('LIMIT_EXCEEDED');
  });

  it('keeps track of escaped quotes', async () => {
    const body = '{"a":"\\"[[[[[[","b":[1]}';
    expect((await run([Buffer.from(body)], 2)).toString()).toBe(body);
  });
});

describe('jsonDepth', () => {
  it.each([
    ['1', 0],
    ['{}', 1],
    ['{"a":[1,[2]]}', 3],
    ['{"a":"[[[[]]]"}', 1],
    ['{"a":"\\"[[[["}', 1],
  ])('measures %s as %d', (text, depth) => {
    expect(jsonDepth(text)).toBe(depth);
  });
});
