/** `WWW-Authenticate` of a 401: the schemes Sluice takes, and why a token was refused. */
export function challenge(error?: string, description?: string): Record<string, string> {
  return {
    'WWW-Authenticate': error
      ? `Bearer realm="sluice", error="${error}", error_description="${description ?? error}"`
      : 'Bearer realm="sluice", Basic realm="sluice"',
  };
}
