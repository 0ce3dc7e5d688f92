import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What `sluice login` keeps: never the password. */
export interface StoredLogin {
  url: string;
  username: string;
  token: string;
}

/** The token file under the user's config directory, readable by its owner only (0600). */
export class CredentialsStore {
  readonly path: string;

  constructor(private readonly dir: string) {
    this.path = join(dir, 'credentials.json');
  }

  load(): StoredLogin | undefined {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch {
      // No file: not logged in yet.
      return undefined;
    }
    const parsed = JSON.parse(text) as Partial<StoredLogin>;
    if (!parsed.url || !parsed.username || !parsed.token) return undefined;
    return { url: parsed.url, username: parsed.username, token: parsed.token };
  }

  /** Written to a 0600 file beside it and renamed, so a reader never sees half a token. */
  save(login: StoredLogin): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const temp = `${this.path}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(login, null, 2)}\n`, { mode: 0o600 });
    // mode above applies only to a new file; chmod covers a leftover temp file.
    chmodSync(temp, 0o600);
    renameSync(temp, this.path);
  }
}
