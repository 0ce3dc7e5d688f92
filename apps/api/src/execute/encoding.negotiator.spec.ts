import { SluiceError } from '@app/contracts';
import { negotiateEncoding } from './encoding.negotiator';

describe('negotiateEncoding', () => {
  it('does not compress without Accept-Encoding', () => {
    expect(negotiateEncoding({})).toBeUndefined();
    expect(negotiateEncoding({ preferredEncoding: 'br' })).toBeUndefined();
  });

  it('picks the accepted encoding, gzip first on a tie', () => {
    expect(negotiateEncoding({ acceptEncoding: 'br' })).toEqual({ name: 'br', level: 3 });
    expect(negotiateEncoding({ acceptEncoding: 'gzip, deflate, br' })).toEqual({
      name: 'gzip',
      level: 3,
    });
    expect(negotiateEncoding({ acceptEncoding: 'gzip;q=0.5, br' })).toEqual({
      name: 'br',
      level: 3,
    });
  });

  it('lets Preferred-Encoding choose only among the accepted encodings', () => {
    expect(negotiateEncoding({ acceptEncoding: 'gzip, br', preferredEncoding: 'br' })?.name).toBe(
      'br',
    );
    expect(negotiateEncoding({ acceptEncoding: 'gzip', preferredEncoding: 'br' })?.name).toBe(
      'gzip',
    );
  });

  it('does not compress for identity or unknown encodings', () => {
    expect(negotiateEncoding({ acceptEncoding: 'identity' })).toBeUndefined();
    expect(negotiateEncoding({ acceptEncoding: 'zstd, deflate' })).toBeUndefined();
    expect(negotiateEncoding({ acceptEncoding: 'gzip;q=0' })).toBeUndefined();
  });

  it('takes Preferred-Compression-Level 1 to 9', () => {
    expect(negotiateEncoding({ acceptEncoding: 'gzip', preferredLevel: '9' })).toEqual({
      name: 'gzip',
      level: 9,
    });
    expect(negotiateEncoding({ acceptEncoding: 'gzip', preferredLevel: '1' })).toEqual({
      name: 'gzip',
      level: 1,
    });
  });

  it.each(['0', '10', '-1', '3.5', 'fast', ''])(
    'refuses Preferred-Compression-Level %j',
    (level) => {
      expect(() => negotiateEncoding({ acceptEncoding: 'gzip', preferredLevel: level })).toThrow(
        SluiceError,
      );
    },
  );

  it('refuses an unknown Preferred-Encoding', () => {
    expect(() => negotiateEncoding({ acceptEncoding: 'gzip', preferredEncoding: 'zstd' })).toThrow(
      /gzip or br/,
    );
  });
});
