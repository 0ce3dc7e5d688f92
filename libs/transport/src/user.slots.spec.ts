import { UserSlots } from './user.slots';

describe(UserSlots.name, () => {
  it('gives one user a share of each lane, rounded up, at least one slot', () => {
    expect(new UserSlots({ interactive: 8, export: 4 }, 50).most).toEqual({
      interactive: 4,
      export: 2,
    });
    expect(new UserSlots({ interactive: 5, export: 1 }, 50).most).toEqual({
      interactive: 3,
      export: 1,
    });
    expect(new UserSlots({ interactive: 8, export: 0 }, 1).most).toEqual({
      interactive: 1,
      export: 1,
    });
    expect(new UserSlots({ interactive: 8, export: 4 }, 100).most).toEqual({
      interactive: 8,
      export: 4,
    });
  });

  it('refuses a slot past the share, per user and per lane, until one is given back', () => {
    const slots = new UserSlots({ interactive: 4, export: 4 }, 50);
    expect(slots.take('a', 'interactive')).toBe(true);
    expect(slots.take('a', 'interactive')).toBe(true);
    expect(slots.free('a', 'interactive')).toBe(false);
    expect(slots.take('a', 'interactive')).toBe(false);
    expect(slots.take('b', 'interactive')).toBe(true);
    expect(slots.take('a', 'export')).toBe(true);
    slots.release('a', 'interactive');
    expect(slots.take('a', 'interactive')).toBe(true);
    expect(slots.take('a', 'interactive')).toBe(false);
  });
});
