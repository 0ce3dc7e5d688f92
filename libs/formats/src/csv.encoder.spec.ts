import { okStatus } from '@app/contracts';
import { Client, type CustomTypesConfig } from 'pg';
import { connectTestDatabase } from '@test/settings';
import { CsvEncoder } from './csv.encoder';
import { EncoderColumn, TextRow } from './result.encoder';
import { RowBatch } from './row.batch';

// Every value arrives as PostgreSQL's text output, as in the worker.
const RAW_TEXT = {
  getTypeParser: () => (value: string) => value,
} as unknown as CustomTypesConfig;

const TEXT_OID = 25;
const BOOL_OID = 16;

const column = (name: string, oid = TEXT_OID, type = 'text'): EncoderColumn => ({
  name,
  type,
  oid,
  json: (text) => JSON.stringify(text),
});

const encoder = (columns: EncoderColumn[]): CsvEncoder =>
  new CsvEncoder({ queryId: 'q1', layout: 'array', columns });

/** The whole body for one result, rows split into chunks of `chunk`. */
function encode(columns: EncoderColumn[], rows: TextRow[], chunk = rows.length || 1): string {
  const csv = encoder(columns);
  const parts = [csv.head()];
  for (let i = 0; i < rows.length; i += chunk)
    parts.push(csv.rows(RowBatch.fromText(rows.slice(i, i + chunk))));
  parts.push(csv.end(okStatus())!);
  return Buffer.concat(parts).toString('utf8');
}

/**
 * Strict RFC 4180 parser: every record ends in CRLF; an unquoted empty field is null, a quoted
 * one a string. Throws on anything the RFC does not allow.
 */
function parseCsv(text: string): (string | null)[][] {
  const records: (string | null)[][] = [];
  let record: (string | null)[] = [];
  let i = 0;
  while (i < text.length) {
    let value: string | null;
    if (text[i] === '"') {
      value = '';
      i++;
      for (;;) {
        if (i >= text.length) throw new Error('unterminated quoted field');
        if (text[i] === '"') {
          if (text[i + 1] !== '"') break;
          value += '"';
          i += 2;
        } else value += text[i++];
      }
      i++;
    } else {
      let j = i;
      while (j < text.length && text[j] !== ',' && text[j] !== '\r') {
        if (text[j] === '"' || text[j] === '\n') throw new Error(`bad character at ${j}`);
        j++;
      }
      value = j === i ? null : text.slice(i, j);
      i = j;
    }
    record.push(value);
    if (text[i] === ',') {
      i++;
    } else if (text.startsWith('\r\n', i)) {
      records.push(record);
      record = [];
      i += 2;
    } else {
      throw new Error(`expected , or CRLF at ${i}`);
    }
  }
  if (record.length > 0) throw new Error('last record has no CRLF');
  return records;
}

