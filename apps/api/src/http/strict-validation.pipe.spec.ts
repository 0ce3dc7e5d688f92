import { ValidationPipe } from '@nestjs/common';
import { SluiceError } from '@app/contracts';
import { ExecuteRequestDto, acceptedAs } from '@app/http-contracts';
import { StrictValidationPipe } from './strict-validation.pipe';
import { VALIDATION_OPTIONS } from './validation';

const body = { type: 'body' as const, metatype: ExecuteRequestDto, data: undefined };

/** What the pipe answers: the value it passes on, or the message of the error it throws. */
async function answer(pipe: ValidationPipe, value: unknown): Promise<unknown> {
  try {
    return await pipe.transform(structuredClone(value), body);
  } catch (err) {
    return { refused: err instanceof SluiceError ? err.message : String(err) };
  }
}

describe(StrictValidationPipe.name, () => {
  const pipe = new StrictValidationPipe();
  // Nest's pipe with the same options: what every body went through before acceptedAs.
  const nest = new ValidationPipe(VALIDATION_OPTIONS);

  it.each([
    ['the bench body', { statement: 'select 1' }],
    [
      'every field',
      {
        statement: 'select {n}',
        params: { n: 1, list: [1, 'a', null], nested: { a: { b: true } } },
        database: 'test',
        format: 'collection',
        fetch_size: 10,
        max_rows: 0,
        timeout: 1,
        schema: 'public',
        lane: 'export',
        wait_timeout: 0,
        on_wait_timeout: 'cancel',
        resumable: true,
      },
    ],
    ['nulls', { statement: 'select 1', database: null, params: null, resumable: null }],
  ])('passes %s on as Nest’s ValidationPipe would, without it', async (_, value) => {
    expect(acceptedAs(ExecuteRequestDto, value)).toBe(true);
    const passed = await answer(pipe, value);
    expect(passed).toBeInstanceOf(ExecuteRequestDto);
    expect(passed).toEqual(await answer(nest, value));
  });

  it.each([
    ['no statement', {}],
    ['a wrong type', { statement: 'select 1', fetch_size: '10' }],
    ['an unknown field', { statement: 'select 1', other: 1 }],
    ['an array', [{ statement: 'select 1' }]],
    ['a value past its limit', { statement: 'select 1', timeout: 86_400_001 }],
  ])('refuses %s with class-validator’s messages', async (_, value) => {
    const refused = await answer(pipe, value);
    expect(refused).toEqual({ refused: expect.any(String) as string });
    expect(refused).toEqual(await answer(nest, value));
  });

  it('refuses a field named after an object internal, which class-transformer would drop', async () => {
    const value = JSON.parse('{"statement":"select 1","constructor":1}') as object;
    expect(await answer(pipe, value)).toEqual({ refused: 'unknown field constructor' });
  });
});
