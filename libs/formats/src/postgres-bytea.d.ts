// postgres-bytea ships no types; this is the part of its API that libs/formats uses.
declare module 'postgres-bytea' {
  /** bytea text in hex (`\x…`) or escape format → its bytes. */
  function decode(text: string): Buffer;
  export = decode;
}
