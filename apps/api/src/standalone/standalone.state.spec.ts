import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadStandaloneState } from './standalone.state';

describe(loadStandaloneState.name, () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-state-'));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('creates the state file on first start and reads the same secrets after', () => {
    const data = join(dir, 'data');
    const first = loadStandaloneState(data);
    expect(first.superuserPassword.length).toBeGreaterThan(20);
    expect(loadStandaloneState(data)).toEqual(first);
  });

  it('refuses a state file it cannot parse and leaves it as it was', () => {
    const file = join(dir, 'standalone.json');
    writeFileSync(file, '{"superuserPassword": "kept", ');
    expect(() => loadStandaloneState(dir)).toThrow(/cannot read .*standalone\.json/);
    expect(readFileSync(file, 'utf8')).toBe('{"superuserPassword": "kept", ');
  });
});
