import { ConfigError, loadConfig } from './sluice.config';

/** The variable a bad environment is refused for, or undefined when it is taken. */
function refusedVariable(env: Record<string, string>): string | undefined {
  try {
    loadConfig(env);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).variable;
  }
}

/** The bounds docs/architecture.md's configuration table gives, at and past each edge. */
describe(loadConfig.name, () => {
  it.each([
    ['SLUICE_JWT_SECRET', 'x'.repeat(15), 'x'.repeat(16)],
    ['SLUICE_JWT_PREVIOUS_SECRET', 'x'.repeat(15), 'x'.repeat(16)],
    ['SLUICE_CREDENTIAL_KEY', 'x'.repeat(31), 'x'.repeat(32)],
    ['SLUICE_LOGIN_ROLE_SWEEP_SECONDS', '-1', '0'],
    ['SLUICE_LOGIN_ROLE_SWEEP_SECONDS', '86401', '86400'],
    ['SLUICE_ADMIN_PASSWORD', 'x'.repeat(7), 'x'.repeat(8)],
    ['SLUICE_ADMIN_SESSION_SECONDS', '59', '60'],
    ['SLUICE_ADMIN_SESSION_SECONDS', '43201', '43200'],
    ['SLUICE_EXPORT_WORKER_NICE', '20', '19'],
    ['SLUICE_EXPORT_WORKER_NICE', '-1', '0'],
    ['SLUICE_AUTH', 'ldap', 'database'],
    ['SLUICE_ALLOW_PRIVILEGED_DATABASE_USERS', 'yes', 'false'],
    ['SLUICE_WORKER_LANES', 'interactive,bulk', 'export'],
    ['LOG_LEVEL', 'verbose', 'silent'],
  ])('refuses %s=%j at start-up, naming it, and takes %j', (variable, bad, good) => {
    expect(refusedVariable({ [variable]: bad })).toBe(variable);
    expect(refusedVariable({ [variable]: good })).toBeUndefined();
  });

  it('refuses a SLUICE_JWT_PREVIOUS_SECRET equal to SLUICE_JWT_SECRET', () => {
    const secret = 's'.repeat(32);
    expect(refusedVariable({ SLUICE_JWT_SECRET: secret, SLUICE_JWT_PREVIOUS_SECRET: secret })).toBe(
      'SLUICE_JWT_PREVIOUS_SECRET',
    );
  });
});
