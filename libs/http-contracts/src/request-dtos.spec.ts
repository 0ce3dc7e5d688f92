import { plainToInstance } from 'class-transformer';
import { IsString, ValidationError, validate } from 'class-validator';
import {
  ChoiceField,
  CreateUserDto,
  FlagField,
  ObjectField,
  acceptedAs,
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

/** Values of every kind a field may be sent: right and wrong types, edges of each limit. */
const VALUES: unknown[] = [
  undefined,
  null,
  '',
  'a',
  'abc',
  'select 1',
  'a'.repeat(8),
  'a'.repeat(63),
  'a'.repeat(64),
  'a'.repeat(1025),
  '\uFE0F'.repeat(8),
  '\u{1F600}'.repeat(5),
  'a@b',
  'a\u0000b',
  'array',
  'collection',
  'interactive',
  'export',
  'continue',
  'cancel',
  0,
  1,
  -1,
  2,
  0.5,
  63,
  1_000_000,
  1_000_001,
  3_600_000,
  86_400_000,
  86_400_001,
  Number.MAX_SAFE_INTEGER,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  true,
  false,
  {},
  { a: 1 },
  [],
  ['x'],
];

/** A small deterministic generator (the same bodies every run). */
function randomOf(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

describe(acceptedAs.name, () => {
  /** Each DTO with a body it accepts, the start of the bodies tried. */
  const dtos: [string, new () => object, Record<string, unknown>][] = [
    ['ExecuteRequestDto', ExecuteRequestDto, { statement: 'select 1', fetch_size: 0 }],
    ['LoginRequestDto', LoginRequestDto, { username: 'a', password: 'b' }],
    ['CreateUserDto', CreateUserDto, { username: 'a', password: 'a'.repeat(8), role: 'r' }],
    ['UpdateUserDto', UpdateUserDto, {}],
  ];

  it.each(dtos)(
    'accepts only bodies of %s that class-validator finds no error in',
    async (_, cls, valid) => {
      const fields = Object.keys(new cls());
      const random = randomOf(fields.length);
      const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)];
      let accepted = 0;
      let refused = 0;
      for (let i = 0; i < 3000; i++) {
        // A body it accepts with one to three fields changed, or one more field.
        const body: Record<string, unknown> = { ...valid };
        for (let n = 1 + Math.floor(random() * 3); n > 0; n--) {
          const value = pick(VALUES);
          if (value === undefined && random() < 0.5) delete body[pick(fields)];
          else body[pick(fields)] = value;
        }
        if (random() < 0.05) body[pick(['extra', 'Statement', 'toString'])] = 1;
        if (!acceptedAs(cls, body)) {
          refused++;
          continue;
        }
        accepted++;
        expect({ body, errors: await check(cls, body) }).toEqual({ body, errors: [] });
      }
      // The test has seen enough of both to mean something.
      expect(Math.min(accepted, refused)).toBeGreaterThan(100);
    },
  );

  it('accepts the bodies clients send most', () => {
    expect(acceptedAs(ExecuteRequestDto, { statement: 'select 1' })).toBe(true);
    expect(
      acceptedAs(ExecuteRequestDto, {
        statement: 'select {n}',
        params: { n: 1 },
        format: 'collection',
        fetch_size: 0,
        max_rows: 5,
        timeout: 5000,
        wait_timeout: null,
        resumable: false,
      }),
    ).toBe(true);
    expect(acceptedAs(LoginRequestDto, { username: 'alice', password: 'x' })).toBe(true);
  });

  it('leaves every body to class-validator when a field has a check of its own', () => {
    class Extra {
      @IsString()
      @ChoiceField(['a', 'b'])
      choice!: string;

      @FlagField()
      flag!: boolean;
    }
    class Plain {
      @ObjectField()
      object!: object;
    }
    expect(acceptedAs(Extra, { choice: 'a', flag: true })).toBe(false);
    expect(acceptedAs(Plain, { object: {} })).toBe(true);
    expect(acceptedAs(Plain, { object: [] })).toBe(false);
    expect(acceptedAs(Plain, { object: {}, other: 1 })).toBe(false);
  });
});
