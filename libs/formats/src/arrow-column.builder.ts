import {
  Binary,
  Bool,
  Data,
  DataType,
  DateDay,
  Field,
  FixedSizeBinary,
  Float32,
  Float64,
  Int16,
  Int32,
  Int64,
  List,
  TimeMicrosecond,
  TimestampMicrosecond,
  Utf8,
  makeData,
} from 'apache-arrow';
import {
  PgColumnKind,
  PgValueKind,
  decodeDate,
  decodeInt64,
  decodeTime,
  decodeTimestampInt64,
  decodeUuid,
  flattenArray,
  parseArray,
  utf8Room,
  writeBytea,
  writeUtf8,
} from './pg-text.decoder';

const TWO_32 = 4294967296;

/** Canonical extension types, so that pyarrow & co. see a UUID or JSON, not just bytes/text. */
const EXTENSION: Partial<Record<PgValueKind, string>> = { uuid: 'arrow.uuid', json: 'arrow.json' };

function arrowType(kind: PgValueKind): DataType {
  switch (kind) {
    case 'int16':
      return new Int16();
    case 'int32':
      return new Int32();
    case 'int64':
      return new Int64();
    case 'float32':
      return new Float32();
    case 'float64':
      return new Float64();
    case 'bool':
      return new Bool();
    case 'text':
    case 'json':
      return new Utf8();
    case 'date':
      return new DateDay();
    case 'time':
      return new TimeMicrosecond();
    case 'timestamp':
      return new TimestampMicrosecond();
    case 'timestamptz':
      return new TimestampMicrosecond('UTC');
    case 'uuid':
      return new FixedSizeBinary(16);
    case 'bytea':
      return new Binary();
  }
}

function arrowField(name: string, kind: PgValueKind): Field {
  const extension = EXTENSION[kind];
  const metadata = extension
    ? new Map([
        ['ARROW:extension:name', extension],
        ['ARROW:extension:metadata', ''],
      ])
    : undefined;
  return new Field(name, arrowType(kind), true, metadata);
}

type Values = readonly (string | null)[];

/** Validity bitmap, or undefined when nothing is null. */
function validity(values: Values): { bitmap: Uint8Array | undefined; nulls: number } {
  let nulls = 0;
  for (let i = 0; i < values.length; i++) if (values[i] === null) nulls++;
  if (nulls === 0) return { bitmap: undefined, nulls };
  const bitmap = new Uint8Array((values.length + 7) >> 3);
  for (let i = 0; i < values.length; i++) if (values[i] !== null) bitmap[i >> 3] |= 1 << (i & 7);
  return { bitmap, nulls };
}

/**
 * Builds one column of a record batch straight from PostgreSQL's text values into Arrow buffers
 * (no per-value builder calls): numbers into typed arrays, strings into offsets + UTF-8 bytes.
 */
export class ArrowColumnBuilder {
  readonly field: Field;
  private readonly kind: PgValueKind;
  private readonly list: boolean;
  private readonly toJson: ((text: string) => string) | undefined;

  constructor(
    name: string,
    column: PgColumnKind,
    private readonly delimiter: string,
  ) {
    this.kind = column.kind;
    this.list = column.list;
    this.toJson = column.toJson;
    const element = arrowField('item', column.kind);
    this.field = column.list
      ? new Field(name, new List(element), true)
      : arrowField(name, column.kind);
  }

  build(values: Values): Data {
    if (!this.list) return this.leaf(this.field.type as DataType, values);
    const { bitmap, nulls } = validity(values);
    const offsets = new Int32Array(values.length + 1);
    const elements: (string | null)[] = [];
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (v !== null) {
        for (const e of flattenArray(parseArray(v, this.delimiter))) elements.push(e);
      }
      offsets[i + 1] = elements.length;
    }
    const type = this.field.type as List;
    const child = this.leaf(type.children[0].type as DataType, elements);
    return makeData({
      type,
      length: values.length,
      nullCount: nulls,
      nullBitmap: bitmap,
      valueOffsets: offsets,
      child,
    });
  }

  private leaf(type: DataType, values: Values): Data {
    const n = values.length;
    const { bitmap, nulls } = validity(values);
    const base = { length: n, nullCount: nulls, nullBitmap: bitmap };
    switch (this.kind) {
      case 'int16':
      case 'int32':
      case 'date':
      case 'float32':
      case 'float64': {
        const data =
          this.kind === 'int16'
            ? new Int16Array(n)
            : this.kind === 'float32'
              ? new Float32Array(n)
              : this.kind === 'float64'
                ? new Float64Array(n)
                : new Int32Array(n);
        const parse = this.kind === 'date' ? decodeDate : Number;
        for (let i = 0; i < n; i++) {
          const v = values[i];
          if (v !== null) data[i] = parse(v);
        }
        return makeData({ ...base, type, data } as Parameters<typeof makeData>[0]);
      }
      case 'int64':
      case 'time':
      case 'timestamp':
      case 'timestamptz': {
        const data = new BigInt64Array(n);
        const words = new Uint32Array(data.buffer);
        const parse =
          this.kind === 'int64'
            ? decodeInt64
            : this.kind === 'time'
              ? decodeTime
              : decodeTimestampInt64;
        for (let i = 0; i < n; i++) {
          const text = values[i];
          if (text === null) continue;
          const v = parse(text);
          if (typeof v === 'bigint') {
            data[i] = v;
          } else {
            // little-endian words: no bigint per value
            const hi = Math.floor(v / TWO_32);
            words[2 * i] = v - hi * TWO_32;
            words[2 * i + 1] = hi;
          }
        }
        return makeData({ ...base, type, data } as Parameters<typeof makeData>[0]);
      }
      case 'bool': {
        const data = new Uint8Array((n + 7) >> 3);
        for (let i = 0; i < n; i++) if (values[i] === 't') data[i >> 3] |= 1 << (i & 7);
        return makeData({ ...base, type: type as Bool, data });
      }
      case 'uuid': {
        const data = new Uint8Array(16 * n);
        for (let i = 0; i < n; i++) {
          const v = values[i];
          if (v !== null) decodeUuid(v, data, 16 * i);
        }
        return makeData({ ...base, type: type as FixedSizeBinary, data });
      }
      case 'text':
      case 'json':
      case 'bytea': {
        const offsets = new Int32Array(n + 1);
        let bytes = Buffer.allocUnsafe(1024);
        let at = 0;
        const text = this.kind !== 'bytea';
        // Composites and hstore: their to_json() text, made before the loop every column shares.
        const toJson = this.toJson;
        const strings = toJson ? values.map((v) => (v === null ? v : toJson(v))) : values;
        for (let i = 0; i < n; i++) {
          const v = strings[i];
          if (v !== null) {
            const room = text ? utf8Room(v) : v.length;
            if (at + room > bytes.length) {
              const next = Buffer.allocUnsafe(Math.max(bytes.length * 2, at + room));
              bytes.copy(next, 0, 0, at);
              bytes = next;
            }
            at += text ? writeUtf8(bytes, v, at) : writeBytea(bytes, v, at);
          }
          offsets[i + 1] = at;
        }
        const data = bytes.subarray(0, at);
        return makeData({
          ...base,
          type: type as Utf8 | Binary,
          valueOffsets: offsets,
          data,
        } as Parameters<typeof makeData>[0]);
      }
    }
  }
}
