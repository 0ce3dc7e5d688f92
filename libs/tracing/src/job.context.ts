import { Context, ROOT_CONTEXT, TextMapGetter, propagation } from '@opentelemetry/api';

/** A span context as it travels in a job's data: W3C trace context headers. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

const getter: TextMapGetter<TraceCarrier> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => (key === 'traceparent' || key === 'tracestate' ? carrier[key] : undefined),
};

/** The context's span as W3C headers, through the propagator the SDK registered. */
export function carrierOf(context: Context): TraceCarrier | undefined {
  const carrier: Partial<TraceCarrier> = {};
  propagation.inject(context, carrier);
  return carrier.traceparent ? (carrier as TraceCarrier) : undefined;
}

/** The context a carrier (a job's, a request's headers) names; no carrier: the root context. */
export function contextOf(carrier: Partial<TraceCarrier> | undefined): Context {
  if (!carrier?.traceparent) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, carrier as TraceCarrier, getter);
}
