import type { TracingSettings } from '@app/config';

let started: { shutdown(): Promise<void> } | undefined;

/** Whether this process exports spans: without it, nothing makes a span or a context. */
export function tracingOn(): boolean {
  return started !== undefined;
}

/**
 * Starts the OpenTelemetry SDK with the settings libs/config read from the OTEL_* variables, and
 * registers it with @opentelemetry/api (W3C trace context propagation). Tracing off: nothing is
 * loaded, and the API stays the no-op it is by default. `service` names the process when
 * OTEL_SERVICE_NAME does not.
 */
export async function startTracing(
  settings: TracingSettings | undefined,
  service: string,
): Promise<void> {
  if (!settings || started) return;
  // Loaded only here: a process with tracing off never loads the SDK.
  const [node, base, resources, exporter] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
    settings.protocol === 'http/json'
      ? import('@opentelemetry/exporter-trace-otlp-http')
      : import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  const ratio = new base.TraceIdRatioBasedSampler(settings.samplerRatio);
  const samplers = {
    always_on: () => new base.AlwaysOnSampler(),
    always_off: () => new base.AlwaysOffSampler(),
    traceidratio: () => ratio,
    parentbased_always_on: () => new base.ParentBasedSampler({ root: new base.AlwaysOnSampler() }),
    parentbased_always_off: () =>
      new base.ParentBasedSampler({ root: new base.AlwaysOffSampler() }),
    parentbased_traceidratio: () => new base.ParentBasedSampler({ root: ratio }),
  } satisfies Record<TracingSettings['sampler'], () => unknown>;
  const provider = new node.NodeTracerProvider({
    resource: resources.resourceFromAttributes({
      ...settings.resourceAttributes,
      'service.name': settings.serviceName ?? service,
    }),
    sampler: samplers[settings.sampler](),
    spanProcessors: [
      new base.BatchSpanProcessor(new exporter.OTLPTraceExporter({ url: settings.endpoint })),
    ],
  });
  provider.register();
  started = provider;
}

/** Exports the spans still batched and stops the SDK (shutdown); nothing when tracing is off. */
export async function stopTracing(): Promise<void> {
  const provider = started;
  started = undefined;
  await provider?.shutdown();
}
