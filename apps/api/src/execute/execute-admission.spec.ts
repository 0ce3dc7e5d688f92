import { ExecuteRequestDto } from '@app/contracts';
import { QueryLifecycle } from '@app/execution';
import { loadConfig } from '@app/config';
import {
  InProcessJobQueue,
  InProcessQueryRegistry,
  InProcessResultChannel,
  QueryRecord,
} from '@app/transport';
import { AuthUser } from '../auth/auth-user';
import { ExecutePolicyService } from '../auth/execute-policy.service';
import { WorkerRosterService } from '../health/worker-roster.service';
import { KeptResultService } from '../queries/kept-result.service';
import { AdmissionService } from './admission.service';
import { ExecuteService } from './execute.service';

/**
 * Admission and the query's record: asked for together (one write to Redis, where the registry is
 * Redis), and neither left behind by a query that is refused. Over the in-process adapters, with
 * a registry that tells when each call is made and answered.
 */
const CAP = 2;
const user: AuthUser = { username: 'ann', role: 'r', isAdmin: false, readOnly: false };
const body: ExecuteRequestDto = { statement: 'select 1' };

class WatchedRegistry extends InProcessQueryRegistry {
  readonly events: string[] = [];
  failCreate = false;

  override admit(owner: string, queryId: string, cap: number): Promise<number | undefined> {
    return this.watched('slot', () => super.admit(owner, queryId, cap));
  }

  override create(record: QueryRecord): Promise<void> {
    return this.watched('record', () =>
      this.failCreate ? Promise.reject(new Error('registry down')) : super.create(record),
    );
  }

  private watched<T>(name: string, call: () => Promise<T>): Promise<T> {
    this.events.push(`ask ${name}`);
    return call().finally(() => this.events.push(`answer ${name}`));
  }
}

let registry: WatchedRegistry;
let service: ExecuteService;

beforeEach(() => {
  const config = loadConfig({ SLUICE_MAX_ACTIVE_PER_USER: String(CAP) });
  registry = new WatchedRegistry(60);
  const queue = new InProcessJobQueue(60);
  const channel = new InProcessResultChannel(config.producerSilenceMs);
  const lifecycle = new QueryLifecycle(registry);
  const roster = new WorkerRosterService(config, undefined);
  const policy = { check: () => Promise.resolve() } as unknown as ExecutePolicyService;
  service = new ExecuteService(
    queue,
    channel,
    lifecycle,
    config,
    policy,
    new AdmissionService(queue, registry, config, roster),
    registry,
    new KeptResultService(registry, channel, queue, channel, lifecycle, roster, config),
  );
});

/** The user's slots taken so far: admitting up to the cap tells how many were free. */
async function slotsTaken(): Promise<number> {
  let taken = CAP;
  while (taken > 0 && (await registry.admit(user.username, `probe-${taken}`, CAP)) !== undefined) {
    taken -= 1;
  }
  return taken;
}

describe(`${ExecuteService.name} admission`, () => {
  it('asks for the slot and the record together, and a refused query keeps neither', async () => {
    await registry.admit(user.username, 'held-1', CAP);
    await registry.admit(user.username, 'held-2', CAP);
    registry.events.length = 0;
    const refused = service.execute(body, user, {});
    await expect(refused).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    // Both were asked for before either was answered: one round trip, not two.
    expect(registry.events.slice(0, 2).sort()).toEqual(['ask record', 'ask slot']);
    const listed = await registry.list(100);
    expect(listed.map((record) => record.queryId)).toEqual([]);
  });

  it('gives the slot back when the record cannot be written, and answers 503', async () => {
    registry.failCreate = true;
    await expect(service.execute(body, user, {})).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(registry.events.slice(0, 2).sort()).toEqual(['ask record', 'ask slot']);
    expect(await slotsTaken()).toBe(0);
  });
});
