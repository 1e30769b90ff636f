import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { nonPublicRange, parseIp } from "../../../shared/outbound/addresses.ts";
import { urlRefusal } from "../../../shared/outbound/guard.ts";
import { type OutboundSettings, outboundPolicy } from "../../../shared/outbound/policy.ts";
import { loadConfig } from "../../../shared/runtime/config.ts";

/**
 * The outbound guard's address rules, as properties: every way of writing an address that a URL
 * accepts (127.1, 0x7f000001, 2130706433, 0177.0.0.1, [::ffff:127.0.0.1], [64:ff9b::7f00:1]...)
 * is judged as the address it is. The URLs go through the WHATWG parser, as every call does.
 */
const settings = (over: Partial<OutboundSettings> = {}): OutboundSettings => ({
  allow: [],
  ports: [],
  httpsOnly: false,
  maxResponseBytes: 1024,
  ...over,
});
const refusal = (host: string, over: Partial<OutboundSettings> = {}) =>
  urlRefusal(outboundPolicy(settings(over)), new URL(`http://${host}/`));

const hex = (n: number) => n.toString(16);
const quad = (v: number) => [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255];

/** Every text a URL host accepts for the IPv4 address `v`, IPv6 forms that carry it included. */
function ipv4Forms(v: number): string[] {
  const [a = 0, b = 0, c = 0, d = 0] = quad(v);
  const hi = hex(v >>> 16);
  const lo = hex(v & 0xffff);
  const forms = [
    `${a}.${b}.${c}.${d}`,
    `${v}`,
    `0x${hex(v)}`,
    `0${a.toString(8)}.0${b.toString(8)}.0${c.toString(8)}.0${d.toString(8)}`,
    `0x${hex(a)}.0x${hex(b)}.${c}.${d}`,
    `${a}.${b}.${(c << 8) | d}`,
    `${a}.${v & 0xffffff}`,
    `[::ffff:${a}.${b}.${c}.${d}]`,
    `[::ffff:${hi}:${lo}]`,
    `[0:0:0:0:0:ffff:${a}.${b}.${c}.${d}]`,
    `[64:ff9b::${a}.${b}.${c}.${d}]`,
    `[2002:${hi}:${lo}::1]`,
  ];
  // ::a.b.c.d (IPv4-compatible) names an IPv4 address only above ::1.
  if (v > 1) forms.push(`[::${a}.${b}.${c}.${d}]`);
  return forms;
}

const inRange = (base: string, bits: number) => {
  const b = parseIp(base)?.value ?? 0n;
  return fc.integer({ min: 0, max: 2 ** (32 - bits) - 1 }).map((i) => Number(b) + i);
};

const NON_PUBLIC_V4: [string, string, number][] = [
  ["loopback", "127.0.0.0", 8],
  ["private (RFC 1918)", "10.0.0.0", 8],
  ["private (RFC 1918)", "172.16.0.0", 12],
  ["private (RFC 1918)", "192.168.0.0", 16],
  ["link-local", "169.254.0.0", 16],
  ["carrier-grade NAT", "100.64.0.0", 10],
  ["this network", "0.0.0.0", 8],
  ["multicast", "224.0.0.0", 4],
];

