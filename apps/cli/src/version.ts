import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The packages whose version `sluice --version` prints: this one's, or the server's it is built in. */
const PACKAGES = ['@sluice/cli', 'sluice'];

function findVersion(): string {
  // package.json sits above: the package's (dist/), this app's (src/), or the server's (its dist/).
  for (let dir = __dirname, up = 0; up < 5; dir = dirname(dir), up++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name && PACKAGES.includes(pkg.name) && pkg.version) return pkg.version;
    } catch {
      // try the next level
    }
  }
  return '0.0.0';
}

/** Version of this build, from package.json. */
export const VERSION = findVersion();
