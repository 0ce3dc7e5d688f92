import { stoppingLine } from './standalone.bootstrap';

describe(stoppingLine.name, () => {
  it.each([
    [0, 'stopping…'],
    [1, 'stopping… (waiting for 1 query)'],
    [3, 'stopping… (waiting for 3 queries)'],
  ])('says what a stop waits for: %i running', (running, line) => {
    expect(stoppingLine(running)).toBe(line);
  });
});
