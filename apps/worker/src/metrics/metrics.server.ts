import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
} from '@nestjs/common';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { SLUICE_CONFIG, SluiceConfig } from '@app/config';
import { ERROR_CATALOGUE, ErrorCode, ErrorEnvelope, okStatus } from '@app/contracts';
import { WorkerReadinessService } from '../health/worker-readiness.service';
import { WorkerMetricsService } from './worker-metrics.service';

function envelope(code: ErrorCode, reason: string): ErrorEnvelope {
  const entry = ERROR_CATALOGUE[code];
  return { status: { reason, sql_state: entry.sqlState, vendor_code: entry.vendorCode } };
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
  });
  res.end(JSON.stringify(body));
}

/**
 * The worker's only HTTP: GET /metrics, /health/ready and /health/live on
 * SLUICE_WORKER_METRICS_PORT (0: none). A port already taken is logged, not fatal: the worker
 * still takes jobs, and its heartbeat still tells the apis it is alive.
 */
@Injectable()
export class MetricsServer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(MetricsServer.name);
  private server: Server | undefined;

  constructor(
    @Inject(SLUICE_CONFIG) private readonly config: SluiceConfig,
    private readonly metrics: WorkerMetricsService,
    private readonly readiness: WorkerReadinessService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.workerMetricsPort === 0) return;
    const server = createServer((req, res) => void this.handle(req, res));
    const listening = await new Promise<boolean>((resolve) => {
      server.once('error', (err: NodeJS.ErrnoException) => {
        this.logger.error(
          `metrics port ${this.config.workerMetricsPort} unavailable (${err.code ?? err.message}): no /metrics or /health/ready on this worker`,
        );
        resolve(false);
      });
      server.listen(this.config.workerMetricsPort, this.config.host, () => resolve(true));
    });
    if (!listening) return;
    this.server = server;
    const { port } = server.address() as AddressInfo;
    this.logger.log(`metrics and readiness on http://${this.config.host}:${port}`);
  }

  async onModuleDestroy(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        return json(res, 404, envelope('NOT_FOUND', `no ${req.method} ${path} here`));
      }
      switch (path) {
        case '/metrics': {
          const text = await this.metrics.registry.metrics();
          res.writeHead(200, { 'content-type': this.metrics.registry.contentType });
          res.end(text);
          return;
        }
        case '/health/ready': {
          const report = await this.readiness.ready();
          return json(res, report.status.vendor_code === 0 ? 200 : 503, report);
        }
        case '/health/live':
          return json(res, 200, { status: okStatus('live') });
        default:
          return json(res, 404, envelope('NOT_FOUND', `no ${path} here`));
      }
    } catch (err) {
      this.logger.error(`metrics server: ${(err as Error).message}`);
      if (!res.headersSent) json(res, 500, envelope('INTERNAL', ERROR_CATALOGUE.INTERNAL.reason));
      else res.destroy();
    }
  }
}
