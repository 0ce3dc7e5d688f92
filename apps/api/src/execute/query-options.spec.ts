import { ExecuteRequestDto } from '@app/contracts';
import { validateAs } from '../http/validation';
import { optionsFromQuery } from './query-options';

describe(optionsFromQuery.name, () => {
  const parsed = (extra: Record<string, unknown>) =>
    validateAs(ExecuteRequestDto, optionsFromQuery({ statement: 'select 1', ...extra }));

  it('turns numbers and params into their types', async () => {
    const dto = await parsed({ fetch_size: '10', params: '{"a":1}' });
    expect(dto).toMatchObject({ statement: 'select 1', fetch_size: 10, params: { a: 1 } });
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
