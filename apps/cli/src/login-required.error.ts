/** A client command run with no token stored and no credentials in the environment. */
export class LoginRequiredError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LoginRequiredError';
  }
}