describe(CsvEncoder.name, () => {
  it('writes a header row of column names ending in CRLF', () => {
    const csv = encoder([column('id', 23, 'integer'), column('name')]);
    expect(csv.head().toString()).toBe('id,name\r\n');
  });

  it('quotes column names like values', () => {
    const csv = encoder([column('a,b'), column('say "hi"'), column(' x'), column('?column?')]);
    expect(csv.head().toString()).toBe('"a,b","say ""hi"""," x",?column?\r\n');
  });

  it('writes plain values unquoted, one CRLF-terminated line per row', () => {
    const body = encode(
      [column('id', 23, 'integer'), column('name')],
      [
        ['1', 'alpha'],
        ['2', 'in side'],
      ],
    );
    expect(body).toBe('id,name\r\n1,alpha\r\n2,in side\r\n');
  });

  it('quotes fields with commas, quotes and line breaks', () => {
    const values = ['a,b', 'say "hi"', '"', 'l1\r\nl2', 'lf\nonly', 'cr\ronly'];
    const body = encode(
      values.map((_, i) => column(`c${i}`)),
      [values],
    );
    expect(body).toBe(
      'c0,c1,c2,c3,c4,c5\r\n"a,b","say ""hi""","""","l1\r\nl2","lf\nonly","cr\ronly"\r\n',
    );
    expect(parseCsv(body)[1]).toEqual(values);
  });

  it('quotes fields that begin or end with a space', () => {
    const values = [' lead', 'trail ', ' ', 'in side', '\ttab'];
    const body = encode(
      values.map((_, i) => column(`c${i}`)),
      [values],
    );
    expect(body).toBe('c0,c1,c2,c3,c4\r\n" lead","trail "," ",in side,\ttab\r\n');
    expect(parseCsv(body)[1]).toEqual(values);
  });

  it('writes NULL as an empty field and the empty string as ""', () => {
    const columns = [column('a'), column('b'), column('c')];
    const rows: TextRow[] = [
      [null, '', null],
      ['', null, ''],
      [null, null, null],
    ];
    const body = encode(columns, rows);
    expect(body).toBe('a,b,c\r\n,"",\r\n"",,""\r\n,,\r\n');
    expect(parseCsv(body).slice(1)).toEqual(rows);
  });

  it('writes a one-column NULL as a blank line and the empty string as ""', () => {
    expect(encode([column('v')], [[null], [''], ['x']])).toBe('v\r\n\r\n""\r\nx\r\n');
  });

  it('writes booleans as true and false', () => {
    const body = encode(
      [column('b', BOOL_OID, 'boolean'), column('t')],
      [
        ['t', 't'],
        ['f', 'f'],
        [null, null],
      ],
    );
    expect(body).toBe('b,t\r\ntrue,t\r\nfalse,f\r\n,\r\n');
  });

  it('passes unicode, arrays and other text through verbatim', () => {
    const body = encode(
      [column('u'), column('arr', 1009, 'text[]'), column('n', 1700, 'numeric')],
      [
        ['é 中文 😀', '{x,"a b"}', '-1.50'],
        ['\u00a0nbsp', '{"a,b","c\\"d",NULL,""}', 'NaN'],
      ],
    );
    expect(body).toBe(
      'u,arr,n\r\n' +
        'é 中文 😀,"{x,""a b""}",-1.50\r\n' +
        '\u00a0nbsp,"{""a,b"",""c\\""d"",NULL,""""}",NaN\r\n',
    );
    expect(Buffer.from(body, 'utf8').toString('utf8')).toBe(body);
  });

  it("writes composites, records and hstore in PostgreSQL's text form, as COPY … CSV does", () => {
    // The columnar formats carry these as JSON; CSV keeps the text form, as for arrays.
    const asJson = { list: false, element: () => '{}' };
    const columns = [
      { ...column('row', 90010, 'pair'), objectJson: asJson },
      { ...column('array', 90011, 'pair[]'), objectJson: { ...asJson, list: true } },
      column('record', 2249, 'record'),
      { ...column('pair', 90010, 'pair'), objectJson: asJson },
    ];
    const body = encode(columns, [['(1,"a ""b"", c")', '{"(2,x)"}', null, '(,)']]);
    // What PostgreSQL's COPY (FORMAT csv, HEADER) writes for the same values.
    expect(body).toBe('row,array,record,pair\r\n"(1,""a """"b"""", c"")","{""(2,x)""}",,"(,)"\r\n');
  });

  it('encodes several chunks that concatenate into one document', () => {
    const columns = [column('a'), column('b', BOOL_OID, 'boolean')];
    const rows: TextRow[] = Array.from({ length: 7 }, (_, i) => [
      i % 3 === 0 ? null : `v,${i}\r\n`,
      i % 2 === 0 ? 't' : 'f',
    ]);
    const whole = encode(columns, rows);
    for (const chunk of [1, 2, 3, 7]) expect(encode(columns, rows, chunk)).toBe(whole);
    expect(parseCsv(whole)).toEqual([
      ['a', 'b'],
      ...rows.map(([a, b]) => [a, b === 't' ? 'true' : 'false']),
    ]);
  });

  it('returns an empty buffer for an empty chunk', () => {
    expect(encoder([column('a')]).rows(RowBatch.EMPTY).length).toBe(0);
  });

  it('writes an empty header line and one empty line per row when there are no columns', () => {
    const csv = encoder([]);
    expect(csv.head().toString()).toBe('\r\n');
    expect(csv.rows(RowBatch.fromText([[], []])).toString()).toBe('\r\n\r\n');
    expect(encode([], [[], []])).toBe('\r\n\r\n\r\n');
  });

  it('ends with an empty buffer on success and null when failed', () => {
    const csv = encoder([column('a')]);
    expect(csv.end(okStatus('OK', { row_count: 0 }))).toEqual(Buffer.alloc(0));
    expect(csv.end({ reason: 'boom', sql_state: '57014', vendor_code: 1 })).toBeNull();
  });

  describe('round trip of PostgreSQL text output', () => {
    let client: Client;

    beforeAll(async () => {
      client = await connectTestDatabase({ types: RAW_TEXT });
    });

    afterAll(async () => {
      await client?.end();
    });

    it('parses back to the values PostgreSQL sent, booleans as true/false', async () => {
      const result = await client.query<TextRow>({
        rowMode: 'array',
        text: `SELECT * FROM (VALUES
          ('plain', true, ARRAY['a,b', 'c"d', NULL, '', ' e ']::text[], 1.5::numeric, '{"k": "v, w"}'::jsonb),
          ('a,b', false, '{}'::text[], NULL, 'null'::jsonb),
          ('say "hi"', NULL, ARRAY[E'x\\r\\ny'], 'NaN', '"s"'::jsonb),
          (E'l1\\r\\nl2', true, NULL, -0.0, '[1, 2]'::jsonb),
          (E'lf\\nonly', false, ARRAY['{}'], 1e-20, NULL),
          (' lead', true, ARRAY['NULL'], 0, '{}'::jsonb),
          ('trail ', false, ARRAY[' '], 0, '{}'::jsonb),
          ('', true, ARRAY[''], 0, '{}'::jsonb),
          (NULL, NULL, NULL, NULL, NULL),
          ('é 中文 😀', true, ARRAY['é', '😀'], 0, '{"é": "😀"}'::jsonb),
          ('\\.', false, ARRAY['\\'], 0, '{}'::jsonb)
        ) AS t("text, with comma", "say ""bool""", " arr", num, doc)`,
      });
      const columns = result.fields.map((f) => column(f.name, f.dataTypeID));
      const rows = result.rows;
      expect(rows).toHaveLength(11);

      const parsed = parseCsv(encode(columns, rows, 3));
      expect(parsed[0]).toEqual(['text, with comma', 'say "bool"', ' arr', 'num', 'doc']);
      const bool = columns.map((c) => c.oid === BOOL_OID);
      expect(bool).toEqual([false, true, false, false, false]);
      expect(parsed.slice(1)).toEqual(
        rows.map((row) =>
          row.map((v, i) => (bool[i] && v !== null ? (v === 't' ? 'true' : 'false') : v)),
        ),
      );
    });
  });
});
