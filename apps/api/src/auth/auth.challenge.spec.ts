import { validateHeaderValue } from 'node:http';
import { challenge } from './auth.challenge';

/** The WWW-Authenticate of a 401, whose description may quote a database user's role name. */
describe(challenge.name, () => {
  it('writes a header Node sends, one parameter, whatever a role name holds', () => {
    // PostgreSQL role names may hold quotes, line breaks and any character: a database user's
    // name comes back in "role … no longer exists".
    for (const role of [
      'bob", error="x',
      'a\r\nSet-Cookie: sluice_admin=x',
      '用户',
      'back\\slash',
    ]) {
      const value = challenge('invalid_token', `role "${role}" no longer exists`)[
        'WWW-Authenticate'
      ];
      expect(() => validateHeaderValue('www-authenticate', value)).not.toThrow();
      // RFC 6750 §3: the description is %x20-21 / %x23-5B / %x5D-7E, in one quoted string.
      const description =
        /^Bearer realm="sluice", error="invalid_token", error_description="([^"]*)"$/.exec(value);
      expect(description?.[1]).toMatch(/^[\x20\x21\x23-\x5b\x5d-\x7e]*$/);
    }
  });

  it('keeps a description that needs nothing done as it is', () => {
    expect(challenge('invalid_token', 'token revoked')['WWW-Authenticate']).toBe(
      'Bearer realm="sluice", error="invalid_token", error_description="token revoked"',
    );
  });
});
