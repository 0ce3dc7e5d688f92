import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { LOOPBACK_HOSTS, loadConfig } from '@app/config';

// No Docker engine runs on the project's machines: check the compose file by parsing it.
const root = join(__dirname, '..');

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  deploy?: { replicas?: number };
  healthcheck?: { test: string[] };
  volumes?: string[];
  ports?: string[];
  networks?: Record<string, { ipv4_address?: string }>;
}

interface Compose {
  services: Record<string, Service>;
}

function load(file: string): Compose {
  return parse(readFileSync(join(root, file), 'utf8'), { merge: true }) as Compose;
}

const compose = load('docker-compose.yml');
const clustered = load('docker-compose.redis-cluster.yml');

const WORKERS = ['worker-interactive', 'worker-export'];
const APPS = ['api', ...WORKERS];

describe('docker-compose.yml', () => {
  it('brings up PostgreSQL, Redis, 2 api replicas, 2 interactive and 1 export worker', () => {
    expect(Object.keys(compose.services).sort()).toEqual(
      ['api', 'postgres', 'redis', ...WORKERS].sort(),
    );
    expect(compose.services.api.deploy?.replicas).toBe(2);
    expect(compose.services['worker-interactive'].deploy?.replicas).toBe(2);
    expect(compose.services['worker-export'].deploy?.replicas).toBe(1);
  });

  it('publishes the api on loopback only: its secrets and admin password are known defaults', () => {
    for (const file of [compose, clustered]) {
      const published = Object.values(file.services).flatMap((service) => service.ports ?? []);
      expect(published).toEqual(['127.0.0.1:8080-8081:8080']);
    }
  });

  it('answers only the loopback names it publishes the api on, unless told others', () => {
    for (const file of [compose, clustered]) {
      const value = file.services.api.environment?.SLUICE_ALLOWED_HOSTS ?? '';
      expect(value).toBe('${SLUICE_ALLOWED_HOSTS:-localhost,127.0.0.1,[::1]}');
      const taken = loadConfig({
        REDIS_URL: 'redis://redis:6379',
        SLUICE_ALLOWED_HOSTS: value.replace(/^\$\{[A-Z_]+:-(.*)\}$/, '$1'),
      }).allowedHosts;
      expect(taken).toEqual(LOOPBACK_HOSTS);
    }
  });

  it('gives each worker service one lane to serve', () => {
    const lanes = WORKERS.map((name) => compose.services[name].environment?.SLUICE_WORKER_LANES);
    expect(lanes).toEqual(['interactive', 'export']);
  });

  it('gives PostgreSQL, Redis, the api and the worker health checks, and waits for them', () => {
    for (const name of ['postgres', 'redis', ...APPS]) {
      expect(compose.services[name].healthcheck?.test.length).toBeGreaterThan(1);
    }
    for (const name of APPS) {
      expect(compose.services[name].depends_on).toEqual({
        postgres: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
      });
    }
  });

  it('checks the api and each worker through their readiness endpoints', () => {
    const probe = (name: string) => compose.services[name].healthcheck?.test.join(' ') ?? '';
    expect(probe('api')).toContain('http://127.0.0.1:8080/health/ready');
    for (const worker of WORKERS) {
      const port = compose.services[worker].environment?.SLUICE_WORKER_METRICS_PORT;
      expect(port).toBe('9464');
      expect(probe(worker)).toContain(`http://127.0.0.1:${port}/health/ready`);
    }
    // A probe fails on anything but 2xx, and when nothing answers.
    for (const name of APPS) {
      expect(probe(name)).toMatch(/process\.exit\(r\.ok \? 0 : 1\), \(\) => process\.exit\(1\)/);
    }
  });

  it("starts with its defaults: each app's environment, ${VAR:-default} taken as its default, passes the start-up checks", () => {
    for (const [file, name] of [compose, clustered].flatMap((f) =>
      APPS.map((a) => [f, a] as const),
    )) {
      const env = Object.fromEntries(
        Object.entries(file.services[name].environment ?? {}).map(([key, value]) => [
          key,
          String(value).replace(/^\$\{[A-Z_]+:-(.*)\}$/, '$1'),
        ]),
      );
      expect(() => loadConfig(env)).not.toThrow();
    }
  });

  it('configures both apps for cluster mode with a shared secret and prefix', () => {
    for (const name of APPS) {
      const env = compose.services[name].environment ?? {};
      expect(env.REDIS_URL).toMatch(/^redis:\/\/redis:6379/);
      expect(env.DATABASE_URL).toMatch(/^postgresql:\/\/sluice_control:/);
      expect(env.SLUICE_JWT_SECRET).toBeDefined();
      expect(String(env.SLUICE_CREDENTIAL_KEY).length).toBeGreaterThanOrEqual(32);
      expect(env.SLUICE_ADMIN_ROLE).toBe('sluice_admin');
      expect(env.SLUICE_KEY_PREFIX).toBe('sluice');
    }
  });

  it('starts entry points that the build produces and mounts files that exist', () => {
    const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/npm run build/);
    // npm ci applies patches/ (postinstall): they must be in the image before it runs.
    expect(dockerfile).toMatch(/COPY patches \.\/patches\n(#.*\n)*RUN npm ci/);
    expect(compose.services.api.command).toEqual(['node', 'dist/apps/api/src/main.js']);
    for (const worker of WORKERS) {
      expect(compose.services[worker].command).toEqual(['node', 'dist/apps/worker/src/main.js']);
    }
    expect(existsSync(join(root, 'apps/api/src/main.ts'))).toBe(true);
    expect(existsSync(join(root, 'apps/worker/src/main.ts'))).toBe(true);
    for (const volume of compose.services.postgres.volumes ?? []) {
      const source = volume.split(':')[0];
      if (source.startsWith('./')) expect(existsSync(join(root, source))).toBe(true);
    }
  });
});

describe('docker-compose.redis-cluster.yml', () => {
  const NODES = ['redis-1', 'redis-2', 'redis-3'];
  const address = (name: string) =>
    `${clustered.services[name].networks?.default.ipv4_address}:6379`;

  it('has the same api and workers as docker-compose.yml, on a Redis Cluster of three nodes', () => {
    expect(Object.keys(clustered.services).sort()).toEqual(
      ['api', 'postgres', 'redis-cluster-init', ...NODES, ...WORKERS].sort(),
    );
    for (const name of APPS) {
      const { environment, ...rest } = clustered.services[name];
      const { environment: single, ...singleRest } = compose.services[name];
      expect({ ...rest, depends_on: undefined }).toEqual({ ...singleRest, depends_on: undefined });
      const { REDIS_URL, ...others } = single ?? {};
      expect(REDIS_URL).toBeDefined();
      expect(environment).toEqual({
        ...others,
        SLUICE_REDIS_CLUSTER_NODES: NODES.map(address).join(','),
      });
    }
  });

  it('runs each node in cluster mode at an address of its own', () => {
    const addresses = NODES.map(address);
    expect(new Set(addresses).size).toBe(3);
    for (const name of NODES) {
      const command = clustered.services[name].command?.join(' ') ?? '';
      expect(command).toMatch(/^redis-server .*--cluster-enabled yes/);
      expect(clustered.services[name].healthcheck?.test).toEqual(['CMD', 'redis-cli', 'ping']);
    }
  });

  it('forms the cluster from those nodes once they answer, and starts the apps after it', () => {
    const init = clustered.services['redis-cluster-init'];
    expect(init.command?.join(' ')).toContain(
      `redis-cli --cluster create ${NODES.map(address).join(' ')} --cluster-replicas 0 --cluster-yes`,
    );
    expect(init.depends_on).toEqual(
      Object.fromEntries(NODES.map((n) => [n, { condition: 'service_healthy' }])),
    );
    for (const name of APPS) {
      expect(clustered.services[name].depends_on).toEqual({
        postgres: { condition: 'service_healthy' },
        'redis-cluster-init': { condition: 'service_completed_successfully' },
      });
    }
  });
});

describe('how a worker is started', () => {
  it('shares two malloc arenas among its threads: npm run start:worker and every compose worker', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    // An arena per thread keeps what each thread freed (docs/architecture.md, Garbage collection).
    expect(pkg.scripts['start:worker']).toBe(
      'MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2} node dist/apps/worker/src/main.js',
    );
    for (const file of [compose, clustered]) {
      for (const name of WORKERS) {
        expect(file.services[name].command).toEqual(['node', 'dist/apps/worker/src/main.js']);
        expect(file.services[name].environment?.MALLOC_ARENA_MAX).toBe('2');
      }
    }
  });
});
