import { JsonValueForm, jsonValueEncoder, jsonValueForm } from './json-value.encoder';
import { jsonValueRoom, writeJsonValue } from './json-value.writer';
import type { PgTypeInfo } from './type.info';

const none = (): PgTypeInfo | undefined => undefined;

/** Built-in types of each form, by oid: the encoder that the form must give the same text as. */
const TYPES: Record<Exclude<JsonValueForm, 'encoded'>, number[]> = {
  verbatim: [20, 21, 23, 114, 3802],
  number: [700, 701, 1700],
  bool: [16],
  date: [1082],
  timestamp: [1114],
  timestamptz: [1184],
  string: [25, 1043, 1083, 1266, 2950],
};

/** Writes `text` in `form` at an offset, between other bytes, as the row writer does. */
function written(form: JsonValueForm, text: string): string | undefined {
  const value = Buffer.from(text, 'utf8');
  const src = Buffer.concat([Buffer.from('  '), value, Buffer.from(' ')]);
  const dst = Buffer.alloc(3 + jsonValueRoom(value.length), 0xee);
  const end = writeJsonValue(form, src, 2, 2 + value.length, dst, 3);
  if (end < 0) return undefined;
  // Nothing past its room: the room is what the writer reserves.
  expect(end).toBeLessThanOrEqual(dst.length);
  return dst.toString('utf8', 3, end);
}

/** A deterministic mix of what a text value may hold, of every length. */
function texts(count: number, seed = 11): string[] {
  const alphabet = [
    'a',
    'Z',
    '0',
    '"',
    '\\',
    '/',
    '\n',
    '\t',
    '\b',
    '\f',
    '\r',
    '\u0001',
    '\u001f',
    '\u007f',
    'é',
    '中',
    '😀',
    '\u2028',
    ' ',
    ':',
    '+',
    '-',
    '.',
    'e',
  ];
  let state = seed;
  const next = (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % n;
  };
  const out: string[] = [''];
  for (let p = 0; p < count; p++) {
    const length = next(6) === 0 ? 64 + next(200) : next(20);
    let text = '';
    for (let i = 0; i < length; i++) text += alphabet[next(alphabet.length)];
    out.push(text);
  }
  return out;
}

const SAMPLES: Record<Exclude<JsonValueForm, 'encoded'>, string[]> = {
  verbatim: [
    '0',
    '-1',
    '9223372036854775807',
    '{"a": [1, "x\\"y"]}',
    'x'.repeat(100),
    '[' + '1,'.repeat(150) + '1]',
  ],
  number: [
    '0',
    '-0',
    '1.50',
    '1e-20',
    '1.7976931348623157e+308',
    '5e-324',
    '-2.5',
    'NaN',
    'Infinity',
    '-Infinity',
    '01',
    '1.',
    '.5',
    '1e',
    '1e+',
    '-',
    '',
    '+1',
    '1E5',
    '123456789012345680000',
  ],
  bool: ['t', 'f', 'true', ''],
  date: ['2024-02-29', '0044-03-15 BC', '5874897-12-31', 'infinity', '-infinity'],
  timestamp: [
    '2024-01-02 03:04:05',
    '2024-01-02 03:04:05.123456',
    '0044-03-15 12:00:00 BC',
    '294276-12-31 23:59:59.999999',
    'infinity',
    '-infinity',
  ],
  timestamptz: [
    '2024-01-02 03:04:05+00',
    '2024-07-01 12:00:00.5+02',
    '2024-01-02 03:04:05+05:30',
    '1800-06-01 12:00:00+00:19:32',
    '0044-03-15 12:00:00+00 BC',
    '1937-06-30 23:00:00-03:30 BC',
    '2024-01-02 03:04:05-08',
    'infinity',
    '-infinity',
    '2024-01-02',
  ],
  string: [
    'plain',
    '',
    'quote " and backslash \\',
    'controls \u0001\u0008\u000b\u000c\n\r\t\u001f\u007f',
    'unicode é ü ß 中文 Ω',
    'emoji 😀 👍🏽',
    '\u2028 \u2029 \ufeff',
    'x'.repeat(300) + '"',
  ],
};

describe(writeJsonValue.name, () => {
  it.each(Object.entries(TYPES))('writes %s values as their encoders do', (form, oids) => {
    const all = [...SAMPLES[form as keyof typeof SAMPLES], ...texts(300)];
    for (const oid of oids) {
      expect(jsonValueForm(oid, none)).toBe(form);
      const encode = jsonValueEncoder(oid, none);
      for (const text of all) {
        let expected: string | Error;
        try {
          expected = encode(text);
        } catch (err) {
          expected = err as Error;
        }
        const bytes = written(form as JsonValueForm, text);
        // Left to the encoder: a date or timestamp not in ISO form (refused there), infinity.
        if (bytes === undefined) {
          expect(['date', 'timestamp', 'timestamptz']).toContain(form);
          continue;
        }
        expect([oid, text, bytes]).toEqual([oid, text, expected]);
      }
    }
  });

  it('escapes every byte that needs it wherever it falls among the 4 bytes read at once', () => {
    // Strings are copied a 4-byte word at a time while no byte of the word needs escaping.
    const bytes = [...Array(128).keys()].map((b) => String.fromCharCode(b)).concat(['é', '中']);
    for (const length of [1, 3, 4, 5, 8, 9, 12]) {
      for (let at = 0; at < length; at++) {
        for (const b of bytes) {
          const text = 'a'.repeat(at) + b + 'z'.repeat(length - at - 1);
          expect([text, written('string', text)]).toEqual([text, JSON.stringify(text)]);
        }
      }
    }
  });

  it('leaves arrays, composites and hstore to their encoders', () => {
    expect(written('encoded', '{1,2}')).toBeUndefined();
    const lookup = (oid: number): PgTypeInfo | undefined =>
      oid === 1007
        ? { oid, name: 'integer[]', typtype: 'b', category: 'A', elem: 23, baseType: 0, delim: ',' }
        : undefined;
    expect(jsonValueForm(1007, lookup)).toBe('encoded');
  });

  it('classifies a domain by its base type', () => {
    const lookup = (oid: number): PgTypeInfo | undefined =>
      oid === 90001
        ? { oid, name: 'd', typtype: 'd', category: 'N', elem: 0, baseType: 1184, delim: ',' }
        : undefined;
    expect(jsonValueForm(90001, lookup)).toBe('timestamptz');
  });
});
