import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OutboundRefusedError, ResponseTooLargeError } from "../../shared/outbound/errors.ts";
import { createGuardedFetch, outboundRefusal, type Resolver } from "../../shared/outbound/guard.ts";
import { type OutboundSettings, outboundPolicy } from "../../shared/outbound/policy.ts";

/**
 * The outbound guard against real servers on loopback, with DNS under the test's control (an
 * injected resolver): names that resolve to loopback, a DNS answer that changes between
 * connections (rebinding), a redirect to the metadata address, ports, and a 64 MB response.
 */
interface Peer {
  server: Server;
  port: number;
  got: { url: string; host: string | undefined; headers: IncomingHttpHeaders }[];
  /** Bytes of the 64 MB body written before the connection closed. */
  bigWritten: number;
  bigClosed: Promise<void>;
}

const BIG = 64 * 1024 * 1024;

async function startPeer(host: string, port = 0): Promise<Peer> {
  let closed: () => void = () => undefined;
  const peer: Peer = {
    server: createServer(),
    port: 0,
    got: [],
    bigWritten: 0,
    bigClosed: new Promise((r) => {
      closed = r;
    }),
  };
  peer.server.on("request", (req, res) => {
    peer.got.push({ url: req.url ?? "", host: req.headers.host, headers: req.headers });
    if (req.url === "/metadata-redirect") {
      res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/iam/security-credentials/" });
      res.end();
      return;
    }
    if (req.url === "/big") {
      // 64 MB in 64 KB chunks, as fast as the reader takes them, unless it goes away.
      res.writeHead(200, { "content-type": "application/octet-stream" });
      const chunk = Buffer.alloc(64 * 1024, 120);
      const write = () => {
        while (peer.bigWritten < BIG && !res.destroyed) {
          peer.bigWritten += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", write);
        }
        res.end();
      };
      res.on("close", closed);
      write();
      return;
    }
    if (req.url === "/declared") {
      res.end(Buffer.alloc(2 * 1024 * 1024, 120)); // with its Content-Length
      return;
    }
    // Each answer closes its connection: the next request connects (and resolves) anew.
    res.writeHead(200, { "content-type": "text/plain", connection: "close" });
    res.end(`hello from ${host}`);
  });
  await new Promise<void>((r) => peer.server.listen(port, host, r));
  peer.port = (peer.server.address() as AddressInfo).port;
  return peer;
}

const settings = (over: Partial<OutboundSettings> = {}): OutboundSettings => ({
  allow: [],
  ports: ["1024-65535"],
  httpsOnly: false,
  maxResponseBytes: 10 * 1024 * 1024,
  ...over,
});

/** A resolver answering from a table, counting its lookups. */
function dns(table: Record<string, string | (() => string)>) {
  const asked: string[] = [];
  const resolve: Resolver = async (hostname) => {
    asked.push(hostname);
    const entry = table[hostname];
    if (entry === undefined) throw Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    const address = typeof entry === "function" ? entry() : entry;
    return [{ address, family: address.includes(":") ? 6 : 4 }];
  };
  return { resolve, asked };
}

let a: Peer;
let b: Peer;
beforeAll(async () => {
  a = await startPeer("127.0.0.1");
  b = await startPeer("127.0.0.2", a.port); // same port, another loopback address
});
afterAll(async () => {
  for (const p of [a, b]) {
    p.server.closeAllConnections();
    await new Promise((r) => p.server.close(r));
  }
});

