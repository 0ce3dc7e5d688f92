import { ExecuteRequestDto } from '@app/http-contracts';
import { validateAs } from '../http/validation';
import { optionsFromQuery, textBodyRequest } from './query-options';

describe(optionsFromQuery.name, () => {
  const parsed = (extra: Record<string, unknown>) =>
    validateAs(ExecuteRequestDto, optionsFromQuery({ statement: 'select 1', ...extra }));

  it('turns numbers and params into their types', async () => {
    const dto = await parsed({ fetch_size: '10', params: '{"a":1}' });
    expect(dto).toMatchObject({ statement: 'select 1', fetch_size: 10, params: { a: 1 } });
  });

  it('takes every field of the body: wait_timeout as an integer, resumable as a boolean', async () => {
    const dto = await parsed({ wait_timeout: '0', on_wait_timeout: 'cancel', resumable: 'true' });
    expect(dto).toMatchObject({ wait_timeout: 0, on_wait_timeout: 'cancel', resumable: true });
    expect(await parsed({ resumable: 'false' })).toMatchObject({ resumable: false });
    await expect(parsed({ resumable: 'yes' })).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
  });

  it('reads every integer and boolean field of the DTO as its type, from the DTO itself', async () => {
    const dto = await parsed({
      fetch_size: '1',
      max_rows: '2',
      timeout: '3',
      wait_timeout: '4',
      resumable: 'true',
    });
    expect(dto).toMatchObject({
      fetch_size: 1,
      max_rows: 2,
      timeout: 3,
      wait_timeout: 4,
      resumable: true,
    });
  });

  it('refuses a statement in the query string of a text/plain body, which is the statement', () => {
    expect(textBodyRequest({ max_rows: '2' }, 'select 1')).toEqual({
      max_rows: 2,
      statement: 'select 1',
    });
    expect(() => textBodyRequest({ statement: 'select 2' }, 'select 1')).toThrow(
      expect.objectContaining({ code: 'INVALID_REQUEST' }),
    );
  });

  it.each(['__proto__', 'constructor', 'foo'])(
    'refuses an unknown field named %s, as a query string parser hands it over',
    async (key) => {
      // Own keys, as a query string parser makes them (a literal `__proto__` would set the prototype).
      const query = Object.defineProperty({}, key, { value: 'x', enumerable: true });
      await expect(parsed(query)).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
        message: expect.stringContaining(`unknown field ${key}`),
      });
    },
  );
});
