import { hashSlot, hashTagOf } from './hash.slot';

describe('hashSlot', () => {
  it('gives the slots CLUSTER KEYSLOT gives', () => {
    // Values from the Redis Cluster specification and redis-cli.
    expect(hashSlot('123456789')).toBe(0x31c3 % 16384);
    expect(hashSlot('foo')).toBe(12182);
    expect(hashSlot('bar')).toBe(5061);
    expect(hashSlot('hello')).toBe(866);
  });

  it('hashes only the first non-empty hash tag', () => {
    expect(hashSlot('sluice:q:{foo}:out')).toBe(hashSlot('foo'));
    expect(hashSlot('a{foo}b{bar}')).toBe(hashSlot('foo'));
    expect(hashTagOf('a{}b{bar}')).toBe('a{}b{bar}');
    expect(hashTagOf('a{b')).toBe('a{b');
  });
});
