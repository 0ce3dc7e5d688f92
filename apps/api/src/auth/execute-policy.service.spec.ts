import { loadConfig } from '@app/config';
import { testDatabaseUrl } from '@test/settings';
import { RoleCatalogService } from '@app/users';
import { AuthUser } from './auth-user';
import { ExecutePolicyService } from './execute-policy.service';

/** What is checked of an execute request before it is queued, against the test database. */
describe(ExecutePolicyService.name, () => {
  const config = loadConfig({ DATABASE_URL: testDatabaseUrl });
  const roles = new RoleCatalogService(config);
  const policy = new ExecutePolicyService(config, roles);
  const userOf = (role: string): AuthUser => ({
    username: 'alice',
    role,
    isAdmin: false,
    readOnly: false,
  });

  afterAll(() => roles.close());

  it('refuses a user mapped to a predefined role before Sluice refused to grant them: the login may still hold it', async () => {
    // pg_execute_server_program ran COPY … TO PROGRAM as the server's OS user; a login role
    // granted it before the provisioner refused it keeps it.
    await expect(
      policy.check(
        { statement: "COPY (SELECT 1) TO PROGRAM 'id'" },
        userOf('pg_execute_server_program'),
      ),
    ).rejects.toMatchObject({ code: 'FORBIDDEN', message: expect.stringMatching(/predefined/) });
  });

  it('lets a user of an ordinary role through to the CONNECT check', async () => {
    const { role } = await roles.controlLogin();
    await expect(policy.check({ statement: 'select 1' }, userOf(role))).resolves.toBeUndefined();
  });
});
