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
    ['SLUICE_SPOOL_URL', 'file://relative/dir', 'file:///var/lib/sluice/spool'],
    ['SLUICE_SPOOL_URL', 'http://bucket/x', 's3://bucket/x'],
    ['SLUICE_SPOOL_MAX_BYTES', '10GB', '10GiB'],
    ['SLUICE_SPOOL_MAX_BYTES', '1.5', '1.5GiB'],
    ['SLUICE_SPOOL_SEGMENT_BYTES', '1KiB', '64KiB'],
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

  it('spools to <dataDir>/spool in standalone mode, and keeps kept results in Redis in cluster mode, without SLUICE_SPOOL_URL', () => {
    expect(loadConfig({ SLUICE_DATA_DIR: '/srv/sluice' }).spool?.url).toBe(
      'file:///srv/sluice/spool',
    );
    expect(loadConfig({ REDIS_URL: 'redis://r.example:6379' }).spool).toBeUndefined();
    expect(
      loadConfig({ REDIS_URL: 'redis://r.example:6379', SLUICE_SPOOL_URL: 's3://b/p' }).spool,
    ).toMatchObject({ url: 's3://b/p', maxBytes: 10 * 1024 ** 3, segmentBytes: 16 * 1024 ** 2 });
    expect(loadConfig({ SLUICE_SPOOL_MAX_BYTES: '1.5GiB' }).spool?.maxBytes).toBe(1.5 * 1024 ** 3);
  });
});
