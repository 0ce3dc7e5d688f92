import {
  isObjectJson,
  jsonValueEncoder,
  jsonValueForm,
  type JsonValueEncoder,
  type JsonValueForm,
} from './json-value.encoder';
import type { PgAttribute, PgTypeInfo } from './type.info';

/**
 * SQL that loads PgTypeInfo rows for $1::oid[]; columns named so that rowToTypeInfo can map them.
 * Every name is schema-qualified so a user's search_path cannot shadow it; format_type() still
 * qualifies types that are not visible on the current search_path. A cast to json counts as
 * to_json() counts it: a function cast from a type with an oid past the built-in ones
 * (FirstNormalObjectId, 16384). hstore's is known by its C function, which only a superuser
 * can have created.
 */
export const TYPE_INFO_SQL = `SELECT t.oid::pg_catalog.int8 AS "oid",
  pg_catalog.format_type(t.oid, NULL) AS "name",
  t.typtype::pg_catalog.text AS "typtype",
  t.typcategory::pg_catalog.text AS "category",
  CASE WHEN t.typsubscript OPERATOR(pg_catalog.=) 'pg_catalog.array_subscript_handler'::pg_catalog.regproc
    THEN t.typelem ELSE 0 END::pg_catalog.int8 AS "elem",
  t.typbasetype::pg_catalog.int8 AS "baseType",
  t.typdelim::pg_catalog.text AS "delim",
  CASE WHEN t.typtype OPERATOR(pg_catalog.=) 'c' THEN COALESCE(
    (SELECT pg_catalog.json_agg(pg_catalog.json_build_array(a.attname, a.atttypid::pg_catalog.int8)
        ORDER BY a.attnum)
       FROM pg_catalog.pg_attribute a
      WHERE a.attrelid OPERATOR(pg_catalog.=) t.typrelid
        AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped),
    '[]'::pg_catalog.json) END AS "attributes",
  (SELECT CASE WHEN l.lanname OPERATOR(pg_catalog.=) 'c'
        AND p.prosrc OPERATOR(pg_catalog.=) 'hstore_to_json'
        AND p.probin OPERATOR(pg_catalog.~) '(^|/)hstore$' THEN 'hstore' ELSE 'other' END
     FROM pg_catalog.pg_cast c
     JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) c.castfunc
     JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang
    WHERE c.castsource OPERATOR(pg_catalog.=) t.oid
      AND c.casttarget OPERATOR(pg_catalog.=) 'pg_catalog.json'::pg_catalog.regtype
      AND c.castmethod OPERATOR(pg_catalog.=) 'f'
      AND t.oid OPERATOR(pg_catalog.>=) 16384) AS "jsonCast"
FROM pg_catalog.pg_type t
WHERE t.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])`;

/** Maps one row of TYPE_INFO_SQL (text or parsed values) to a PgTypeInfo. */
export function rowToTypeInfo(row: Record<string, unknown>): PgTypeInfo {
  const oid = Number(row.oid);
  if (!Number.isInteger(oid) || oid <= 0) {
    throw new TypeError(`type info row has no valid oid: ${String(row.oid)}`);
  }
  const info: PgTypeInfo = {
    oid,
    name: String(row.name),
    typtype: String(row.typtype),
    category: String(row.category),
    elem: Number(row.elem ?? 0) || 0,
    baseType: Number(row.baseType ?? 0) || 0,
    delim: typeof row.delim === 'string' ? row.delim : ',',
  };
  const attributes = attributesOf(row.attributes);
  if (attributes !== undefined) info.attributes = attributes;
  if (row.jsonCast === 'hstore' || row.jsonCast === 'other') info.jsonCast = row.jsonCast;
  return info;
}

/** `[[name, type oid], …]` (json, parsed or as text) → attributes; undefined when absent. */
function attributesOf(value: unknown): PgAttribute[] | undefined {
  if (value === null || value === undefined) return undefined;
  const list: unknown = typeof value === 'string' ? JSON.parse(value) : value;
  if (!Array.isArray(list)) throw new TypeError('type info row has malformed attributes');
  return list.map((entry: unknown) => {
    if (!Array.isArray(entry) || typeof entry[0] !== 'string' || !(Number(entry[1]) > 0)) {
      throw new TypeError('type info row has a malformed attribute');
    }
    return { name: entry[0], type: Number(entry[1]) };
  });
}

/**
 * Per-database cache of type info; pure. The caller loops:
 * `while ((m = catalog.missing(oids)).length) catalog.add(rowsOf(TYPE_INFO_SQL, [m]), m)`.
 * Oids that were asked for but came back without a row are remembered as absent (so the loop
 * ends) and encode as JSON strings.
 */
