import { connect } from 'node:net';
import type { PoolClient } from 'pg';

/** PostgreSQL's CancelRequest code (protocol 3.0, "Canceling Requests in Progress"). */
const CANCEL_REQUEST_CODE = 80877102;

/**
 * A statement connection's backend: what a stop names. The pid and the secret key PostgreSQL gave
 * only this connection's client (BackendKeyData) — nothing a statement can change, unlike its
 * application_name; the login and the server's address, to reach it.
 */
export interface Backend {
  pid: number;
  secretKey: number;
  user: string;
  host: string;
  port: number;
}

/** The backend of a connected pg client, from what pg keeps of its startup. */
export function backendOf(client: PoolClient): Backend | undefined {
  const { processID, secretKey, user, host, port } = client as unknown as Partial<Backend> & {
    processID?: number;
  };
  if (processID === undefined || secretKey === undefined || !user || !host || !port) {
    return undefined;
  }
  return { pid: processID, secretKey, user, host, port };
}

/**
 * Sends PostgreSQL's own cancel request for `backend`, on a connection of its own, as libpq's
 * PQcancel does: the server checks the secret key and signals that backend only, and needs no
 * login and no privilege for it. Resolves once the server has closed the connection (it answers
 * nothing), or after `timeoutMs`.
 */
export function cancelBackend(backend: Backend, timeoutMs = 5_000): Promise<void> {
  const request = Buffer.alloc(16);
  request.writeInt32BE(16, 0);
  request.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  request.writeInt32BE(backend.pid, 8);
  request.writeInt32BE(backend.secretKey, 12);
  return new Promise((resolve, reject) => {
    const socket = backend.host.startsWith('/')
      ? connect(`${backend.host}/.s.PGSQL.${backend.port}`)
      : connect(backend.port, backend.host);
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error('cancel request timed out')));
    socket.once('connect', () => socket.end(request));
    socket.once('error', reject);
    socket.once('close', (failed) => {
      if (!failed) resolve();
    });
    socket.resume();
  });
}
