import { laneOf } from './lane';

describe('laneOf', () => {
  it('sends Parquet and Arrow answers to the export lane, every other format to interactive', () => {
    expect(laneOf('parquet')).toBe('export');
    expect(laneOf('arrow')).toBe('export');
    expect(laneOf('json')).toBe('interactive');
    expect(laneOf('ndjson')).toBe('interactive');
    expect(laneOf('csv')).toBe('interactive');
  });

  it('takes the lane the request names, whatever the format', () => {
    expect(laneOf('csv', 'export')).toBe('export');
    expect(laneOf('parquet', 'interactive')).toBe('interactive');
  });
});
