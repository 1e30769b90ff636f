import { ConfigError } from "../kernel/errors.ts";
import {
  type Cidr,
  effectiveIp,
  formatIp,
  type Ip,
  inCidr,
  isMetadata,
  nonPublicRange,
  parseCidr,
} from "./addresses.ts";

/**
 * What the outbound guard lets through (the operator's settings, shared/runtime/config.ts):
 *   - `httpsOnly`: refuse plain http (ARBOR_OUTBOUND_HTTPS_ONLY);
 *   - `allow`: addresses and names that may be reached although they are not public
 *     (ARBOR_OUTBOUND_ALLOW: CIDRs such as `10.1.0.0/16`, lone addresses such as `127.0.0.1`, host
 *     names such as `localhost` or `*.corp.example`); a cloud metadata address (169.254.169.254,
 *     fd00:ec2::254...) only by its own exact address, never through a wider range or a name;
 *   - `ports`: ports besides 80 and 443 (ARBOR_OUTBOUND_PORTS: `8080`, `9000-9100`);
 *   - `maxResponseBytes`: the longest response body read (ARBOR_OUTBOUND_MAX_RESPONSE_BYTES).
 */
export interface OutboundSettings {
  allow: readonly string[];
  ports: readonly string[];
  httpsOnly: boolean;
  maxResponseBytes: number;
}

export interface OutboundPolicy {
  readonly httpsOnly: boolean;
  readonly cidrs: readonly Cidr[];
  /** Lower-case names; `*.example.com` entries are kept as `.example.com` (a suffix). */
  readonly hosts: readonly string[];
  readonly ports: readonly (readonly [number, number])[];
  readonly maxResponseBytes: number;
  /** The settings as given, for messages. */
  readonly settings: OutboundSettings;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;

export const DEFAULT_OUTBOUND: OutboundSettings = {
  allow: [],
  ports: [],
  httpsOnly: false,
  maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
};

const HOST = /^(\*\.)?([a-z0-9-]+\.)*[a-z0-9-]+$/i;
const PORTS = /^(\d{1,5})(?:-(\d{1,5}))?$/;

/** Why an ARBOR_OUTBOUND_ALLOW entry is not valid, or undefined when it is. */
export function allowEntryProblem(entry: string): string | undefined {
  if (parseCidr(entry) || HOST.test(entry)) return undefined;
  return `"${entry}" is neither a CIDR (10.0.0.0/8, fd00::/8), an address (127.0.0.1) nor a host name (localhost, *.corp.example)`;
}

/** Why an ARBOR_OUTBOUND_PORTS entry is not valid, or undefined when it is. */
export function portEntryProblem(entry: string): string | undefined {
  const m = PORTS.exec(entry);
  const low = Number(m?.[1]);
  const high = Number(m?.[2] ?? m?.[1]);
  if (m && low >= 1 && high <= 65_535 && low <= high) return undefined;
  return `"${entry}" is neither a port (8080) nor a range of ports (9000-9100) within 1-65535`;
}

/** The policy of settings; throws on an entry config validation should have refused. */
export function outboundPolicy(settings: OutboundSettings = DEFAULT_OUTBOUND): OutboundPolicy {
  const cidrs: Cidr[] = [];
  const hosts: string[] = [];
  for (const entry of settings.allow) {
    const problem = allowEntryProblem(entry);
    if (problem) throw new ConfigError(`ARBOR_OUTBOUND_ALLOW: ${problem}`);
    const cidr = parseCidr(entry);
    if (cidr) cidrs.push(cidr);
    else hosts.push(entry.toLowerCase().replace(/^\*\./, "."));
  }
  const ports: [number, number][] = [
    [80, 80],
    [443, 443],
  ];
  for (const entry of settings.ports) {
    const problem = portEntryProblem(entry);
    if (problem) throw new ConfigError(`ARBOR_OUTBOUND_PORTS: ${problem}`);
    const [low = "", high] = entry.split("-");
    ports.push([Number(low), Number(high ?? low)]);
  }
  return {
    httpsOnly: settings.httpsOnly,
    cidrs,
    hosts,
    ports,
    maxResponseBytes: settings.maxResponseBytes,
    settings,
  };
}

function hostListed(policy: OutboundPolicy, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, ""); // localhost. is localhost
  return policy.hosts.some((p) => (p.startsWith(".") ? h.endsWith(p) : h === p));
}

/**
 * Why `ip` (what `host` resolved to, or the host itself when it is an address) may not be
 * reached, or undefined when it may: public addresses may; others only when the operator allows
 * them; metadata addresses only by their exact address.
 */
export function addressRefusal(policy: OutboundPolicy, host: string, ip: Ip): string | undefined {
  const range = nonPublicRange(ip);
  if (!range) return undefined;
  const e = effectiveIp(ip);
  const candidates = e === ip ? [ip] : [ip, e];
  if (isMetadata(ip)) {
    const exact = policy.cidrs.some(
      (c) => c.bits === (c.version === 4 ? 32 : 128) && candidates.some((a) => inCidr(a, c)),
    );
    if (exact) return undefined;
  } else if (hostListed(policy, host) || policy.cidrs.some((c) => candidates.some((a) => inCidr(a, c)))) {
    return undefined;
  }
  const shown = formatIp(e);
  const named = host === shown || `[${host}]` === shown ? "" : `${host} resolves to `;
  return (
    `${named}${shown}, a ${range} address: Arbor calls only public addresses unless the operator allows ` +
    `others (ARBOR_OUTBOUND_ALLOW, e.g. ${e.version === 4 ? `${shown}/32` : `${shown}/128`}` +
    `${range === "cloud metadata" ? ", the exact address: a metadata service is never allowed by a range" : ""})`
  );
}

export function portAllowed(policy: OutboundPolicy, port: number): boolean {
  return policy.ports.some(([low, high]) => port >= low && port <= high);
}
