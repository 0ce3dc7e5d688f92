import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ExecuteJobData, LANES, Lane, SluiceError } from '@app/contracts';
import { toEnvelope } from '../http/error.envelope';
import { DASHBOARD_QUEUE } from '../infra/tokens';
import { AdminAuthenticatorService } from './admin-authenticator.service';
import { redactJobData } from './job-data.redaction';
import { redactJobResult } from './job-result.redaction';

/** Where the dashboard is served. */
export const DASHBOARD_PATH = '/admin/queues';

/** Where a browser that is not signed in is sent: the admin page, which signs in. */
const SIGN_IN_PAGE = '/admin';

/**
 * bull-board's page runs its own scripts from /admin/queues/static (and a worker of its own for
 * highlighting) and sets styles inline; nothing else may run or be fetched, nor the page be
 * framed. Its template also links a font from fonts.googleapis.com: blocked, so that opening the
 * dashboard tells no other site that an administrator is looking (it falls back to a local font).
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "worker-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Sent with every answer under /admin/queues, as the admin page sends its own. */
const DASHBOARD_HEADERS = {
  'content-security-policy': DASHBOARD_CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/**
 * A browser opening a page in its window (a link followed, a URL typed): not a script fetching
 * data, nor a frame (the admin page may not be framed anyway).
 */
function isNavigation(request: FastifyRequest): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const mode = request.headers['sec-fetch-mode'];
  if (mode !== undefined) {
    const dest = request.headers['sec-fetch-dest'];
    return mode === 'navigate' && (dest === undefined || dest === 'document');
  }
  return /\btext\/html\b/.test(request.headers.accept ?? '');
}

/** Reasons for the refusals bull-board answers itself, by its translation key. */
const BOARD_REFUSALS: Record<string, string> = {
  'ERRORS.QUEUE_READ_ONLY':
    'the queue dashboard is read-only: no retry, add, clean or change (a statement must never run twice)',
  'ERRORS.QUEUE_NOT_FOUND': 'no such queue',
  'ERRORS.JOB_NOT_FOUND': 'no such job',
};

/**
 * bull-board answers the refusals it handles itself (read-only, no such queue or job) as
 * `{"error":{"key":…}}`: the same refusal in the envelope, its HTTP status kept. Other bodies pass.
 */
function boardRefusal(statusCode: number, payload: unknown): string | undefined {
  if (statusCode < 400 || typeof payload !== 'string' || !payload.startsWith('{"error":')) {
    return undefined;
  }
  let key: unknown;
  try {
    key = (JSON.parse(payload) as { error?: { key?: unknown } }).error?.key;
  } catch {
    return undefined;
  }
  const reason =
    (typeof key === 'string' && BOARD_REFUSALS[key]) || 'refused by the queue dashboard';
  const code = statusCode === 400 ? 'INVALID_REQUEST' : 'NOT_FOUND';
  return JSON.stringify(toEnvelope(new SluiceError(code, reason)).body);
}

function send(reply: FastifyReply, err: unknown): FastifyReply {
  const { httpStatus, headers, body } = toEnvelope(err);
  return reply.code(httpStatus).headers(headers).type('application/json; charset=utf-8').send(body);
}

/**
 * bull-board at /admin/queues, in an encapsulated Fastify plugin whose onRequest hook lets only
 * administrators in (Nest guards do not run for plain Fastify routes): signed in on the admin
 * page (its cookie), or by Bearer token or Basic password from clients other than browsers. A
 * browser that is not signed in is sent to the admin page; nothing here ever asks for Basic.
 * Read-only: a statement must never run twice, so the dashboard cannot retry, add or change jobs.
 * Standalone mode has no BullMQ queue: the same hook guards a 404 envelope that says so.
 */
@Injectable()
export class QueueDashboardService implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly authenticator: AdminAuthenticatorService,
    @Inject(DASHBOARD_QUEUE)
    private readonly queues: Readonly<Record<Lane, Queue<ExecuteJobData>>> | undefined,
  ) {}

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    const queues = this.queues;
    void fastify.register(
      async (scope: FastifyInstance) => {
        scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
          void reply.headers(DASHBOARD_HEADERS);
          try {
            await this.authenticator.admin(request);
          } catch (err) {
            // Not signed in: no password prompt, the admin page's own sign-in instead.
            if (err instanceof SluiceError && err.http === 401 && isNavigation(request)) {
              return reply.redirect(SIGN_IN_PAGE, 303);
            }
            return send(reply, err);
          }
        });
        scope.setErrorHandler((err, _request, reply) => send(reply, err));
        scope.addHook('onSend', async (_request, reply, payload) => {
          const envelope = boardRefusal(reply.statusCode, payload);
          if (envelope === undefined) return payload;
          void reply.type('application/json; charset=utf-8');
          return envelope;
        });
        if (queues) {
          const board = new FastifyAdapter();
          // One board entry per lane, named after it.
          const adapters = LANES.map((lane) => {
            const adapter = new BullMQAdapter(queues[lane], {
              readOnlyMode: true,
              allowRetries: false,
              displayName: `${lane} lane`,
              description: `BullMQ queue "${queues[lane].name}"`,
            });
            adapter.setFormatter('data', (data: Partial<ExecuteJobData>) => redactJobData(data));
            adapter.setFormatter('returnValue', (value: unknown) => redactJobResult(value));
            return adapter;
          });
          createBullBoard({
            queues: adapters,
            serverAdapter: board,
            options: { uiConfig: { boardTitle: 'Sluice queue' } },
          });
          // bull-board answers its own errors with their message: the envelope logs them instead.
          board.setErrorHandler((err) => {
            const { httpStatus, body } = toEnvelope(err);
            return { status: httpStatus >= 500 ? 500 : 400, body: { ...body } };
          });
          board.setBasePath(DASHBOARD_PATH);
          await scope.register(board.registerPlugin());
        } else {
          const standalone = () => {
            throw new SluiceError(
              'NOT_FOUND',
              'no queue dashboard in standalone mode: queries run on an in-process queue, not BullMQ; see /admin for queries',
            );
          };
          scope.all('/', standalone);
          scope.all('/*', standalone);
        }
      },
      { prefix: DASHBOARD_PATH },
    );
  }
}
