import { ConfigError, loadConfig } from './sluice.config';

/** What an api holds of request bodies: one at most, and all of those arriving together. */
describe('SLUICE_MAX_RECEIVING_BYTES', () => {
  it('is 64 MiB, or SLUICE_MAX_BODY_BYTES when that is larger', () => {
    expect(loadConfig({}).maxReceivingBytes).toBe(64 * 1024 * 1024);
    expect(loadConfig({ SLUICE_MAX_BODY_BYTES: String(100 * 1024 * 1024) }).maxReceivingBytes).toBe(
      100 * 1024 * 1024,
    );
  });

  it('may not be less than SLUICE_MAX_BODY_BYTES: a largest body could never arrive', () => {
    const env = { SLUICE_MAX_BODY_BYTES: '4096' };
    expect(() => loadConfig({ ...env, SLUICE_MAX_RECEIVING_BYTES: '4095' })).toThrow(
      new ConfigError(
        'SLUICE_MAX_RECEIVING_BYTES',
        'must be at least SLUICE_MAX_BODY_BYTES (4096), got 4095',
      ),
    );
    expect(loadConfig({ ...env, SLUICE_MAX_RECEIVING_BYTES: '4096' }).maxReceivingBytes).toBe(4096);
  });
});
