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

describe('tracing settings', () => {
  const otlp = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' };

  it('is off without an OTLP endpoint, whatever else is set', () => {
    expect(loadConfig({ OTEL_SERVICE_NAME: 'x', SLUICE_TRACE_STATEMENTS: 'true' }).tracing).toBe(
      undefined,
    );
  });

  it('sends to the base endpoint with /v1/traces, or to the traces endpoint as given', () => {
    expect(loadConfig(otlp).tracing).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      serviceName: undefined,
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
      resourceAttributes: {},
      statements: false,
      sqlcommenter: false,
    });
    const traces = 'http://other:4318/custom/traces';
    expect(
      loadConfig({ ...otlp, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: traces }).tracing?.endpoint,
    ).toBe(traces);
  });

  it('decodes OTEL_RESOURCE_ATTRIBUTES', () => {
    const env = { ...otlp, OTEL_RESOURCE_ATTRIBUTES: 'a=1, team=sql%20ops' };
    expect(loadConfig(env).tracing?.resourceAttributes).toEqual({ a: '1', team: 'sql ops' });
  });

  it.each([
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
    ['OTEL_TRACES_SAMPLER', 'sometimes'],
    ['OTEL_TRACES_SAMPLER_ARG', '1.5'],
    ['OTEL_RESOURCE_ATTRIBUTES', 'novalue'],
    ['SLUICE_TRACE_SQLCOMMENTER', 'yes'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'grpc://collector:4317'],
  ])('refuses %s=%s', (variable, value) => {
    expect(refusedVariable({ ...otlp, [variable]: value })).toBe(variable);
  });

  it('refuses a SLUICE_TRACE_URL without {trace_id}', () => {
    expect(refusedVariable({ SLUICE_TRACE_URL: 'https://jaeger.example/trace/' })).toBe(
      'SLUICE_TRACE_URL',
    );
    expect(
      loadConfig({ SLUICE_TRACE_URL: 'https://jaeger.example/trace/{trace_id}' }).traceUrl,
    ).toBe('https://jaeger.example/trace/{trace_id}');
  });
});
