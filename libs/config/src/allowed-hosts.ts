import { isIPv6 } from 'node:net';

/** A host name or address, lower-cased, and the one port it stands for when given. */
export interface HostAndPort {
  /** A name without its trailing dot, an IPv4 address, or an IPv6 address in brackets. */
  host: string;
  port?: number;
}

/**
 * The `Host` headers the api answers (SLUICE_ALLOWED_HOSTS): the entries listed; `every` for a
 * lone `*`; `unset` in cluster mode without the setting, which answers every Host too, but the
 * api warns at start-up.
 */
export type AllowedHosts = readonly HostAndPort[] | 'every' | 'unset';

/** What standalone mode answers without the setting: the loopback names, on any port. */
export const LOOPBACK_HOSTS: readonly HostAndPort[] = [
  { host: 'localhost' },
  { host: '127.0.0.1' },
  { host: '[::1]' },
];

const HOST_AND_PORT = /^(?:\[([0-9a-f:.]+)\]|([a-z0-9_.-]+))(?::(\d{1,5}))?$/;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$/;

/**
 * `host[:port]` as a `Host` header or a SLUICE_ALLOWED_HOSTS entry holds it, case folded: a name
 * (its one trailing dot dropped: `localhost.` is the same name as `localhost`), an IPv4 address,
 * or an IPv6 address in brackets (written as browsers write it, `[::1]`). Undefined for anything
 * else: user info, a path, a wildcard, an empty label, a port out of range.
 */
export function parseHostAndPort(text: string): HostAndPort | undefined {
  const match = HOST_AND_PORT.exec(text.trim().toLowerCase());
  if (!match) return undefined;
  const [, ipv6, name, portText] = match;
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  let host: string;
  if (ipv6 !== undefined) {
    if (!isIPv6(ipv6)) return undefined;
    // The URL parser writes an address the one way browsers send it (zeros compressed).
    host = new URL(`http://[${ipv6}]/`).hostname;
  } else {
    host = name.endsWith('.') ? name.slice(0, -1) : name;
    if (!host.split('.').every((label) => LABEL.test(label))) return undefined;
  }
  return port === undefined ? { host } : { host, port };
}

/** The entry for the address in HOST, or undefined for an address of every interface. */
export function boundHost(bindHost: string): HostAndPort | undefined {
  if (bindHost === '0.0.0.0' || bindHost === '::' || bindHost === '') return undefined;
  const parsed = parseHostAndPort(isIPv6(bindHost) ? `[${bindHost}]` : bindHost);
  return parsed && { host: parsed.host };
}

/** Whether `request` (a parsed `Host` value) is one `entry` stands for. */
export function hostMatches(entry: HostAndPort, request: HostAndPort): boolean {
  return entry.host === request.host && (entry.port === undefined || entry.port === request.port);
}
