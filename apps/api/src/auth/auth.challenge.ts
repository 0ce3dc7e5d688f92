import { SluiceError } from '@app/contracts';

/**
 * An `error_description` as RFC 6750 §3 allows it (%x20-21 / %x23-5B / %x5D-7E): a reason may
 * quote a database user's role name, which can hold quotes, line breaks or any character; Node
 * refuses to send some of those in a header, and a quote would end the parameter early.
 */
function headerText(text: string): string {
  return text.replace(/"/g, "'").replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, '?');
}

/** `WWW-Authenticate` of a 401: the schemes Sluice takes, and why a token was refused. */
export function challenge(error?: string, description?: string): Record<string, string> {
  return {
    'WWW-Authenticate': error
      ? `Bearer realm="sluice", error="${error}", error_description="${headerText(description ?? error)}"`
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
