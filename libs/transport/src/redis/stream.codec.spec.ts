import { ResultRecord, okStatus, statusOf } from '@app/contracts';
import { parseRecord, recordFields } from './stream.codec';

/** Through the codec as XREAD hands fields back: every value a Buffer. */
const roundTrip = (record: ResultRecord): ResultRecord =>
  parseRecord(recordFields(record).map((field) => Buffer.from(field)));

const WHOLE: ResultRecord = {
  kind: 'end',
  status: okStatus(),
  bytes: Buffer.from('{}'),
  abort: false,
  rows: 1,
  startedAt: 5,
  streamingAt: 6,
};

describe('stream codec', () => {
  it.each<[string, ResultRecord]>([
    [
      'a head',
      { kind: 'head', columns: [{ name: 'a', type: 'integer' }], bytes: Buffer.from('{') },
    ],
    ['data', { kind: 'data', rows: 3, bytes: Buffer.from('[1],[2],[3]') }],
    [
      'a spooled segment',
      {
        kind: 'data',
        rows: 7,
        bytes: Buffer.alloc(0),
        segment: { key: 'q/000001', offset: 1024, size: 4096 },
      },
    ],
    ['an end', { kind: 'end', status: okStatus(), bytes: Buffer.from('}'), abort: false }],
    ['a whole small result with when it began', WHOLE],
    ['an error', { kind: 'error', status: statusOf('SYNTAX_ERROR') }],
    [
      'an error with when it began',
      { kind: 'error', status: statusOf('SYNTAX_ERROR'), startedAt: 9 },
    ],
    ['an end its producer recorded', { ...WHOLE, recorded: true }],
    [
      'an error its producer recorded',
      { kind: 'error', status: statusOf('SYNTAX_ERROR'), startedAt: 9, recorded: true },
    ],
  ])('gives back %s as written', (_name, record) => {
    expect(roundTrip(record)).toStrictEqual(record);
  });
});
