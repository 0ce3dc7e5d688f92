import { TypeCatalog, rowToTypeInfo } from './type.catalog';
import type { PgTypeInfo } from './type.info';

const info = (oid: number, name: string, extra: Partial<PgTypeInfo> = {}): PgTypeInfo => ({
  oid,
  name,
  typtype: 'b',
  category: 'N',
  elem: 0,
  baseType: 0,
  delim: ',',
  ...extra,
});

const INT4 = info(23, 'integer');
const INT4_ARRAY = info(1007, 'integer[]', { category: 'A', elem: 23 });
const DOMAIN = info(90001, 'positive', { typtype: 'd', baseType: 23 });
const DOMAIN_ARRAY = info(90002, 'positive[]', { category: 'A', elem: 90001 });
const BOX = info(603, 'box', { category: 'G', delim: ';' });
const BOX_ARRAY = info(1020, 'box[]', { category: 'A', elem: 603, delim: ';' });
const TEXT = info(25, 'text', { category: 'S' });
const PAIR = info(90010, 'pair', {
  typtype: 'c',
  category: 'C',
  attributes: [
    { name: 'n', type: 90001 },
    { name: 'tags', type: 1007 },
  ],
});
const PAIR_ARRAY = info(90011, 'pair[]', { category: 'A', elem: 90010 });
const HSTORE = info(90020, 'hstore', { category: 'U', jsonCast: 'hstore' });
const HSTORE_ARRAY = info(90021, 'hstore[]', { category: 'A', elem: 90020 });

describe(TypeCatalog.name, () => {
  it('reports unknown oids once each and ignores 0', () => {
    const catalog = new TypeCatalog();
    expect(catalog.missing([23, 0, 23, 1007])).toEqual([23, 1007]);
  });

  it('reports element and base types of loaded types, recursively', () => {
    const catalog = new TypeCatalog();
    expect(catalog.missing([90002])).toEqual([90002]);
    catalog.add([DOMAIN_ARRAY]);
    expect(catalog.missing([90002])).toEqual([90001]);
    catalog.add([DOMAIN]);
    expect(catalog.missing([90002])).toEqual([23]);
    catalog.add([INT4]);
    expect(catalog.missing([90002])).toEqual([]);
  });

  it('marks requested oids that came back without a row as absent, so the load loop ends', () => {
    const catalog = new TypeCatalog();
    const oids = [23, 424242];
    let rounds = 0;
    for (let m = catalog.missing(oids); m.length > 0; m = catalog.missing(oids)) {
      rounds++;
      catalog.add([INT4].filter((row) => m.includes(row.oid)));
    }
    expect(rounds).toBe(1);
    expect(catalog.name(424242)).toBe('???');
    expect(catalog.jsonEncoder(424242)('x')).toBe('"x"');
  });

  it('marks only the explicitly requested oids absent when given', () => {
    const catalog = new TypeCatalog();
    catalog.missing([23, 1007]);
    catalog.add([], [1007]);
    expect(catalog.missing([23, 1007])).toEqual([23]);
  });

  it('loads a type that was absent once a row for it arrives', () => {
    const catalog = new TypeCatalog();
    catalog.add([], [1007]);
    expect(catalog.jsonEncoder(1007)('{1,2}')).toBe('"{1,2}"');
    catalog.add([INT4_ARRAY, INT4]);
    expect(catalog.jsonEncoder(1007)('{1,2}')).toBe('[1,2]');
  });

  it('names types as loaded', () => {
    const catalog = new TypeCatalog();
    catalog.add([INT4, INT4_ARRAY]);
    expect(catalog.name(23)).toBe('integer');
    expect(catalog.name(1007)).toBe('integer[]');
    expect(catalog.name(1)).toBe('???');
  });

  it('caches the encoder per oid once its types are loaded', () => {
    const catalog = new TypeCatalog();
    catalog.add([DOMAIN_ARRAY, DOMAIN, INT4]);
    const encoder = catalog.jsonEncoder(90002);
    expect(catalog.jsonEncoder(90002)).toBe(encoder);
    expect(encoder('{1,NULL}')).toBe('[1,null]');
  });

  it('reports attribute types of composites, recursively', () => {
    const catalog = new TypeCatalog();
    expect(catalog.missing([90011])).toEqual([90011]);
    catalog.add([PAIR_ARRAY]);
    expect(catalog.missing([90011])).toEqual([90010]);
    catalog.add([PAIR]);
    expect(catalog.missing([90011])).toEqual([90001, 1007]);
    catalog.add([DOMAIN, INT4_ARRAY]);
    expect(catalog.missing([90011])).toEqual([23]);
    catalog.add([INT4]);
    expect(catalog.jsonEncoder(90011)('{"(1,\\"{2,3}\\")",NULL,"(,)"}')).toBe(
      '[{"n":1,"tags":[2,3]},null,{"n":null,"tags":null}]',
    );
  });

  it('lists the loaded composites a result refers to, and none for ordinary columns', () => {
    const catalog = new TypeCatalog();
    catalog.add([PAIR_ARRAY, PAIR, DOMAIN, INT4_ARRAY, INT4, TEXT]);
    expect(catalog.loadedComposites([90011, 25])).toEqual([90010]);
    expect(catalog.loadedComposites([23, 25, 1007])).toEqual([]);
  });

  it('rebuilds the encoders of a composite whose attributes changed', () => {
    const catalog = new TypeCatalog();
    catalog.add([PAIR, DOMAIN, INT4_ARRAY, INT4, TEXT]);
    expect(catalog.jsonEncoder(90010)('(1,{})')).toBe('{"n":1,"tags":[]}');
    catalog.add([{ ...PAIR, attributes: [{ name: 'label', type: 25 }] }], [90010]);
    expect(catalog.jsonEncoder(90010)('(1)')).toBe('{"label":"1"}');
  });

  it('tells the columnar formats which columns to carry as JSON', () => {
    const catalog = new TypeCatalog();
    catalog.add([PAIR_ARRAY, PAIR, DOMAIN, INT4_ARRAY, INT4, TEXT, HSTORE, HSTORE_ARRAY]);
    expect(catalog.objectJson(90010)?.list).toBe(false);
    expect(catalog.objectJson(90011)?.list).toBe(true);
    expect(catalog.objectJson(90011)?.element('(1,{})')).toBe('{"n":1,"tags":[]}');
    expect(catalog.objectJson(90021)?.element('"k"=>NULL')).toBe('{"k": null}');
    expect(catalog.objectJson(1007)).toBeUndefined();
    expect(catalog.objectJson(25)).toBeUndefined();
    // An anonymous record is not one: its text is all there is of it.
    expect(catalog.objectJson(2249)).toBeUndefined();
  });

  it('does not cache an encoder built before its element type was loaded', () => {
    const catalog = new TypeCatalog();
    catalog.add([BOX_ARRAY]);
    const early = catalog.jsonEncoder(1020);
    catalog.add([BOX]);
    const encoder = catalog.jsonEncoder(1020);
    expect(encoder).not.toBe(early);
    expect(encoder('{(1,1),(0,0);(2,2),(1,1)}')).toBe('["(1,1),(0,0)","(2,2),(1,1)"]');
  });
});

