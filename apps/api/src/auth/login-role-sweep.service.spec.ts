import type { Pool } from 'pg';
import type { SluiceConfig } from '@app/config';
import type { MetadataSchema, RoleCatalogService } from '@app/users';
import { LoginRoleSweepService } from './login-role-sweep.service';

/** The service's wiring only; the sweep itself runs over PostgreSQL in LoginRoleSweeper's spec. */
function service(config: Partial<SluiceConfig>) {
  const sweepLoginRoles = jest.fn().mockResolvedValue({ dropped: [], kept: [] });
  const pool = { query: jest.fn().mockResolvedValue({ rows: [{ role: 'r' }] }) };
  const sweeper = new LoginRoleSweepService(
    { authMode: 'service', credentialKey: 'k'.repeat(32), ...config } as SluiceConfig,
    pool as unknown as Pool,
    { sweepLoginRoles } as unknown as RoleCatalogService,
    { ensure: () => Promise.resolve() } as unknown as MetadataSchema,
  );
  return { sweeper, sweepLoginRoles };
}

describe(LoginRoleSweepService.name, () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('sweeps at start-up and every SLUICE_LOGIN_ROLE_SWEEP_SECONDS', async () => {
    const { sweeper, sweepLoginRoles } = service({ loginRoleSweepSeconds: 60 });
    sweeper.onApplicationBootstrap();
    await jest.advanceTimersByTimeAsync(0);
    expect(sweepLoginRoles).toHaveBeenCalledTimes(1);
    expect(sweepLoginRoles).toHaveBeenCalledWith(['r']);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(sweepLoginRoles).toHaveBeenCalledTimes(2);
    await sweeper.onModuleDestroy();
  });

  it('never sweeps with 0 seconds, or for database users', async () => {
    for (const config of [
      { loginRoleSweepSeconds: 0 },
      { loginRoleSweepSeconds: 60, authMode: 'database' as const },
    ]) {
      const { sweeper, sweepLoginRoles } = service(config);
      sweeper.onApplicationBootstrap();
      await jest.advanceTimersByTimeAsync(120_000);
      expect(sweepLoginRoles).not.toHaveBeenCalled();
      await sweeper.onModuleDestroy();
    }
  });
});
