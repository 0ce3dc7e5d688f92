import {
  ERROR_CATALOGUE,
  SluiceError,
  httpStatusOf,
  pgErrorKind,
  pgErrorStatus,
} from './error.catalogue';

describe('pgErrorKind', () => {
  it.each([
    ['42601', 'SYNTAX_ERROR'],
    ['42P01', 'UNDEFINED_TABLE'],
    ['42703', 'UNDEFINED_COLUMN'],
    ['3D000', 'UNKNOWN_DATABASE'],
    ['42501', 'PRIVILEGE'],
    ['25006', 'READ_ONLY'],
    ['57014', 'CANCELLED'],
    ['57P01', 'DB_UNAVAILABLE'],
    ['08006', 'DB_UNAVAILABLE'],
    ['08P01', 'DB_ERROR'],
    ['22012', 'DATA_ERROR'],
    ['23505', 'CONSTRAINT'],
    ['40P01', 'CONFLICT'],
    ['42883', 'STATEMENT_ERROR'],
    ['XX000', 'INTERNAL'],
    ['P0001', 'DB_ERROR'],
    [undefined, 'INTERNAL'],
    ['bad', 'INTERNAL'],
  ])('maps SQLSTATE %s to %s', (state, kind) => {
    expect(pgErrorKind(state)).toBe(kind);
  });
});

describe('pgErrorStatus', () => {
  it('keeps PostgreSQL message and SQLSTATE and adds the Ocient vendor code', () => {
    expect(pgErrorStatus('relation "x" does not exist', '42P01')).toEqual({
      reason: 'relation "x" does not exist',
      sql_state: '42P01',
      vendor_code: -600,
    });
  });

  it('says "one statement per request" for the error PostgreSQL gives two statements in one Parse', () => {
    expect(
      pgErrorStatus('cannot insert multiple commands into a prepared statement', '42601'),
    ).toEqual({
      reason:
        'one statement per request: this one holds more than one (PostgreSQL: cannot insert multiple commands into a prepared statement)',
      sql_state: '42601',
      vendor_code: -501,
    });
    // Any other syntax error keeps its own message and code.
    expect(pgErrorStatus('syntax error at or near "selec"', '42601').vendor_code).toBe(-500);
  });

  it('uses the catalogue SQLSTATE when the error has none', () => {
    expect(pgErrorStatus('boom', undefined)).toEqual({
      reason: 'boom',
      sql_state: 'XX000',
      vendor_code: -103,
    });
  });
});

describe('httpStatusOf', () => {
  it.each([
    [-500, 400],
    [-600, 400],
    [-400, 400],
    [-205, 400],
    [-700, 403],
    [-1122, 504],
    [-103, 500],
    [-206, 503],
    [0, 200],
    [-99999, 500],
  ])('answers vendor code %d with HTTP %d', (vendor, http) => {
    expect(httpStatusOf({ reason: '', sql_state: '', vendor_code: vendor })).toBe(http);
  });
});

describe(SluiceError.name, () => {
  it('renders its catalogue entry as a status', () => {
    const err = new SluiceError('TOKEN_EXPIRED');
    expect(err.http).toBe(401);
    expect(err.toStatus()).toEqual({
      reason: 'token expired',
      sql_state: '28000',
      vendor_code: -302,
    });
  });

  it('has distinct vendor codes except where two names share a meaning', () => {
    const codes = Object.entries(ERROR_CATALOGUE).map(([, e]) => e.vendorCode);
    const shared = codes.filter((c, i) => codes.indexOf(c) !== i);
    expect(shared).toEqual([-700]);
  });
});
