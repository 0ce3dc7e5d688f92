import { VerifiedTokens } from './verified.tokens';

const claims = (exp?: number) => ({ sub: 'ann', role: 'r', jti: 'j', gen: 'g', exp });

describe(VerifiedTokens.name, () => {
  it('gives the claims of a remembered token until the second its exp names', () => {
    const tokens = new VerifiedTokens();
    tokens.remember('a.b.c', claims(1_000));
    expect(tokens.get('a.b.c', 999_999)).toEqual(claims(1_000));
    expect(tokens.get('a.b.c', 1_000_000)).toBeUndefined();
    // Gone once expired: never given again.
    expect(tokens.get('a.b.c', 0)).toBeUndefined();
  });

  it('matches the whole token only: another signature is not the same token', () => {
    const tokens = new VerifiedTokens();
    tokens.remember('a.b.c', claims(2_000_000_000));
    expect(tokens.get('a.b.d')).toBeUndefined();
    expect(tokens.get('a.b')).toBeUndefined();
  });

  it('does not remember a token without an expiry', () => {
    const tokens = new VerifiedTokens();
    tokens.remember('a.b.c', claims());
    expect(tokens.get('a.b.c')).toBeUndefined();
  });

  it('forgets the oldest tokens past its bound', () => {
    const tokens = new VerifiedTokens();
    for (let i = 0; i <= 10_000; i++) tokens.remember(`t${i}`, claims(2_000_000_000));
    expect(tokens.get('t0')).toBeUndefined();
    expect(tokens.get('t1')).toBeDefined();
    expect(tokens.get('t10000')).toBeDefined();
  });
});
