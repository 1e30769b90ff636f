import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeliveryData } from "../../../shared/notify/deliveries.ts";
import { postDelivery } from "../../../shared/notify/sender.ts";
import { notifyUrls } from "../../../shared/notify/urls.ts";

/**
 * One attempt's time is bounded by what decides it: once a receiver has answered its status, a
 * body it drips, or never ends, holds the attempt no longer than a moment (the answer's body does
 * not matter), so a receiver that keeps its connection open cannot hold a worker for the whole
 * attempt timeout, attempt after attempt.
 */
let server: Server;
let url = "";
const open = new Set<ServerResponse>();
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    open.add(res);
    res.on("close", () => open.delete(res));
    res.writeHead(200, { "content-type": "text/plain" });
    if (req.url === "/drip") {
      const t = setInterval(() => res.write("."), 100);
      res.on("close", () => clearInterval(t));
    } else res.write("ok"); // and never ends
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const delivery = (path: string) =>
  ({
    id: "dlv_test",
    url: `${url}${path}`,
    body: "{}",
    contentType: "application/json",
    headers: {},
    signed: false,
  }) as unknown as DeliveryData;
const urls = notifyUrls(undefined, { allowLoopbackHttp: true });

describe("an attempt at a receiver that answers 2xx and keeps its body open", () => {
  for (const path of ["/open", "/drip"])
    it(`${path}: delivered in a moment, not at the attempt's timeout, and the connection let go`, async () => {
      const started = Date.now();
      const result = await postDelivery(urls.fetch, delivery(path), { now: new Date(), timeoutMs: 10_000 });
      expect(result).toEqual({ delivered: true, status: 200 });
      expect(Date.now() - started).toBeLessThan(3_000);
      const deadline = Date.now() + 3_000;
      while (open.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(open.size).toBe(0);
    });
});
