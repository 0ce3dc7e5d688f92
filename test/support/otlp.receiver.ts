import { once } from 'node:events';
import { IncomingMessage, Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP/HTTP JSON export carries it, flattened. */
export interface ReceivedSpan {
  service: string;
  /** Its process's resource attributes (service.name among them). */
  resource: Record<string, string | number | boolean>;
  /** The W3C tracestate it carries ('' for none). */
  traceState: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's numbers: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, string | number | boolean>;
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string };
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpKeyValue {
  key: string;
  value: OtlpValue;
}
interface OtlpSpan {
  traceId: string;
  traceState?: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: OtlpKeyValue[];
  status?: { code?: number; message?: string };
}
interface OtlpExport {
  resourceSpans?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: { spans?: OtlpSpan[] }[];
  }[];
}

function valueOf(value: OtlpValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  return value.boolValue ?? '';
}

function attributesOf(list: OtlpKeyValue[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]));
}

/** The spans of one OTLP/HTTP JSON export request. */
export function spansOf(body: OtlpExport): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resource of body.resourceSpans ?? []) {
    const attributes = attributesOf(resource.resource?.attributes);
    const service = String(attributes['service.name'] ?? '');
    for (const scope of resource.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        spans.push({
          service,
          resource: attributes,
          traceState: span.traceState ?? '',
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? '',
          name: span.name,
          kind: span.kind,
          startMs: Number(BigInt(span.startTimeUnixNano) / 1000n) / 1000,
          endMs: Number(BigInt(span.endTimeUnixNano) / 1000n) / 1000,
          attributes: attributesOf(span.attributes),
          status: { code: span.status?.code ?? 0, message: span.status?.message },
        });
      }
    }
  }
  return spans;
}

/**
 * An OTLP/HTTP receiver of JSON exports (OTEL_EXPORTER_OTLP_PROTOCOL=http/json) on loopback:
 * keeps every span it is sent, and the raw bodies (to look for what must never be in a span).
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly bodies: string[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<OtlpReceiver> {
    // The receiver is made once the server listens; requests come only after.
    const made: { receiver?: OtlpReceiver } = {};
    const server = createServer((request, response) => {
      void read(request).then((text) => {
        if (request.method === 'POST' && request.url === '/v1/traces') {
          made.receiver?.bodies.push(text);
          made.receiver?.spans.push(...spansOf(JSON.parse(text) as OtlpExport));
          response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } else response.writeHead(404).end();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    made.receiver = new OtlpReceiver(server, `http://127.0.0.1:${port}`);
    return made.receiver;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close');
  }
}

async function read(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
