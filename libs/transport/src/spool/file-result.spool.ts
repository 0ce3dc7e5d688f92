import { randomBytes } from 'node:crypto';
import { access, constants, mkdir, open, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { ResultSpool, SpoolEntry, SpoolMissingError, SpoolUnavailableError } from './result.spool';

/** `<query id>/<name>`: one directory level, no dot-only part (nothing outside the root). */
const KEY = /^[A-Za-z0-9_-][A-Za-z0-9._-]*\/[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException)?.code === 'ENOENT';
}

/**
 * The spool in a directory (`file:///abs/dir`): one directory per query, one file per segment.
 * A segment is written to a temporary name and renamed, so that a reader never sees half of one;
 * a temporary file a crashed writer left is listed like a segment, and swept by age.
 */
export class FileResultSpool implements ResultSpool {
  readonly kind = 'file' as const;

  constructor(private readonly root: string) {}

  async put(key: string, parts: Buffer[]): Promise<void> {
    const path = this.pathOf(key);
    const temporary = `${path}.tmp-${randomBytes(4).toString('hex')}`;
    try {
      // The owner's alone: a kept result is no other local account's to read.
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      const file = await open(temporary, 'w', 0o600);
      try {
        const { bytesWritten } = await file.writev(parts);
        // A disk that fills part way through answers a short write, not an error.
        const size = parts.reduce((sum, part) => sum + part.length, 0);
        if (bytesWritten !== size) {
          throw new Error(`${bytesWritten} of its ${size} bytes written (the disk may be full)`);
        }
      } finally {
        await file.close();
      }
      await rename(temporary, path);
    } catch (err) {
      await rm(temporary, { force: true }).catch(() => undefined); // the write's error is the one to report
      throw new SpoolUnavailableError(`write ${key}`, err);
    }
  }

  async read(key: string, start = 0): Promise<Readable> {
    const path = this.pathOf(key);
    // Opened before it is handed over: a missing segment is an error here, not a stream that fails.
    try {
      const file = await open(path, 'r');
      return file.createReadStream({ start });
    } catch (err) {
      if (isMissing(err)) throw new SpoolMissingError(key);
      throw new SpoolUnavailableError(`read ${key}`, err);
    }
  }

  async remove(keys: string[]): Promise<void> {
    const dirs = new Set<string>();
    for (const key of keys) {
      const path = this.pathOf(key);
      await rm(path, { force: true });
      dirs.add(dirname(path));
    }
    for (const dir of dirs) {
      // Left when another segment is in it still (being written, say): the next sweep takes it.
      await rmdir(dir).catch(() => undefined);
    }
  }

  async *list(prefix = ''): AsyncIterable<SpoolEntry> {
    const slash = prefix.indexOf('/');
    const dirs =
      slash >= 0
        ? [prefix.slice(0, slash)]
        : (await this.names(this.root)).filter((d) => d.startsWith(prefix));
    for (const dir of dirs) {
      for (const name of await this.names(join(this.root, dir))) {
        const key = `${dir}/${name}`;
        if (!key.startsWith(prefix)) continue;
        const info = await stat(join(this.root, key)).catch(() => undefined);
        if (info?.isFile()) yield { key, size: info.size, modifiedAt: info.mtimeMs };
      }
    }
  }

  /** The names in `dir`: none when it is gone or is not a directory (a file put beside them). */
  private async names(dir: string): Promise<string[]> {
    try {
      return await readdir(dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException)?.code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return [];
      throw new SpoolUnavailableError(`list ${dir}`, err);
    }
  }

  presign(): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }

  async check(): Promise<void> {
    try {
      await mkdir(this.root, { recursive: true, mode: 0o700 });
      await access(this.root, constants.W_OK);
    } catch (err) {
      throw new SpoolUnavailableError(`reach ${this.root}`, err);
    }
  }

  close(): void {
    // Nothing held between calls.
  }

  private pathOf(key: string): string {
    if (!KEY.test(key)) throw new Error(`not a segment key: ${JSON.stringify(key)}`);
    return join(this.root, key);
  }
}