export class TypeCatalog {
  private readonly infos = new Map<number, PgTypeInfo>();
  private readonly absent = new Set<number>();
  private readonly encoders = new Map<number, JsonValueEncoder>();
  private asked = new Set<number>();
  private readonly lookup = (oid: number): PgTypeInfo | undefined => this.infos.get(oid);

  /** Oids (and, recursively, element, base and attribute types of known ones) not yet loaded. */
  missing(oids: readonly number[]): number[] {
    const out = this.unresolved(oids);
    for (const oid of out) this.asked.add(oid);
    return out;
  }

  /**
   * Adds loaded rows. `requested` (default: every oid missing() returned since the last add)
   * lists the oids the rows were loaded for; those without a row are marked absent. Pass it
   * when several loads may interleave on one catalog.
   */
  add(infos: readonly PgTypeInfo[], requested: Iterable<number> = this.asked): void {
    let changed = false;
    for (const info of infos) {
      const known = this.infos.get(info.oid);
      if (known === undefined || !sameInfo(known, info)) {
        this.infos.set(info.oid, info);
        changed = true;
      }
      this.absent.delete(info.oid);
    }
    for (const oid of requested) {
      if (!this.infos.has(oid)) this.absent.add(oid);
    }
    if (requested === this.asked) this.asked = new Set();
    else for (const oid of requested) this.asked.delete(oid);
    // Encoders are built from the whole chain of types; rebuild them after any change.
    if (changed) this.encoders.clear();
  }

  /** format_type name, e.g. 'integer', 'timestamp with time zone', 'integer[]'; '???' if unknown. */
  name(oid: number): string {
    return this.infos.get(oid)?.name ?? '???';
  }

  /**
   * For the columnar formats: when to_json() makes an object of this type's values (composites,
   * hstore) or of its elements, the to_json() encoder of one value (element) and whether the type
   * is an array; undefined for every other type.
   */
  objectJson(oid: number): { list: boolean; element: JsonValueEncoder } | undefined {
    if (isObjectJson(oid, this.lookup)) return { list: false, element: this.jsonEncoder(oid) };
    const elem = this.infos.get(oid)?.elem ?? 0;
    if (elem !== 0 && isObjectJson(elem, this.lookup)) {
      return { list: true, element: this.jsonEncoder(elem) };
    }
    return undefined;
  }

  /**
   * The composite types among `oids` and what they refer to that are loaded already: their
   * attributes may have changed since (ALTER TABLE, ALTER TYPE) under the same oid.
   */
  loadedComposites(oids: readonly number[]): number[] {
    const out: number[] = [];
    this.walk(oids, (info) => {
      if (info.typtype === 'c') out.push(info.oid);
    });
    return out;
  }

  /** The to_json() encoder for values of type `oid`; cached once its types are all loaded. */
  jsonEncoder(oid: number): JsonValueEncoder {
    const cached = this.encoders.get(oid);
    if (cached !== undefined) return cached;
    const encoder = jsonValueEncoder(oid, this.lookup);
    if (this.unresolved([oid]).length === 0) this.encoders.set(oid, encoder);
    return encoder;
  }

  /** How jsonEncoder(oid)'s JSON is made from a value's bytes (JsonValueForm). */
  jsonForm(oid: number): JsonValueForm {
    return jsonValueForm(oid, this.lookup);
  }

  private unresolved(oids: readonly number[]): number[] {
    const out: number[] = [];
    this.walk(oids, undefined, (oid) => {
      if (!this.absent.has(oid)) out.push(oid);
    });
    return out;
  }

  /** Visits the loaded types reachable from `oids` (elements, base types, attributes). */
  private walk(
    oids: readonly number[],
    loaded?: (info: PgTypeInfo) => void,
    unknown?: (oid: number) => void,
  ): void {
    const seen = new Set<number>();
    const visit = (oid: number): void => {
      if (!(oid > 0) || seen.has(oid)) return;
      seen.add(oid);
      const info = this.infos.get(oid);
      if (info === undefined) {
        unknown?.(oid);
        return;
      }
      loaded?.(info);
      visit(info.elem);
      visit(info.baseType);
      if (info.attributes !== undefined) for (const a of info.attributes) visit(a.type);
    };
    for (const oid of oids) visit(oid);
  }
}

function sameInfo(a: PgTypeInfo, b: PgTypeInfo): boolean {
  return (
    a.name === b.name &&
    a.typtype === b.typtype &&
    a.category === b.category &&
    a.elem === b.elem &&
    a.baseType === b.baseType &&
    a.delim === b.delim &&
    a.jsonCast === b.jsonCast &&
    JSON.stringify(a.attributes) === JSON.stringify(b.attributes)
  );
}
