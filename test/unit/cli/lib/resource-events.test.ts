import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { followResourceEvents } from "../../../../cli/lib/resource-events.ts";

/**
 * `arbor events --prefix` against what ARBOR_URL may point at: an Arbor behind a path prefix
 * (https://example.com/arbor) is asked under that prefix, as every other remote command asks; a
 * redirect is not followed (the key goes nowhere else); an answer that is not an event stream is
 * said so, not followed silently.
 */
const seen: string[] = [];
let server: Server;
let base: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req.url ?? "");
    if (req.url?.startsWith("/moved/")) {
      res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" });
      return res.end();
    }
    if (req.url?.startsWith("/json/")) {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end("{}");
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(
      `event: RESOURCE_PUT\ndata: ${JSON.stringify({ time: "t", urn: "cld:common.Tenant.a/x.Y.z", resourceType: "x.Y" })}\n\n`,
    );
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise<void>((done) => server.close(() => done())));

describe("arbor events --prefix", () => {
  it("asks under ARBOR_URL's path prefix", async () => {
    const lines: string[] = [];
    await followResourceEvents({ url: `${base}/arbor`, key: "arbor_k" }, "cld:common.Tenant.a", (l) =>
      lines.push(l),
    );
    expect(seen.at(-1)).toMatch(/^\/arbor\/v1\/resource-events\?prefix=/);
    expect(lines.join("\n")).toContain("cld:common.Tenant.a/x.Y.z");
  });

  it("follows no redirect, and refuses an answer that is not an event stream", async () => {
    await expect(
      followResourceEvents({ url: `${base}/moved`, key: "arbor_k" }, "cld:common.Tenant.a", () => {}),
    ).rejects.toThrow(/redirects to http:\/\/169\.254\.169\.254/);
    expect(seen.some((u) => u.startsWith("/latest"))).toBe(false);
    await expect(
      followResourceEvents({ url: `${base}/json`, key: "arbor_k" }, "cld:common.Tenant.a", () => {}),
    ).rejects.toThrow(/not an event stream/);
  });
});
