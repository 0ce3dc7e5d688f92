// What the floors of bench/small-queries.mjs share: the leanest HTTP side of `POST /v1/execute`.
import http from 'node:http';

function send(res, status, text) {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * A node:http server that reads the JSON body's `statement` and answers 200 with the JSON text
 * `answer(statement)` resolves to, 400 with `{"error"}` when the body is not such a JSON or the
 * answer fails, 404 for any other route. Keep-alive for a minute, as a load client keeps it.
 */
export function floorServer(answer) {
  const server = http.createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/execute') {
      return send(res, 404, '{"error":"not found"}');
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let statement;
      try {
        statement = JSON.parse(Buffer.concat(chunks).toString('utf8')).statement;
      } catch {
        return send(res, 400, '{"error":"body is not JSON"}');
      }
      if (typeof statement !== 'string' || statement === '') {
        return send(res, 400, '{"error":"statement required"}');
      }
      answer(statement).then(
        (text) => send(res, 200, text),
        (err) => send(res, 400, JSON.stringify({ error: String(err?.message ?? err) })),
      );
    });
  });
  server.keepAliveTimeout = 60_000;
  return server;
}
