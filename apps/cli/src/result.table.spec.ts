import { resultCsv, resultTable } from './result.table';

describe(resultTable.name, () => {
  it('draws one rule under the header, none between rows, and right-aligns numbers', () => {
    const table = resultTable(
      [
        { name: 'name', type: 'text' },
        { name: 'population', type: 'integer' },
        { name: 'area', type: 'numeric(10,2)' },
      ],
      [
        ['Tokyo', 37194000, '2194.07'],
        ['Delhi', 32941000, null],
      ],
    );
    expect(table).toBe(
      [
        '┌───────┬────────────┬─────────┐',
        '│ name  │ population │    area │',
        '├───────┼────────────┼─────────┤',
        '│ Tokyo │   37194000 │ 2194.07 │',
        '│ Delhi │   32941000 │         │',
        '└───────┴────────────┴─────────┘',
        '',
      ].join('\n'),
    );
  });

  it('right-aligns a column without a type when every value in it is a number', () => {
    const table = resultTable(
      [
        { name: 'rows', type: '' },
        { name: 'state', type: '' },
      ],
      [
        [5, 'succeeded'],
        [12345, 'failed'],
      ],
    );
    expect(table).toContain('│     5 │ succeeded │');
    expect(table).toContain('│ 12345 │ failed    │');
  });
});

describe(resultCsv.name, () => {
  it('writes a header and CRLF lines, quoting what needs it and NULL as empty', () => {
    expect(
      resultCsv(
        ['a', 'b'],
        [
          [1, 'x, "y"'],
          [null, 'line\nbreak'],
        ],
      ),
    ).toBe('a,b\r\n1,"x, ""y"""\r\n,"line\nbreak"\r\n');
  });
});
