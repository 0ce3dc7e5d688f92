// snappyjs ships no types; this is the part of its API that libs/formats uses.
declare module 'snappyjs' {
  /** Raw (unframed) Snappy, the block format Parquet's SNAPPY codec uses. */
  export function compress(input: Uint8Array): Uint8Array;
  export function uncompress(input: Uint8Array): Uint8Array;
}
