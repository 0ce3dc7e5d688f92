import { MEDIA_TYPES } from '@app/contracts';
import { ExecuteRequestDto } from '@app/http-contracts';
import { DEFAULT_COMPRESSION_LEVEL, SUPPORTED_FORMATS } from '@app/formats';
import { negotiateRequest, resultWait } from './request.negotiation';
import { refusal } from '@test/support/refusal';

/** What a request asks for, from its body, path and headers alone; its 400 and 406 answers. */
const body: ExecuteRequestDto = { statement: 'select 1' };

describe(negotiateRequest.name, () => {
  it('answers JSON, uncompressed, on the body database when nothing else is asked', () => {
    const given = { ...body, database: 'app' };
    const negotiated = negotiateRequest(given, {});
    expect(negotiated).toEqual({
      request: given,
      format: 'json',
      encoding: undefined,
      lane: 'interactive',
    });
    expect(negotiated.request).not.toBe(given);
  });

  it('puts Parquet and Arrow in the export lane, unless the request names its lane', () => {
    expect(negotiateRequest(body, { accept: 'application/parquet' }).lane).toBe('export');
    expect(negotiateRequest(body, { accept: 'application/vnd.apache.arrow.stream' }).lane).toBe(
      'export',
    );
    const named = { ...body, lane: 'interactive' as const };
    expect(negotiateRequest(named, { accept: 'application/parquet' }).lane).toBe('interactive');
    expect(negotiateRequest({ ...body, lane: 'export' }, {}).lane).toBe('export');
  });

  it('takes the database of the path, also when the body names the same one', () => {
    expect(negotiateRequest(body, { database: 'app' }).request).toEqual({
      ...body,
      database: 'app',
    });
    const same = { ...body, database: 'app' };
    expect(negotiateRequest(same, { database: 'app' }).request.database).toBe('app');
  });

  it('refuses a path database that contradicts the body, and leaves the body as it was', () => {
    const given = { ...body, database: 'other' };
    const error = refusal(() => negotiateRequest(given, { database: 'app' }));
    expect(error).toMatchObject({
      code: 'INVALID_REQUEST',
      message: 'database in the path and in the body differ',
    });
    expect(given).toEqual({ ...body, database: 'other' });
  });

  it('picks the format from Accept and refuses one it cannot produce with the supported list', () => {
    expect(negotiateRequest(body, { accept: MEDIA_TYPES.ndjson }).format).toBe('ndjson');
    const error = refusal(() => negotiateRequest(body, { accept: 'image/png' }));
    expect(error.code).toBe('NOT_ACCEPTABLE');
    expect(error.message).toBe(
      `cannot produce image/png; supported: ${SUPPORTED_FORMATS.map((f) => MEDIA_TYPES[f]).join(', ')}`,
    );
  });

  it('compresses Parquet with ZSTD unless the compression parameter names another codec', () => {
    const codec = (accept: string) => negotiateRequest(body, { accept }).parquetCompression;
    expect(codec('application/parquet')).toBe('zstd');
    expect(codec('application/parquet; compression=snappy')).toBe('snappy');
    expect(codec('application/parquet;compression="GZIP"')).toBe('gzip');
    expect(codec('application/json;q=0.5, application/parquet; q=0.9; compression=none')).toBe(
      'none',
    );
    expect(codec('application/parquet ; compression = zstd')).toBe('zstd');
    expect(negotiateRequest(body, { accept: 'application/json' }).parquetCompression).toBe(
      undefined,
    );
  });

  it('refuses an unknown Parquet compression with 406, naming the values it takes', () => {
    for (const accept of [
      'application/parquet; compression=lz4',
      'application/parquet; compression=',
      'application/parquet; compression="zstd, snappy"',
    ]) {
      const error = refusal(() => negotiateRequest(body, { accept }));
      expect(error.code).toBe('NOT_ACCEPTABLE');
      expect(error.message).toMatch(
        /^unknown Parquet compression '.*'; accepted: compression=zstd\|snappy\|gzip\|none$/,
      );
    }
  });

  it('takes an Accept range that names the charset of the answer, and refuses another charset', () => {
    const named = (accept: string) => negotiateRequest(body, { accept }).format;
    expect(named('application/json; charset=utf-8')).toBe('json');
    expect(named('application/stream+json;charset=UTF-8')).toBe('ndjson');
    expect(named('application/x-ndjson; charset="utf-8"')).toBe('ndjson');
    expect(named('text/csv; charset=utf-8, application/json;q=0.5')).toBe('csv');
    expect(named('text/csv; charset=utf-8; header=present, application/json;q=0.5')).toBe('json');
    expect(refusal(() => named('application/json; charset=iso-8859-1')).code).toBe(
      'NOT_ACCEPTABLE',
    );
    expect(refusal(() => named('application/parquet; charset=utf-8')).code).toBe('NOT_ACCEPTABLE');
  });

  it('picks the encoding from the compression headers', () => {
    expect(negotiateRequest(body, { acceptEncoding: 'gzip' }).encoding).toEqual({
      name: 'gzip',
      level: DEFAULT_COMPRESSION_LEVEL,
    });
    // docs/api.md: Preferred-Compression-Level defaults to 3.
    expect(DEFAULT_COMPRESSION_LEVEL).toBe(3);
    expect(
      negotiateRequest(body, {
        acceptEncoding: 'gzip, br',
        preferredEncoding: 'br',
        preferredLevel: '9',
      }).encoding,
    ).toEqual({ name: 'br', level: 9 });
  });

  it('checks the database, then the format, then the encoding', () => {
    const everythingWrong = { accept: 'image/png', preferredLevel: '10' };
    expect(
      refusal(() =>
        negotiateRequest({ ...body, database: 'a' }, { ...everythingWrong, database: 'b' }),
      ).code,
    ).toBe('INVALID_REQUEST');
    expect(refusal(() => negotiateRequest(body, everythingWrong)).code).toBe('NOT_ACCEPTABLE');
    expect(refusal(() => negotiateRequest(body, { preferredLevel: '10' }))).toMatchObject({
      code: 'INVALID_REQUEST',
      message: 'Preferred-Compression-Level must be an integer from 1 to 9',
    });
  });
});

describe(resultWait.name, () => {
  const request = (more: Partial<ExecuteRequestDto> = {}) => ({ statement: 'select 1', ...more });

  it('takes wait_timeout and on_wait_timeout from the body first', () => {
    expect(resultWait(request({ wait_timeout: 250 }), 'wait=9')).toEqual({
      ms: 250,
      onTimeout: 'continue',
    });
    expect(resultWait(request({ wait_timeout: 0, on_wait_timeout: 'cancel' }), undefined)).toEqual({
      ms: 0,
      onTimeout: 'cancel',
    });
  });

  it('reads Prefer: respond-async and wait=N (seconds), ignoring other preferences', () => {
    expect(resultWait(request(), 'respond-async')).toEqual({ ms: 0, onTimeout: 'continue' });
    expect(resultWait(request(), 'handling=lenient, wait=3;x=1, respond-async')).toEqual({
      ms: 3000,
      onTimeout: 'continue',
    });
    expect(resultWait(request(), 'return=minimal')).toBeUndefined();
    expect(resultWait(request(), 'wait=soon')).toBeUndefined();
    expect(resultWait(request(), undefined)).toBeUndefined();
  });
});
