import { readableLogLine } from './readable-log.formatter';

const at = '2026-12-03T09:43:42.784Z';
const clock = new Date(at).toTimeString().slice(0, 8);
const line = (fields: Record<string, unknown>) =>
  JSON.stringify({ time: at, pid: 1, hostname: 'h', name: 'sluice-api', ...fields });

describe(readableLogLine.name, () => {
  it('writes the time, the level, the context and the message', () => {
    expect(
      readableLogLine(
        line({
          level: 30,
          context: 'QueryPoolService',
          msg: 'interactive pool of 2 threads ready',
        }),
      ),
    ).toBe(`${clock} INFO  [QueryPoolService] interactive pool of 2 threads ready`);
  });

  it("drops Nest's start-up chatter at info, and keeps its warnings", () => {
    for (const context of ['RoutesResolver', 'RouterExplorer', 'InstanceLoader', 'NestFactory']) {
      expect(readableLogLine(line({ level: 30, context, msg: 'Mapped {/v1, GET}' }))).toBe(
        undefined,
      );
    }
    expect(readableLogLine(line({ level: 40, context: 'NestFactory', msg: 'careful' }))).toBe(
      `${clock} WARN  [NestFactory] careful`,
    );
  });

  it('shows a request as method, path, status and time, without its headers', () => {
    expect(
      readableLogLine(
        line({
          level: 30,
          req: { id: 1, method: 'POST', url: '/v1/login', headers: { accept: '*/*' } },
          res: { statusCode: 401 },
          responseTime: 5,
          msg: 'request completed',
        }),
      ),
    ).toBe(`${clock} INFO  POST /v1/login → 401 (5 ms)`);
  });

  it('adds the other fields as key=value, and an error with its stack', () => {
    expect(
      readableLogLine(
        line({
          level: 50,
          context: 'Errors',
          msg: 'query failed',
          query_id: 'q1',
          reason: 'two words',
          err: { message: 'boom', stack: 'Error: boom\n    at x' },
        }),
      ),
    ).toBe(
      `${clock} ERROR [Errors] query failed  query_id=q1 reason="two words"\nError: boom\n    at x`,
    );
  });

  it('keeps a line that is not JSON as it is', () => {
    expect(readableLogLine('plain text\n')).toBe('plain text');
  });
});
