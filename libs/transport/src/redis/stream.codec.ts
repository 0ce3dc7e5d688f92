import { ResultRecord, SpooledSegment } from '@app/contracts';

const EMPTY: Buffer = Buffer.alloc(0);

/** Field/value arguments of XADD for one record: k (kind), m (JSON meta), b (bytes). */
export function recordFields(record: ResultRecord): (string | Buffer)[] {
  switch (record.kind) {
    case 'head':
      return ['k', 'head', 'm', JSON.stringify({ columns: record.columns }), 'b', record.bytes];
    case 'data':
      // A spooled segment's record says where its bytes are (JSON); a plain one, its rows alone.
      return [
        'k',
        'data',
        'm',
        record.segment
          ? JSON.stringify({ rows: record.rows, segment: record.segment })
          : String(record.rows),
        'b',
        record.bytes,
      ];
    case 'end':
      return [
        'k',
        'end',
        'm',
        JSON.stringify({
          status: record.status,
          abort: record.abort === true,
          rows: record.rows,
          startedAt: record.startedAt,
          streamingAt: record.streamingAt,
          recorded: record.recorded || undefined,
        }),
        'b',
        record.bytes,
      ];
    case 'error':
      return [
        'k',
        'error',
        'm',
        JSON.stringify({
          status: record.status,
          startedAt: record.startedAt,
          recorded: record.recorded || undefined,
        }),
      ];
  }
}

/** Rebuilds a record from the flat field list XREAD returns (as Buffers). */
export function parseRecord(fields: Buffer[]): ResultRecord {
  let kind = '';
  let meta = '';
  let bytes = EMPTY;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i].toString();
    if (name === 'k') kind = fields[i + 1].toString();
    else if (name === 'm') meta = fields[i + 1].toString();
    else if (name === 'b') bytes = fields[i + 1];
  }
  switch (kind) {
    case 'head':
      return { kind, columns: (JSON.parse(meta) as { columns: [] }).columns, bytes };
    case 'data': {
      if (!meta.startsWith('{')) return { kind, rows: Number(meta), bytes };
      const m = JSON.parse(meta) as { rows: number; segment: SpooledSegment };
      return { kind, rows: m.rows, bytes, segment: m.segment };
    }
    case 'end': {
      const m = JSON.parse(meta) as {
        status: never;
        abort: boolean;
        rows?: number;
        startedAt?: number;
        streamingAt?: number;
        recorded?: boolean;
      };
      const record: ResultRecord = { kind, status: m.status, bytes, abort: m.abort };
      if (m.rows !== undefined) record.rows = m.rows;
      if (m.startedAt !== undefined) record.startedAt = m.startedAt;
      if (m.streamingAt !== undefined) record.streamingAt = m.streamingAt;
      if (m.recorded === true) record.recorded = true;
      return record;
    }
    case 'error': {
      const m = JSON.parse(meta) as { status: never; startedAt?: number; recorded?: boolean };
      const record: ResultRecord = { kind, status: m.status };
      if (m.startedAt !== undefined) record.startedAt = m.startedAt;
      if (m.recorded === true) record.recorded = true;
      return record;
    }
    default:
      throw new Error(`unknown stream record kind "${kind}"`);
  }
}
