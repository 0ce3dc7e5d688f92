import { readFileSync } from 'node:fs';
import { join } from 'node:path';

function findVersion(): string {
  // package.json sits at the project root, above src/ or dist/apps/api/src/.
  for (const up of ['../../..', '../../../..']) {
    try {
      const pkg = JSON.parse(readFileSync(join(__dirname, up, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'sluice' && pkg.version) return pkg.version;
    } catch {
      // try the next level
    }
  }
  return '0.0.0';
}

/** Version of this build, from package.json. */
export const VERSION = findVersion();