describe(rowToTypeInfo.name, () => {
  it('maps a row of text values', () => {
    expect(
      rowToTypeInfo({
        oid: '1007',
        name: 'integer[]',
        typtype: 'b',
        category: 'A',
        elem: '23',
        baseType: '0',
        delim: ',',
      }),
    ).toEqual(INT4_ARRAY);
  });

  it('maps a row of parsed values', () => {
    expect(rowToTypeInfo({ ...DOMAIN })).toEqual(DOMAIN);
  });

  it('maps the attributes of a composite, as parsed json or as its text', () => {
    const row = { oid: 90010, name: 'pair', typtype: 'c', category: 'C', elem: 0, baseType: 0 };
    const attributes = [
      ['n', 90001],
      ['tags', 1007],
    ];
    const expected = { ...PAIR, delim: ',' };
    expect(rowToTypeInfo({ ...row, delim: ',', attributes })).toEqual(expected);
    expect(rowToTypeInfo({ ...row, attributes: JSON.stringify(attributes) })).toEqual(expected);
    expect(rowToTypeInfo({ ...row, attributes: [] }).attributes).toEqual([]);
    expect(() => rowToTypeInfo({ ...row, attributes: [['x']] })).toThrow(TypeError);
  });

  it('maps a cast to json', () => {
    expect(rowToTypeInfo({ ...HSTORE }).jsonCast).toBe('hstore');
    expect(rowToTypeInfo({ ...HSTORE, jsonCast: 'other' }).jsonCast).toBe('other');
    expect(rowToTypeInfo({ ...HSTORE, jsonCast: null }).jsonCast).toBeUndefined();
  });

  it('rejects a row without an oid', () => {
    expect(() => rowToTypeInfo({ name: 'x' })).toThrow(TypeError);
  });
});