describe("the outbound guard", () => {
  it("refuses a name that resolves to loopback unless the operator allows it; allowed, it connects with the name as Host", async () => {
    const { resolve } = dns({ "api.example.com": "127.0.0.1" });
    const url = `http://api.example.com:${a.port}/x`;
    const before = a.got.length;
    const refused = createGuardedFetch(outboundPolicy(settings()), { resolve });
    const error = await refused(url).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundRefusedError);
    expect((error as Error).message).toBe(
      `outbound call to http://api.example.com:${a.port}/x refused: api.example.com resolves to 127.0.0.1, ` +
        "a loopback address: Arbor calls only public addresses unless the operator allows others " +
        "(ARBOR_OUTBOUND_ALLOW, e.g. 127.0.0.1/32)",
    );
    expect(a.got.length).toBe(before); // nothing reached the server

    for (const allow of [["127.0.0.1/32"], ["api.example.com"], ["*.example.com"]]) {
      const allowed = createGuardedFetch(outboundPolicy(settings({ allow })), { resolve });
      const response = await allowed(url);
      expect(await response.text()).toBe("hello from 127.0.0.1");
      expect(a.got.at(-1)?.host).toBe(`api.example.com:${a.port}`);
    }
  });

  it("refuses loopback written any way a URL allows, before connecting; allowed, reaches it", async () => {
    const guarded = createGuardedFetch(outboundPolicy(settings()), { resolve: dns({}).resolve });
    const before = a.got.length;
    const forms = [
      "127.1",
      "0x7f000001",
      "2130706433",
      "0177.0.0.1",
      "127.0.0.1",
      "[::ffff:127.0.0.1]",
      "[::1]",
    ];
    for (const host of forms) {
      const error = await guarded(`http://${host}:${a.port}/`).catch((e: unknown) => e);
      expect(error, host).toBeInstanceOf(OutboundRefusedError);
      expect((error as Error).message, host).toMatch(/loopback address/);
    }
    expect(a.got.length).toBe(before);
    const allowed = createGuardedFetch(outboundPolicy(settings({ allow: ["127.0.0.0/8"] })));
    for (const host of ["127.1", "0x7f000001", "2130706433", "[::ffff:127.0.0.1]"])
      expect(await (await allowed(`http://${host}:${a.port}/`)).text(), host).toBe("hello from 127.0.0.1");
  });

  it("connects to the address it checked: a DNS answer that changes to another address never reaches it", async () => {
    // The first answer is allowed (127.0.0.1); later answers rebind the name to 127.0.0.2.
    let answers = 0;
    const { resolve, asked } = dns({
      "rebind.example.com": () => (++answers === 1 ? "127.0.0.1" : "127.0.0.2"),
    });
    const guarded = createGuardedFetch(outboundPolicy(settings({ allow: ["127.0.0.1/32"] })), { resolve });
    const beforeB = b.got.length;
    const url = `http://rebind.example.com:${a.port}/`;
    expect(await (await guarded(url)).text()).toBe("hello from 127.0.0.1");
    // One lookup for the connection: the address checked is the address connected to.
    expect(asked).toEqual(["rebind.example.com"]);
    // The server closed that connection; the next one resolves again and gets the rebound answer.
    const error = await guarded(url).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundRefusedError);
    expect((error as Error).message).toMatch(
      /rebind\.example\.com resolves to 127\.0\.0\.2, a loopback address/,
    );
    expect(asked).toEqual(["rebind.example.com", "rebind.example.com"]);
    expect(b.got.length).toBe(beforeB); // 127.0.0.2 never got a request
  });

  it("follows no redirect: one to 169.254.169.254 is refused, and nothing is asked of it", async () => {
    const guarded = createGuardedFetch(outboundPolicy(settings({ allow: ["127.0.0.1"] })));
    const error = await guarded(`http://127.0.0.1:${a.port}/metadata-redirect`, {
      headers: { authorization: "Bearer secret" },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundRefusedError);
    expect((error as Error).message).toMatch(
      /answered HTTP 302, a redirect to http:\/\/169\.254\.169\.254\/latest\/meta-data\/iam\/security-credentials\/, and Arbor follows no redirects/,
    );
    // Straight to the metadata address: refused before any connection, even with link-local allowed.
    const linkLocal = createGuardedFetch(outboundPolicy(settings({ allow: ["169.254.0.0/16"] })));
    await expect(linkLocal("http://169.254.169.254/latest/meta-data/")).rejects.toThrow(/cloud metadata/);
  });

  it("limits ports and schemes: an allowed name on another port is refused, and nothing is sent", async () => {
    const { resolve } = dns({ "api.example.com": "127.0.0.1" });
    const guarded = createGuardedFetch(outboundPolicy(settings({ allow: ["127.0.0.1"], ports: [] })), {
      resolve,
    });
    const before = a.got.length;
    await expect(guarded(`http://api.example.com:${a.port}/`)).rejects.toThrow(
      new RegExp(`port ${a.port} is refused: Arbor calls ports 80 and 443, and those the operator adds`),
    );
    const httpsOnly = createGuardedFetch(
      outboundPolicy(settings({ allow: ["127.0.0.1"], httpsOnly: true })),
      {
        resolve,
      },
    );
    await expect(httpsOnly(`http://api.example.com:${a.port}/`)).rejects.toThrow(/plain http is refused/);
    expect(a.got.length).toBe(before);
  });

  it("checks a URL ahead of time, for URLs registered to be called later (webhooks, push)", async () => {
    const { resolve } = dns({ "hooks.example.com": "93.184.215.14", "internal.example.com": "10.0.0.7" });
    const policy = outboundPolicy(settings({ ports: [] }));
    expect(await outboundRefusal(policy, "https://hooks.example.com/arbor", { resolve })).toBeUndefined();
    expect(await outboundRefusal(policy, "https://internal.example.com/x", { resolve })).toMatch(
      /internal\.example\.com resolves to 10\.0\.0\.7, a private \(RFC 1918\) address/,
    );
    expect(await outboundRefusal(policy, "http://[fd00:ec2::254]/", { resolve })).toMatch(/cloud metadata/);
    expect(await outboundRefusal(policy, "https://hooks.example.com:8443/", { resolve })).toMatch(
      /port 8443/,
    );
    expect(await outboundRefusal(policy, "https://nowhere.example.com/", { resolve })).toMatch(
      /does not resolve/,
    );
    expect(await outboundRefusal(policy, "not a url")).toMatch(/is not a URL/);
  });

  it("refuses a response whose declared length is over the bound before reading it; one at the bound is read whole", async () => {
    const over = createGuardedFetch(
      outboundPolicy(settings({ allow: ["127.0.0.1"], maxResponseBytes: 1024 * 1024 })),
    );
    const response = await over(`http://127.0.0.1:${a.port}/declared`);
    await expect(response.text()).rejects.toThrow(/response larger than 1048576 bytes/);
    const exact = createGuardedFetch(
      outboundPolicy(settings({ allow: ["127.0.0.1"], maxResponseBytes: 2 * 1024 * 1024 })),
    );
    expect((await (await exact(`http://127.0.0.1:${a.port}/declared`)).arrayBuffer()).byteLength).toBe(
      2 * 1024 * 1024,
    );
  });

  it("cuts a 64 MB response at the bound, closes the connection, and says so", {
    timeout: 60_000,
  }, async () => {
    const guarded = createGuardedFetch(outboundPolicy(settings({ allow: ["127.0.0.1"] })));
    global.gc?.();
    const rss0 = process.memoryUsage().rss;
    const heap0 = process.memoryUsage().heapUsed;
    let peakRss = rss0;
    const sample = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
    }, 20);
    const response = await guarded(`http://127.0.0.1:${a.port}/big`);
    const error = await response.text().catch((e: unknown) => e);
    clearInterval(sample);
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    expect(error).toBeInstanceOf(ResponseTooLargeError);
    expect((error as Error).message).toBe(
      `http://127.0.0.1:${a.port}/big: response larger than 10485760 bytes; reading stopped there and the ` +
        "connection was closed (the bound is ARBOR_OUTBOUND_MAX_RESPONSE_BYTES)",
    );
    await a.bigClosed; // the server saw the connection go before it had written everything
    expect(a.bigWritten).toBeLessThan(BIG);
    const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
    process.stdout.write(
      `64 MB response, 10 MB bound: the server wrote ${mb(a.bigWritten)} before the close; ` +
        `RSS +${mb(peakRss - rss0)} at peak, heap +${mb(process.memoryUsage().heapUsed - heap0)} after\n`,
    );
  });
});