describe("outbound addresses", () => {
  it.each(NON_PUBLIC_V4)(
    "refuses every form of a %s address (%s/%i), and allows it when its range is allowed",
    (_, base, bits) => {
      fc.assert(
        fc.property(inRange(base, bits), (v) => {
          const metadata =
            nonPublicRange(parseIp(quad(v).join(".")) as NonNullable<ReturnType<typeof parseIp>>) ===
            "cloud metadata";
          for (const form of ipv4Forms(v)) {
            expect(refusal(form), form).toMatch(/ address: Arbor calls only public addresses/);
            // The operator's range lets it through (a metadata address needs its exact address).
            if (!metadata) expect(refusal(form, { allow: [`${base}/${bits}`] }), form).toBeUndefined();
          }
        }),
        { numRuns: 60 },
      );
    },
  );

  it("allows public addresses in every form, and judges each form as the same address", () => {
    const publicV4 = fc
      .integer({ min: 0, max: 2 ** 32 - 1 })
      .filter(
        (v) =>
          nonPublicRange(parseIp(quad(v).join(".")) as NonNullable<ReturnType<typeof parseIp>>) === undefined,
      );
    fc.assert(
      fc.property(publicV4, (v) => {
        for (const form of ipv4Forms(v)) expect(refusal(form), form).toBeUndefined();
      }),
      { numRuns: 300 },
    );
  });

  it("refuses IPv6 loopback, link-local, unique-local and multicast in any spelling", () => {
    for (const host of [
      "[::1]",
      "[0:0:0:0:0:0:0:1]",
      "[0000::0001]",
      "[::]",
      "[::ffff:127.0.0.1]",
      "[::127.0.0.1]",
    ])
      expect(refusal(host), host).toMatch(/(loopback|unspecified|this network)/);
    const group = fc.integer({ min: 0, max: 0xffff }).map(hex);
    const v6 = (prefix: fc.Arbitrary<string>) =>
      fc
        .tuple(prefix, fc.array(group, { minLength: 7, maxLength: 7 }))
        .map(([p, rest]) => `[${[p, ...rest].join(":")}]`);
    const ranges: [fc.Arbitrary<string>, RegExp][] = [
      [fc.integer({ min: 0xfe80, max: 0xfebf }).map(hex), /link-local/],
      [fc.integer({ min: 0xfc00, max: 0xfdff }).map(hex), /unique-local|cloud metadata/],
      [fc.integer({ min: 0xff00, max: 0xffff }).map(hex), /multicast/],
    ];
    for (const [prefix, why] of ranges)
      fc.assert(
        fc.property(v6(prefix), (host) => {
          expect(refusal(host), host).toMatch(why);
        }),
        { numRuns: 100 },
      );
  });

  it("reaches a metadata address only when the operator names that exact address", () => {
    for (const [host, range, exact] of [
      ["169.254.169.254", "169.254.0.0/16", "169.254.169.254"],
      ["[::ffff:169.254.169.254]", "169.254.0.0/16", "169.254.169.254/32"],
      ["[fd00:ec2::254]", "fc00::/7", "fd00:ec2::254"],
      ["100.100.100.200", "100.64.0.0/10", "100.100.100.200"],
    ] as const) {
      expect(refusal(host), host).toMatch(/cloud metadata.*the exact address/);
      expect(refusal(host, { allow: [range] }), host).toMatch(/cloud metadata/);
      expect(refusal(host, { allow: [exact] }), host).toBeUndefined();
    }
  });

  it("takes http and https only, https only when told, ports 80 and 443 and the operator's", () => {
    const policy = (over: Partial<OutboundSettings> = {}) => outboundPolicy(settings(over));
    const check = (url: string, over: Partial<OutboundSettings> = {}) =>
      urlRefusal(policy(over), new URL(url));
    expect(check("https://example.com/")).toBeUndefined();
    expect(check("http://example.com:80/")).toBeUndefined();
    expect(check("ftp://example.com/")).toMatch(/only http and https/);
    expect(check("file:///etc/passwd")).toMatch(/only http and https/);
    expect(check("http://example.com/", { httpsOnly: true })).toMatch(/https only/);
    expect(check("https://example.com:8443/")).toMatch(/port 8443 is refused.*ARBOR_OUTBOUND_PORTS/);
    expect(check("https://example.com:8443/", { ports: ["8000-9000"] })).toBeUndefined();
    expect(check("http://example.com:22/", { ports: ["8000-9000"] })).toMatch(/port 22/);
    expect(check("https://user:pw@example.com/")).toMatch(/credentials/);
    // A host name is allowed to be non-public by name (it is resolved at connect time).
    expect(check("http://localhost/")).toBeUndefined();
  });

  it("reads the operator's settings from the environment, naming a bad entry", () => {
    expect(
      loadConfig({
        ARBOR_OUTBOUND_ALLOW: "127.0.0.1, 10.0.0.0/8,localhost,*.corp.example",
        ARBOR_OUTBOUND_PORTS: "8080,9000-9100",
        ARBOR_OUTBOUND_HTTPS_ONLY: "true",
        ARBOR_OUTBOUND_MAX_RESPONSE_BYTES: "2048",
      }).outbound,
    ).toEqual({
      allow: ["127.0.0.1", "10.0.0.0/8", "localhost", "*.corp.example"],
      ports: ["8080", "9000-9100"],
      httpsOnly: true,
      maxResponseBytes: 2048,
    });
    expect(loadConfig({}).outbound).toEqual({
      allow: [],
      ports: [],
      httpsOnly: false,
      maxResponseBytes: 10_485_760,
    });
    expect(() => loadConfig({ ARBOR_OUTBOUND_ALLOW: "10.0.0.0/33" })).toThrow(
      /ARBOR_OUTBOUND_ALLOW: .*10\.0\.0\.0\/33/,
    );
    expect(() => loadConfig({ ARBOR_OUTBOUND_PORTS: "70000" })).toThrow(/ARBOR_OUTBOUND_PORTS: .*70000/);
    expect(() => loadConfig({ ARBOR_OUTBOUND_MAX_RESPONSE_BYTES: "ten" })).toThrow(
      /ARBOR_OUTBOUND_MAX_RESPONSE_BYTES/,
    );
  });
});
