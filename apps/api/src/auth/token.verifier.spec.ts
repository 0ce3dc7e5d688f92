import { JwtService } from '@nestjs/jwt';
import type { SluiceConfig } from '@app/config';
import { jwtKey } from './jwt.key';
import { TokenVerifier } from './token.verifier';

const CURRENT = 'the-current-secret-0123456789';
const PREVIOUS = 'the-previous-secret-0123456789';
const OTHER = 'some-other-secret-0123456789';

/** A verifier as AuthModule wires it: JwtService keyed with the current secret. */
function verifier(previous?: string): TokenVerifier {
  const jwt = new JwtService({ secret: jwtKey(CURRENT) as unknown as string });
  return new TokenVerifier(jwt, { jwtPreviousSecret: previous } as SluiceConfig);
}

function sign(secret: string, claims: Record<string, unknown> = {}, expiresIn = 60): string {
  const jwt = new JwtService({ secret: jwtKey(secret) as unknown as string });
  return jwt.sign({ sub: 'ann', jti: 'j', ...claims }, { algorithm: 'HS256', expiresIn });
}

/** The catalogue code a token is refused with, or 'ok'. */
async function outcome(tokens: TokenVerifier, token: string, audience?: string): Promise<string> {
  return tokens.verify(token, audience).then(
    () => 'ok',
    (err: { code?: string }) => err.code ?? 'thrown',
  );
}

describe(TokenVerifier.name, () => {
  it('takes a token of the current secret, and of the previous one while it is set', async () => {
    const rotating = verifier(PREVIOUS);
    expect(await outcome(rotating, sign(CURRENT))).toBe('ok');
    expect(await outcome(rotating, sign(PREVIOUS))).toBe('ok');
    expect(await outcome(rotating, sign(OTHER))).toBe('TOKEN_INVALID');
    expect(await outcome(verifier(), sign(PREVIOUS))).toBe('TOKEN_INVALID');
  });

  it("gives the previous secret's token its claims", async () => {
    const claims = await verifier(PREVIOUS).verify(sign(PREVIOUS, { role: 'r' }));
    expect(claims).toMatchObject({ sub: 'ann', jti: 'j', role: 'r' });
  });

  it('refuses what fails anything but the signature, whichever secret signed it', async () => {
    const rotating = verifier(PREVIOUS);
    for (const secret of [CURRENT, PREVIOUS]) {
      expect(await outcome(rotating, sign(secret, {}, -10))).toBe('TOKEN_EXPIRED');
      expect(await outcome(rotating, sign(secret, { aud: 'x' }), 'sluice-admin')).toBe(
        'TOKEN_INVALID',
      );
      expect(await outcome(rotating, sign(secret, { aud: 'sluice-admin' }), 'sluice-admin')).toBe(
        'ok',
      );
    }
  });

  it('refuses another algorithm even when signed with the previous secret', async () => {
    const jwt = new JwtService({ secret: PREVIOUS });
    const hs512 = jwt.sign({ sub: 'ann', jti: 'j' }, { algorithm: 'HS512', expiresIn: 60 });
    expect(await outcome(verifier(PREVIOUS), hs512)).toBe('TOKEN_INVALID');
  });
});
