/** CRC16/XMODEM (polynomial 0x1021), the checksum Redis Cluster maps keys to slots with. */
const TABLE = Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit += 1) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  return crc & 0xffff;
});

/**
 * The part of a key Redis Cluster hashes: what its first `{…}` holds when that is not empty,
 * otherwise the whole key.
 */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/** The Redis Cluster hash slot (0–16383) of a key, as CLUSTER KEYSLOT gives it. */
export function hashSlot(key: string): number {
  let crc = 0;
  for (const byte of Buffer.from(hashTagOf(key))) {
    crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  }
  return crc % 16384;
}
