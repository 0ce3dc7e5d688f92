// A relay with nothing of Sluice's in it: a node:http server that answers every request with the
// objects at the URLs it was given, one after the other, each piped into the one response, with
// their total as Content-Length. The floor of a hop such as the api's GET …/result of a spooled
// result (bench/spool.mjs) and the relay way of bench/spool-floor.mjs. A process of its own:
//
//   node bench/lib/relay-server.mjs '<JSON array of URLs>' <total bytes>   (prints {"port":n})
import http from 'node:http';

const [urls, total] = [JSON.parse(process.argv[2]), process.argv[3]];
const agent = new http.Agent({ keepAlive: true });
http
  .createServer(async (req, res) => {
    res.writeHead(200, { 'content-length': total });
    for (const url of urls) {
      await new Promise((resolve, reject) =>
        http.get(url, { agent }, (up) => {
          up.pipe(res, { end: false });
          up.on('end', resolve).on('error', reject);
        }),
      );
    }
    res.end();
  })
  .listen(0, '127.0.0.1', function () {
    process.stdout.write(JSON.stringify({ port: this.address().port }) + '\n');
  });
