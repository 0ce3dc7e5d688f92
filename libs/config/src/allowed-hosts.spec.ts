import { LOOPBACK_HOSTS, hostMatches, parseHostAndPort } from './allowed-hosts';
import { ConfigError, loadConfig } from './sluice.config';

const CLUSTER = { REDIS_URL: 'redis://127.0.0.1:6379' };

function refusal(env: Record<string, string>): string | undefined {
  try {
    loadConfig(env);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe('SLUICE_ALLOWED_HOSTS');
    return (err as ConfigError).message;
  }
}

describe(parseHostAndPort.name, () => {
  it.each([
    ['localhost', { host: 'localhost' }],
    ['LocalHost:8080', { host: 'localhost', port: 8080 }],
    ['sluice.example.com.', { host: 'sluice.example.com' }],
    ['Sluice.Example.com.:443', { host: 'sluice.example.com', port: 443 }],
    ['127.0.0.1:65535', { host: '127.0.0.1', port: 65535 }],
    ['[::1]', { host: '[::1]' }],
    ['[0:0:0:0:0:0:0:1]:8080', { host: '[::1]', port: 8080 }],
    ['[FE80::A]', { host: '[fe80::a]' }],
    ['sluice_api', { host: 'sluice_api' }],
    ['  spaced.example  ', { host: 'spaced.example' }],
  ])('reads %j', (text, expected) => {
    expect(parseHostAndPort(text)).toEqual(expected);
  });

  it.each([
    '',
    ':8080',
    'localhost:',
    'localhost:0',
    'localhost:65536',
    'localhost:80:80',
    'a..b',
    '.example.com',
    'example..',
    '-a.example',
    '*.example.com',
    'user@example.com',
    'example.com/path',
    'exa mple.com',
    '::1',
    '[::1',
    '[not:v6]',
    '[::1]x',
    'bücher.example',
  ])('refuses %j', (text) => {
    expect(parseHostAndPort(text)).toBeUndefined();
  });
});

describe(hostMatches.name, () => {
  it('takes any port for an entry without one, and only its own port otherwise', () => {
    expect(hostMatches({ host: 'a.example' }, { host: 'a.example', port: 1 })).toBe(true);
    expect(hostMatches({ host: 'a.example' }, { host: 'a.example' })).toBe(true);
    expect(hostMatches({ host: 'a.example', port: 8080 }, { host: 'a.example', port: 8080 })).toBe(
      true,
    );
    expect(hostMatches({ host: 'a.example', port: 8080 }, { host: 'a.example', port: 80 })).toBe(
      false,
    );
    // A browser leaves the scheme's default port out: an entry with a port does not match that.
    expect(hostMatches({ host: 'a.example', port: 443 }, { host: 'a.example' })).toBe(false);
    expect(hostMatches({ host: 'a.example' }, { host: 'b.a.example' })).toBe(false);
  });
});

describe('SLUICE_ALLOWED_HOSTS', () => {
  it('defaults to the loopback names in standalone mode, on any port', () => {
    expect(loadConfig({}).allowedHosts).toEqual(LOOPBACK_HOSTS);
    expect(loadConfig({ HOST: '0.0.0.0' }).allowedHosts).toEqual(LOOPBACK_HOSTS);
    expect(loadConfig({ HOST: '::' }).allowedHosts).toEqual(LOOPBACK_HOSTS);
    expect(loadConfig({ HOST: '127.0.0.1' }).allowedHosts).toEqual(LOOPBACK_HOSTS);
    expect(loadConfig({ HOST: '::1' }).allowedHosts).toEqual(LOOPBACK_HOSTS);
  });

  it('adds the address standalone mode is bound to, which its banner prints', () => {
    expect(loadConfig({ HOST: '192.0.2.7' }).allowedHosts).toEqual([
      ...LOOPBACK_HOSTS,
      { host: '192.0.2.7' },
    ]);
    expect(loadConfig({ HOST: '2001:db8::7' }).allowedHosts).toEqual([
      ...LOOPBACK_HOSTS,
      { host: '[2001:db8::7]' },
    ]);
  });

  it('is unset in cluster mode without the setting: every host, with a warning', () => {
    expect(loadConfig(CLUSTER).allowedHosts).toBe('unset');
  });

  it('takes names, addresses and ports, case folded', () => {
    for (const env of [{}, CLUSTER]) {
      expect(
        loadConfig({
          ...env,
          SLUICE_ALLOWED_HOSTS: 'Sluice.Example.com, 10.0.0.5:8080,[::1]:9000,internal.',
        }).allowedHosts,
      ).toEqual([
        { host: 'sluice.example.com' },
        { host: '10.0.0.5', port: 8080 },
        { host: '[::1]', port: 9000 },
        { host: 'internal' },
      ]);
    }
  });

  it('takes a lone * as every host, without a warning', () => {
    expect(loadConfig({ SLUICE_ALLOWED_HOSTS: '*' }).allowedHosts).toBe('every');
    expect(loadConfig({ ...CLUSTER, SLUICE_ALLOWED_HOSTS: ' * ' }).allowedHosts).toBe('every');
  });

  it.each([
    ['*,localhost', /\* allows every host: list nothing beside it/],
    ['*.example.com', /has no wildcards but a lone \*/],
    ['.example.com', /has no wildcards but a lone \*/],
    ['localhost,,127.0.0.1', /"" is not one/],
    ['http://localhost:8080', /"http:\/\/localhost:8080" is not one/],
    ['localhost:99999', /"localhost:99999" is not one/],
    ['::1', /IPv6 in brackets/],
  ])('refuses %j at start-up, saying why', (value, message) => {
    expect(refusal({ SLUICE_ALLOWED_HOSTS: value })).toMatch(message);
  });
});
