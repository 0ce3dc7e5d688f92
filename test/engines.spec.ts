import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as semver from 'semver';

const root = join(__dirname, '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');

interface LockEntry {
  version?: string;
  engines?: { node?: string } | string[];
}

const pkg = JSON.parse(read('package.json')) as { engines: { node: string } };
const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, LockEntry> };
/** Every Node version the project says it runs on. */
const supported = pkg.engines.node;

/** A version as .nvmrc or a Docker tag gives it (`20`, `20.19`, `20.19.1`), as a range. */
const line = (version: string) => (/^\d+(\.\d+)?$/.test(version) ? `${version}.x` : version);

describe('Node versions', () => {
  it('declares a range of versions in package.json, the same in the lock', () => {
    expect(semver.validRange(supported)).not.toBeNull();
    expect(lock.packages[''].engines).toEqual(pkg.engines);
  });

  it('installs no package that refuses a Node version the project supports', () => {
    const refusing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (!path.startsWith('node_modules/') || entry.engines === undefined) continue;
      // Old manifests give engines as a list of strings; npm ignores those.
      if (Array.isArray(entry.engines)) continue;
      const wanted = entry.engines.node;
      if (wanted === undefined) continue;
      const name = `${path.replace(/^.*node_modules\//, '')}@${entry.version}`;
      if (semver.validRange(wanted) === null) refusing.push(`${name}: unparsable "${wanted}"`);
      else if (!semver.subset(supported, wanted)) refusing.push(`${name}: "${wanted}"`);
    }
    expect(refusing).toEqual([]);
  });

  it('runs the tests on a supported version', () => {
    expect(semver.satisfies(process.version, supported)).toBe(true);
  });

  it('pins .nvmrc to a supported release line', () => {
    const nvmrc = read('.nvmrc').trim().replace(/^v/, '');
    expect(semver.validRange(line(nvmrc))).not.toBeNull();
    expect(semver.intersects(line(nvmrc), supported)).toBe(true);
  });

  it('builds and runs the Docker image on one supported Node', () => {
    const tags = [...read('Dockerfile').matchAll(/^FROM\s+node:(\S+)/gim)].map((m) => m[1]);
    expect(tags).toHaveLength(2);
    expect(new Set(tags).size).toBe(1);
    const version = /^\d+(\.\d+){0,2}/.exec(tags[0])?.[0] ?? '';
    expect(semver.validRange(line(version))).not.toBeNull();
    expect(semver.intersects(line(version), supported)).toBe(true);
  });
});
