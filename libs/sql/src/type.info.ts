// pg_type facts shared by the catalog that loads them and the encoders that read them. This file
// imports nothing, so that those two need not import each other.

/** One attribute of a composite type. */
export interface PgAttribute {
  name: string;
  type: number;
}

/**
 * A user-defined type's cast to json, which to_json() applies: hstore's (reproduced here) or
 * another function's (which only the server can run).
 */
export type PgJsonCast = 'hstore' | 'other';

/** One pg_type row, as much of it as naming and JSON encoding need. */
export interface PgTypeInfo {
  oid: number;
  /** format_type(oid, NULL), e.g. 'integer', 'timestamp with time zone', 'integer[]'. */
  name: string;
  /** pg_type.typtype: b base, c composite, d domain, e enum, p pseudo, r range, m multirange. */
  typtype: string;
  /** pg_type.typcategory. */
  category: string;
  /** Element type of a true array type (array_subscript_handler), 0 otherwise. */
  elem: number;
  /** Base type of a domain, 0 otherwise. */
  baseType: number;
  /** Element delimiter used in the text form of arrays of this type (';' for box). */
  delim: string;
  /** A composite's attributes in order (dropped ones left out); undefined for other types. */
  attributes?: PgAttribute[];
  /** A function cast to json that to_json() would use (user-defined types only). */
  jsonCast?: PgJsonCast;
}
