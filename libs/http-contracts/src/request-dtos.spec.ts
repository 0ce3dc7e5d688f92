import { plainToInstance } from 'class-transformer';
import { ValidationError, validate } from 'class-validator';
import {
  CreateUserDto,
  ExecuteRequestDto,
  IntegerField,
  LoginRequestDto,
  TextField,
  UpdateUserDto,
} from './index';

function messages(errors: ValidationError[]): string[] {
  return errors.flatMap((e) => Object.values(e.constraints ?? {}));
}

async function check(cls: new () => object, plain: object): Promise<string[]> {
  const errors = await validate(plainToInstance(cls, plain), {
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
  });
  return messages(errors);
}

const CASES: [string, new () => object, object, string[]][] = [
  ['execute ok', ExecuteRequestDto, { statement: 'select 1', fetch_size: 0, resumable: true }, []],
  [
    'execute nulls',
    ExecuteRequestDto,
    { statement: 'select 1', database: null, fetch_size: null },
    [],
  ],
  [
    'execute empty',
    ExecuteRequestDto,
    {},
    ['statement should not be empty', 'statement must be a string'],
  ],
  ['execute statement wrong', ExecuteRequestDto, { statement: 1 }, ['statement must be a string']],
  [
    'execute statement empty',
    ExecuteRequestDto,
    { statement: '' },
    ['statement should not be empty'],
  ],
  [
    'execute every field wrong',
    ExecuteRequestDto,
    {
      statement: 'x',
      database: '',
      format: 'rows',
      params: [1],
      fetch_size: -1,
      max_rows: 1.5,
      timeout: 0,
      schema: 'x'.repeat(64),
      lane: 'fast',
      wait_timeout: 3_600_001,
      on_wait_timeout: 'stop',
      resumable: 'yes',
    },
    [
      'database should not be empty',
      'format must be one of the following values: array, collection',
      'params must be an object',
      'fetch_size must not be less than 0',
      'max_rows must be an integer number',
      'timeout must not be less than 1',
      'schema must be shorter than or equal to 63 characters',
      'lane must be one of the following values: interactive, export',
      'wait_timeout must not be greater than 3600000',
      'on_wait_timeout must be one of the following values: continue, cancel',
      'resumable must be a boolean value',
    ],
  ],
  [
    'execute strings for numbers',
    ExecuteRequestDto,
    { statement: 'x', fetch_size: 'a', timeout: '5' },
    [
      'fetch_size must not be greater than 1000000',
      'fetch_size must not be less than 0',
      'fetch_size must be an integer number',
      'timeout must not be greater than 86400000',
      'timeout must not be less than 1',
      'timeout must be an integer number',
    ],
  ],
  [
    'execute unknown',
    ExecuteRequestDto,
    { statement: 'x', nope: 1 },
    ['property nope should not exist'],
  ],
  ['login ok', LoginRequestDto, { username: 'a', password: '' }, []],
  [
    'login wrong',
    LoginRequestDto,
    { username: '', password: 1, database: '' },
    [
      'username should not be empty',
      'password must be shorter than or equal to 1024 characters',
      'password must be a string',
      'database should not be empty',
    ],
  ],
  [
    'login missing',
    LoginRequestDto,
    {},
    [
      'username must be shorter than or equal to 128 characters',
      'username should not be empty',
      'username must be a string',
      'password must be shorter than or equal to 1024 characters',
      'password must be a string',
    ],
  ],
  ['create ok', CreateUserDto, { username: 'a', password: 'x'.repeat(8), role: 'r' }, []],
  [
    'create wrong',
    CreateUserDto,
    { username: 'a@b', password: 'short', role: 'a\u0000b', admin: null, read_only: 'no' },
    [
      'username may hold only letters, digits, _ . - (1 to 128)',
      'password must be longer than or equal to 8 characters',
      'role must not contain NUL',
      'admin must be a boolean value',
      'read_only must be a boolean value',
    ],
  ],
  [
    'create empty',
    CreateUserDto,
    { username: '', password: '', role: '' },
    [
      'username may hold only letters, digits, _ . - (1 to 128)',
      'password must be longer than or equal to 8 characters',
      'role must not contain NUL',
      'role should not be empty',
    ],
  ],
  ['update ok', UpdateUserDto, {}, []],
  [
    'update wrong',
    UpdateUserDto,
    { password: null, role: '', admin: 1, enabled: null },
    [
      'password must be shorter than or equal to 1024 characters',
      'password must be longer than or equal to 8 characters',
      'password must be a string',
      'role must not contain NUL',
      'role should not be empty',
      'admin must be a boolean value',
      'enabled must be a boolean value',
    ],
  ],
];

/**
 * Each request DTO's answers to good and bad bodies, message for message: the messages are the
 * 400 answers clients see, and were the same when each field's checks were written out by hand.
 */
describe('request DTOs', () => {
  it.each(CASES)('answers %s with its messages', async (_, cls, plain, expected) => {
    expect(await check(cls, plain)).toEqual(expected);
  });
});

describe('request fields', () => {
  class Probe {
    @IntegerField({ presence: 'absent-or-null', description: 'n', min: 2, max: 5 })
    n?: number;

    @TextField({ notEmpty: true, maxLength: 3, pattern: { regex: /^a/, message: 'starts with a' } })
    s!: string;
  }

  /** What @nestjs/swagger keeps of a property for the document. */
  const documented = (key: string): unknown =>
    Reflect.getMetadata('swagger/apiModelProperties', Probe.prototype, key);

  it('documents the limits its checks hold a field to, and checks them', async () => {
    expect(documented('n')).toMatchObject({
      type: 'integer',
      minimum: 2,
      maximum: 5,
      required: false,
      description: 'n',
    });
    expect(documented('s')).toMatchObject({
      type: 'string',
      minLength: 1,
      maxLength: 3,
      pattern: '^a',
    });
    expect(await check(Probe, { n: 5, s: 'abc' })).toEqual([]);
    expect(await check(Probe, { n: 6, s: 'b' })).toEqual([
      'n must not be greater than 5',
      'starts with a',
    ]);
  });
});
