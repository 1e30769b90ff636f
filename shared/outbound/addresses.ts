import { isIPv4, isIPv6 } from "node:net";

/**
 * IP addresses and ranges for the outbound guard, as numbers: an IPv4 address is a 32-bit value,
 * an IPv6 address a 128-bit one. Addresses come in as text in the forms `dns.lookup` answers and
 * the WHATWG URL parser leaves in a hostname (dotted quads; IPv6 with or without brackets, maybe
 * with an embedded dotted quad): shorthands such as `127.1` or `0x7f000001` are the URL parser's
 * to normalise, and are (property tests in test/unit/outbound/addresses.test.ts).
 *
 * An IPv6 address that carries an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible
 * `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is judged as that IPv4 address, so
 * `::ffff:127.0.0.1` is loopback wherever `127.0.0.1` is.
 */
export interface Ip {
  version: 4 | 6;
  value: bigint;
}

export interface Cidr {
  version: 4 | 6;
  base: bigint;
  bits: number;
}

/** The address of a text form, or undefined when it is not one (brackets allowed around IPv6). */
export function parseIp(text: string): Ip | undefined {
  const t = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  if (isIPv4(t)) return { version: 4, value: ipv4Value(t) };
  if (!isIPv6(t) || t.includes("%")) return undefined; // a zone id names an interface: never outbound
  return { version: 6, value: ipv6Value(t) };
}

function ipv4Value(t: string): bigint {
  return t.split(".").reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function ipv6Value(t: string): bigint {
  let text = t;
  // An embedded dotted quad is the last 32 bits: rewrite it as two hex groups.
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad?.[1]) {
    const v = ipv4Value(quad[1]);
    text = `${text.slice(0, -quad[1].length)}${(v >> 16n).toString(16)}:${(v & 0xffffn).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const groups = (s: string) => (s === "" ? [] : s.split(":"));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const missing = 8 - left.length - right.length;
  const all = [...left, ...Array.from({ length: tail === undefined ? 0 : missing }, () => "0"), ...right];
  return all.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g, 16)), 0n);
}

/** `10.0.0.0/8`, `fc00::/7`, or a lone address (a /32 or /128); undefined when it is neither. */
export function parseCidr(text: string): Cidr | undefined {
  const [addr = "", bitsText, extra] = text.trim().split("/");
  if (extra !== undefined) return undefined;
  const ip = parseIp(addr);
  if (!ip) return undefined;
  const width = ip.version === 4 ? 32 : 128;
  if (bitsText !== undefined && !/^\d{1,3}$/.test(bitsText)) return undefined;
  const bits = bitsText === undefined ? width : Number(bitsText);
  if (bits > width) return undefined;
  return { version: ip.version, base: ip.value & mask(ip.version, bits), bits };
}

function mask(version: 4 | 6, bits: number): bigint {
  const width = version === 4 ? 32 : 128;
  return ((1n << BigInt(bits)) - 1n) << BigInt(width - bits);
}

export function inCidr(ip: Ip, cidr: Cidr): boolean {
  return ip.version === cidr.version && (ip.value & mask(cidr.version, cidr.bits)) === cidr.base;
}

/** The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if it carries one. */
export function embeddedIpv4(ip: Ip): Ip | undefined {
  if (ip.version === 4) return undefined;
  const v = ip.value;
  const low32 = v & 0xffff_ffffn;
  if (v >> 32n === 0xffffn) return { version: 4, value: low32 }; // ::ffff:a.b.c.d
  if (v >> 32n === 0n && v > 1n) return { version: 4, value: low32 }; // ::a.b.c.d (not :: or ::1)
  if (v >> 32n === 0x0064_ff9b_0000_0000_0000_0000n) return { version: 4, value: low32 }; // 64:ff9b::/96
  if (v >> 112n === 0x2002n) return { version: 4, value: (v >> 80n) & 0xffff_ffffn }; // 2002:aabb:ccdd::
  return undefined;
}

/** The address as a caller is judged: the IPv4 address an IPv6 one carries, else itself. */
export function effectiveIp(ip: Ip): Ip {
  return embeddedIpv4(ip) ?? ip;
}

/** Ranges no outbound call reaches unless the operator allows them; the first match names the reason. */
const RANGES: readonly (readonly [string, string])[] = [
  ["0.0.0.0/8", "this network (0.0.0.0/8)"],
  ["10.0.0.0/8", "private (RFC 1918)"],
  ["100.64.0.0/10", "carrier-grade NAT (100.64.0.0/10)"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local"],
  ["172.16.0.0/12", "private (RFC 1918)"],
  ["192.0.0.0/24", "IETF protocol assignments (192.0.0.0/24)"],
  ["192.0.2.0/24", "documentation (TEST-NET-1)"],
  ["192.88.99.0/24", "6to4 relay anycast"],
  ["192.168.0.0/16", "private (RFC 1918)"],
  ["198.18.0.0/15", "benchmarking (198.18.0.0/15)"],
  ["198.51.100.0/24", "documentation (TEST-NET-2)"],
  ["203.0.113.0/24", "documentation (TEST-NET-3)"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved (240.0.0.0/4, broadcast)"],
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["64:ff9b:1::/48", "local-use NAT64"],
  ["100::/64", "discard-only"],
  ["2001::/32", "Teredo tunnel"],
  ["2001:db8::/32", "documentation"],
  ["fc00::/7", "unique-local"],
  ["fe80::/10", "link-local"],
  ["fec0::/10", "site-local (deprecated)"],
  ["ff00::/8", "multicast"],
];
const PARSED_RANGES = RANGES.map(([cidr, why]) => ({ cidr: parseCidr(cidr) as Cidr, why }));

/**
 * Cloud metadata services: inside the ranges above, and reachable only when the operator names
 * the exact address (a /32 or /128 entry), never through a wider allowed range.
 */
const METADATA = [
  "169.254.169.254", // AWS, GCP, Azure, OpenStack...
  "169.254.170.2", // ECS task metadata
  "169.254.169.253", // AWS DNS resolver
  "100.100.100.200", // Alibaba Cloud
  "fd00:ec2::254", // AWS IMDS over IPv6
  "fd00:ec2::23", // AWS DNS over IPv6
].map((t) => parseIp(t) as Ip);

export function isMetadata(ip: Ip): boolean {
  const e = effectiveIp(ip);
  return METADATA.some((m) => m.version === e.version && m.value === e.value);
}

/** Why an address is not a public one (its range's name), or undefined when it is public. */
export function nonPublicRange(ip: Ip): string | undefined {
  if (isMetadata(ip)) return "cloud metadata";
  const e = effectiveIp(ip);
  return PARSED_RANGES.find((r) => inCidr(e, r.cidr))?.why;
}

/** The address as text (IPv4 dotted, IPv6 as eight hex groups), for messages. */
export function formatIp(ip: Ip): string {
  if (ip.version === 4) return [24n, 16n, 8n, 0n].map((s) => ((ip.value >> s) & 0xffn).toString()).join(".");
  return Array.from({ length: 8 }, (_, i) =>
    ((ip.value >> BigInt(112 - 16 * i)) & 0xffffn).toString(16),
  ).join(":");
}
