import { SluiceError } from '@app/contracts';

/** `WWW-Authenticate` of a 401: the schemes Sluice takes, and why a token was refused. */
export function challenge(error?: string, description?: string): Record<string, string> {
  return {
    'WWW-Authenticate': error
      ? `Bearer realm="sluice", error="${error}", error_description="${description ?? error}"`
      : 'Bearer realm="sluice", Basic realm="sluice"',
  };
}

/** The 401 for a token that failed verification: expired, or anything else (invalid). */
export function tokenRejection(failure: unknown): SluiceError {
  if (failure instanceof Error && failure.name === 'TokenExpiredError') {
    return new SluiceError(
      'TOKEN_EXPIRED',
      'token expired',
      undefined,
      challenge('invalid_token', 'token expired'),
    );
  }
  return new SluiceError(
    'TOKEN_INVALID',
    'invalid token',
    undefined,
    challenge('invalid_token', 'invalid token'),
  );
}
