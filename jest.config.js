/** Two projects: pure unit specs beside the code, and black-box e2e specs over real processes. */
const transform = {
  '^.+\\.ts$': [
    '@swc/jest',
    {
      jsc: {
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true },
        target: 'es2022',
      },
    },
  ],
};
const moduleNameMapper = {
  '^@app/(.*)$': '<rootDir>/libs/$1/src',
  // The packages by their published names (apps/cli is built over @sluice/client).
  '^@sluice/client$': '<rootDir>/libs/client/src',
  '^@sluice/cli$': '<rootDir>/apps/cli/src',
  // Where the tests find PostgreSQL and Redis, for unit specs beside the code as well.
  '^@test/settings$': '<rootDir>/test/settings',
  // Helpers of the tests themselves, for specs beside the code (which may not climb out with ../).
  '^@test/support/(.*)$': '<rootDir>/test/support/$1',
};

module.exports = {
  // Shards of an e2e pass (jest --shard) by how long their files take, not by a hash of the path.
  testSequencer: '<rootDir>/test/e2e/sequencer.js',
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      testMatch: ['<rootDir>/apps/**/*.spec.ts', '<rootDir>/libs/**/*.spec.ts', '<rootDir>/test/*.spec.ts'],
      transform,
      moduleNameMapper,
    },
    {
      displayName: 'e2e',
      testEnvironment: 'node',
      testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'],
      transform,
      moduleNameMapper,
      globalSetup: '<rootDir>/test/e2e/global-setup.ts',
      globalTeardown: '<rootDir>/test/e2e/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/test/e2e/support/timeout.ts'],
    },
  ],
};
