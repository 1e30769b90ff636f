import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { ToolContext, ToolPort } from "../../shared/ports/tools.ts";
import { openTools } from "../../shared/runtime/engine-wiring.ts";
import { embedder, LOOPBACK_ALLOWED, openToolWorld, type ToolWorld } from "./tool-world.ts";

/**
 * The tools as the engine opens them (openTools: no fetch given, so the outbound guard of the
 * operator's settings): `http_request` and HTTP tools reach a name only at a public address, and
 * a response past the bound is a clean failed call.
 */
const TASK = `${tenantUrn("acme")}/common.Conversation.c1/common.Message.m1/plan.Task.t1`;
const ASSISTANT = `${tenantUrn("acme")}/common.Assistant.a1`;
let calls = 0;
const ctx = (): ToolContext => ({
  taskId: TASK,
  actor: ASSISTANT,
  callId: `call_${++calls}`,
  allowedTools: ["fetch_page", "status", "metadata", "big"], // the default policy asks for them
});

let server: Server;
let port: number;
const received: string[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    received.push(req.url ?? "");
    if (req.url?.startsWith("/big")) {
      res.writeHead(200, { "content-type": "text/plain" });
      const chunk = Buffer.alloc(64 * 1024, 120);
      let written = 0;
      const write = () => {
        while (written < 64 * 1024 * 1024 && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", write);
        }
        res.end();
      };
      write();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" }).end("secret internal page");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

let world: ToolWorld;
let open: ToolPort[] = [];
beforeEach(async () => {
  world = await openToolWorld("arbor-outbound-tools-");
  received.length = 0;
});
afterEach(async () => {
  for (const t of open) await (t as { close?: () => Promise<void> }).close?.();
  open = [];
  await world.close();
});

const TOOLS = () => ({
  tools: {
    fetch_page: { kind: "builtin", function: "http_request", allowedHosts: ["localhost"] },
    status: {
      kind: "http",
      url: `http://localhost:${port}/status`,
      method: "GET",
      description: "Service status",
      parameters: { type: "object", properties: {} },
    },
    metadata: {
      kind: "http",
      url: "http://169.254.169.254/latest/meta-data/",
      method: "GET",
      description: "Instance metadata",
      parameters: { type: "object", properties: {} },
    },
    big: {
      kind: "http",
      url: `http://127.0.0.1:${port}/big`,
      method: "GET",
      description: "A large report",
      parameters: { type: "object", properties: {} },
    },
  },
});

async function tools(outbound?: typeof LOOPBACK_ALLOWED): Promise<ToolPort> {
  const t = await openTools(
    world.rt,
    { embedder, index: world.index },
    { toolsConfig: TOOLS(), ...(outbound ? { outbound } : {}) },
  );
  open.push(t);
  return t;
}

describe("tools behind the outbound guard", () => {
  it("http_request and HTTP tools do not reach an allowed name that resolves to loopback, nor a metadata address", async () => {
    const t = await tools({ ...LOOPBACK_ALLOWED, allow: [] });
    const page = await t.execute("fetch_page", { url: `http://localhost:${port}/admin` }, ctx());
    expect(page).toMatchObject({
      isError: true,
      content: expect.stringMatching(
        new RegExp(
          `^fetch_page failed: outbound call to http://localhost:${port}/admin refused: localhost resolves to .*, a loopback address`,
        ),
      ),
    });
    const status = await t.execute("status", {}, ctx());
    expect(status).toMatchObject({ isError: true, content: expect.stringMatching(/loopback address/) });
    const metadata = await t.execute("metadata", {}, ctx());
    expect(metadata).toMatchObject({
      isError: true,
      content: expect.stringMatching(/169\.254\.169\.254, a cloud metadata address/),
    });
    expect(received).toEqual([]);
    const audit = await world.rt.audit.forTask(TASK);
    expect(audit.filter((r) => r.stage === "failed").map((r) => `${r.tool}:${r.reason}`)).toEqual([
      "fetch_page:error",
      "status:error",
      "metadata:error",
    ]);
  });

  it("the operator's allow list lets them through", async () => {
    const t = await tools({ ...LOOPBACK_ALLOWED, allow: ["127.0.0.1", "::1"] });
    const page = await t.execute("fetch_page", { url: `http://localhost:${port}/admin` }, ctx());
    expect(page.content).toBe("HTTP 200\nsecret internal page");
    expect(received).toEqual(["/admin"]);
  });

  it("a response past the bound is a clean failed call saying so", { timeout: 60_000 }, async () => {
    const t = await tools({ ...LOOPBACK_ALLOWED, maxResponseBytes: 1024 * 1024 });
    const result = await t.execute("big", {}, ctx());
    expect(result).toEqual({
      isError: true,
      content:
        `big failed: http://127.0.0.1:${port}/big: response larger than 1048576 bytes; reading stopped there ` +
        "and the connection was closed (the bound is ARBOR_OUTBOUND_MAX_RESPONSE_BYTES)",
    });
    const audit = await world.rt.audit.forTask(TASK);
    expect(audit.map((r) => r.stage)).toEqual(["requested", "failed"]);
  });
});
