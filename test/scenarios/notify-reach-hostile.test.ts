import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { notifyUrls } from "../../shared/notify/urls.ts";
import type { Resolver } from "../../shared/outbound/guard.ts";
import { loadConfig } from "../../shared/runtime/config.ts";

/**
 * Where a tenant's webhook may go, tried as a hostile tenant would (issue: "the tools' outbound
 * allow-list also opens webhooks"). The operator's settings are the README's own for local tools,
 * `ARBOR_OUTBOUND_ALLOW=127.0.0.1,::1 ARBOR_OUTBOUND_PORTS=1024-65535`: they open loopback to
 * tools, and must not open it to callbackUrl or push URLs. Webhooks have their own
 * ARBOR_WEBHOOK_ALLOW / ARBOR_WEBHOOK_PORTS. Each refusal is checked twice: when the URL is given
 * (refusal, the 400 path) and when it would be sent (the guarded fetch, against the address a name
 * resolves to), with a real https server listening on loopback that must never be reached.
 */
const toolsOpen = {
  ARBOR_OUTBOUND_ALLOW: "127.0.0.1,::1,localhost",
  ARBOR_OUTBOUND_PORTS: "1024-65535",
};

let server: Server;
let port: number;
let reached = 0;

beforeAll(async () => {
  // A self-signed certificate is not needed: a refused connection never gets to TLS, and one that
  // got through would be counted by the connection listener before any handshake.
  server = createServer();
  server.on("connection", () => {
    reached++;
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** DNS as an attacker who controls their own names would have it: every name resolves to loopback. */
const toLoopback: Resolver = async () => [{ address: "127.0.0.1", family: 4 }];

const urlsFor = (env: Record<string, string>) => {
  const config = loadConfig({ ARBOR_MODE: "local", ARBOR_DATA_DIR: "/tmp/unused", ...env });
  return notifyUrls(config.outbound, { ...config.notify, guard: { resolve: toLoopback } });
};

describe("webhook URLs under the tools' open outbound settings", () => {
  it("refuses loopback in every spelling, when given, although the tools may reach it", () => {
    const urls = urlsFor(toolsOpen);
    for (const host of [
      "127.0.0.1",
      "127.1",
      "[::1]",
      "[0:0:0:0:0:0:0:1]",
      "[::ffff:127.0.0.1]",
      "[64:ff9b::7f00:1]", // NAT64 carrying 127.0.0.1
      "[2002:7f00:1::]", // 6to4 carrying 127.0.0.1
      "0.0.0.0",
      "[::]",
      "localhost",
      "LOCALHOST",
      "localhost.",
      "api.localhost",
      "api.localhost.",
    ]) {
      const url = `https://${host}:${port}/hook`;
      expect(urls.refusal(url), url).toBeDefined();
    }
  });

  it("never connects to loopback, whatever a name resolves to, or an embedded address", async () => {
    const urls = urlsFor(toolsOpen);
    for (const host of [
      "receiver.example.com",
      "localhost.localdomain",
      "ip6-localhost",
      "[64:ff9b::7f00:1]",
    ]) {
      const error = await urls
        .fetch(`https://${host}:${port}/hook`, { method: "POST", body: "{}" })
        .then(() => undefined)
        .catch((e: unknown) => e as Error);
      expect(error, host).toBeInstanceOf(Error);
    }
    expect(reached).toBe(0);
  });

  it("a webhook reaches loopback only when ARBOR_WEBHOOK_ALLOW and ARBOR_WEBHOOK_PORTS say so", async () => {
    const urls = urlsFor({
      ...toolsOpen,
      ARBOR_WEBHOOK_ALLOW: "127.0.0.1",
      ARBOR_WEBHOOK_PORTS: String(port),
    });
    expect(urls.refusal(`https://127.0.0.1:${port}/hook`)).toBeUndefined();
    // Another port stays closed; a metadata address is never opened by a range.
    expect(urls.refusal(`https://127.0.0.1:${port === 65535 ? 1025 : port + 1}/hook`)).toBeDefined();
    expect(urls.refusal("https://169.254.169.254/latest/meta-data/")).toBeDefined();
    await urls
      .fetch(`https://127.0.0.1:${port}/hook`, {
        method: "POST",
        body: "{}",
        signal: AbortSignal.timeout(2_000),
      })
      .catch(() => undefined); // no certificate: the handshake fails, after the connection
    expect(reached).toBe(1);
  });

  it("refuses a bad webhook setting at start, saying what it takes", () => {
    expect(() =>
      loadConfig({ ARBOR_MODE: "local", ARBOR_DATA_DIR: "/tmp/unused", ARBOR_WEBHOOK_ALLOW: "not a host!" }),
    ).toThrow(/ARBOR_WEBHOOK_ALLOW.*neither a CIDR/s);
  });
});
