import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import { withMeta } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import { loadConfig } from "../../shared/runtime/config.ts";
import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import type { LocalRuntime } from "../../shared/runtime/local/local.ts";
import { DEFAULT_TOOLS, loadToolsConfig, parseToolsConfig } from "../../shared/tools/service/config.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import {
  ASSISTANT,
  ctx,
  embedder,
  guardedFetch,
  type LocalHttpServer,
  listenLocal,
  openToolWorld,
  TASK,
  type ToolWorld,
} from "./tool-world.ts";

/**
 * The tool service on the local runtime: real stores, a real HTTP server for the HTTP tools, the
 * audit log read back from the event log.
 */

/** A local HTTP server: /echo returns what it got, /slow never answers, /fail answers 503. */
let server: LocalHttpServer;
let base: string;
const received: { method: string; url: string; body: string }[] = [];
beforeAll(async () => {
  server = await listenLocal(async (req: IncomingMessage, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    received.push({ method: req.method ?? "", url: req.url ?? "", body });
    if (req.url?.startsWith("/slow")) return; // never answers
    if (req.url?.startsWith("/fail")) {
      res.writeHead(503).end("try later");
      return;
    }
    if (req.url?.startsWith("/redirect")) {
      res.writeHead(302, { location: "http://evil.example/steal" }).end();
      return;
    }
    if (req.url?.startsWith("/big")) {
      res.end("x".repeat(50_000));
      return;
    }
    res.setHeader("content-type", "application/json");
    res.end(
      JSON.stringify({ method: req.method, url: req.url, body, key: req.headers["x-api-key"] ?? null }),
    );
  });
  base = server.base;
});
afterAll(() => server.close());

let world: ToolWorld;
let dir: string;
let rt: LocalRuntime;
let index: LocalVectorIndex;
beforeEach(async () => {
  world = await openToolWorld("arbor-tools-");
  ({ dir, rt, index } = world);
  received.length = 0;
});
afterEach(() => world.close());

function service(config: unknown, options: { fetch?: typeof fetch; maxInlineChars?: number } = {}) {
  return ToolService.open(
    config,
    world.options({
      defaultTimeoutMs: 2_000,
      ...(options.fetch ? { fetch: options.fetch } : {}),
      ...(options.maxInlineChars ? { maxInlineChars: options.maxInlineChars } : {}),
    }),
  );
}
const audit = async () => (await rt.audit.forTask(TASK)).map((r) => r.stage);

describe("tool configuration", () => {
  it("names the bad field", () => {
    const problems = (config: unknown) => {
      try {
        parseToolsConfig(config);
        return [];
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        return (e as ValidationError).issues;
      }
    };
    expect(problems({ tools: { fetch: { kind: "builtin", function: "http_request" } } })).toEqual([
      "tools.fetch.allowedHosts: http_request needs the hosts it may reach",
    ]);
    expect(problems({ tools: { "bad name!": { kind: "builtin", function: "sha256" } } }).join()).toMatch(
      /tools\.bad name!.*tool names are 1-64/,
    );
    expect(problems({ tools: { x: { kind: "builtin", function: "rm_rf" } } }).join()).toMatch(
      /tools\.x\.function/,
    );
    expect(
      problems({
        tools: { w: { kind: "http", url: "ftp://h/x", description: "d", parameters: { type: "object" } } },
      }).join(),
    ).toMatch(/tools\.w\.url/);
    expect(
      problems({
        tools: { w: { kind: "http", url: `${base}/echo`, description: "d", parameters: {} } },
      }).join(),
    ).toMatch(/tools\.w\.parameters: must be a JSON Schema with "type": "object"/);
    expect(problems({ tools: { s: { kind: "builtin", function: "sha256", extra: 1 } } }).join()).toMatch(
      /extra/,
    );
    expect(problems(DEFAULT_TOOLS)).toEqual([]);
  });

  it("reads the registry from ARBOR_TOOLS_FILE, saying what is wrong with a bad one", async () => {
    const file = join(dir, "tools.json");
    expect(loadToolsConfig(undefined)).toBe(DEFAULT_TOOLS);
    await writeFile(file, '{"tools": {"h": {"kind": "builtin", "function": "md5"}}}');
    expect(loadConfig({ ARBOR_TOOLS_FILE: file })).toMatchObject({ toolsFile: file });
    expect(Object.keys(loadToolsConfig(file).tools)).toEqual(["h"]);
    await writeFile(file, "{ not json");
    expect(() => loadToolsConfig(file)).toThrow(
      /ARBOR_TOOLS_FILE .*tools\.json cannot be read as JSON.*fix the file or unset/,
    );
    await writeFile(file, '{"tools": {"h": {"kind": "builtin", "function": "http_request"}}}');
    expect(() => loadToolsConfig(file)).toThrow(/ARBOR_TOOLS_FILE .*tools\.json is not valid/);
  });

  it("refuses parameters that are not a valid JSON Schema when the tool is configured", async () => {
    await expect(
      service({
        tools: {
          w: {
            kind: "http",
            url: `${base}/echo`,
            description: "d",
            parameters: { type: "object", properties: { a: { type: "nonsense" } } },
          },
        },
      }),
    ).rejects.toThrow(/tools\.w: the parameters are not a valid JSON Schema/);
  });
});

describe("ListTools and ExecuteTool", () => {
  it("lists JSON Schemas, stores them as Tool resources, and runs the hash tools of seeds/001", async () => {
    const tools = await service(DEFAULT_TOOLS);
    const names = tools.list().map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["sha256", "md5", "search_resources", "read_resource"]));
    const [sha] = tools.describe(["sha256", "no_such_tool"]);
    expect(sha).toMatchObject({
      kind: "builtin",
      pure: true,
      risky: false,
      parameters: { type: "object", required: ["text"] },
    });

    const { urns } = await tools.register("acme");
    const stored = await rt.resources.getAs("common.Tool", urns[0] as string);
    expect(stored?.function.parameters).toMatchObject({ type: "object" });

    const text = "Arbor";
    expect((await tools.execute("sha256", { text }, ctx())).content).toBe(
      createHash("sha256").update(text).digest("hex"),
    );
    expect((await tools.execute("md5", { text }, ctx())).content).toBe(
      createHash("md5").update(text).digest("hex"),
    );
    // Pure calls: their outcome is on record (nothing outside changed, so no "requested" first).
    expect(await audit()).toEqual(["completed", "completed"]);
  });

  it("turns invalid arguments into an error the model can read and an audit record; the tool does not run", async () => {
    let ran = 0;
    const tools = await service(
      {
        tools: {
          weather: {
            kind: "http",
            url: `${base}/echo`,
            description: "Weather for a city",
            parameters: {
              type: "object",
              properties: { city: { type: "string", minLength: 1 }, days: { type: "integer", maximum: 7 } },
              required: ["city"],
              additionalProperties: false,
            },
          },
        },
      },
      {
        fetch: async (...a) => {
          ran++;
          return fetch(...a);
        },
      },
    );
    const result = await tools.execute("weather", { days: 9, mood: "sunny" }, ctx());
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /Invalid arguments for weather: .*city: is required.*mood: is not a parameter.*days: must be <= 7/,
    );
    expect(ran).toBe(0);
    const records = await rt.audit.forTask(TASK);
    expect(records.map((r) => r.stage)).toEqual(["failed"]); // it never started
    expect(records[0]).toMatchObject({ reason: "invalid_arguments", tool: "weather", actor: ASSISTANT });
    expect((await tools.execute("nope", {}, ctx())).content).toMatch(/Unknown tool "nope"/);
  });

  it("calls an HTTP endpoint with the configured headers; a failure status is the tool failing", async () => {
    const tools = await service({
      tools: {
        echo: {
          kind: "http",
          url: `${base}/echo`,
          method: "POST",
          headers: { "x-api-key": "k1" },
          description: "Echo",
          parameters: { type: "object", properties: { q: { type: "string" } } },
        },
        down: { kind: "http", url: `${base}/fail`, description: "Down", parameters: { type: "object" } },
      },
    });
    const ok = await tools.execute("echo", { q: "hello" }, ctx());
    expect(JSON.parse(ok.content)).toMatchObject({ method: "POST", body: '{"q":"hello"}', key: "k1" });
    // The settings (the API key) are not part of what the model or the Tool resource sees.
    expect(JSON.stringify(tools.describe(["echo"]))).not.toMatch(/k1/);
    const down = await tools.execute("down", {}, ctx());
    expect(down).toEqual({ content: "down failed: down answered HTTP 503: try later", isError: true });
    // Not pure: the call was on record before it ran, then failed.
    expect((await audit()).slice(-2)).toEqual(["requested", "failed"]);
  });

  it("ends a call that takes longer than its timeout", async () => {
    const tools = await service({
      tools: {
        slow: {
          kind: "http",
          url: `${base}/slow`,
          description: "Slow",
          parameters: { type: "object" },
          timeoutMs: 200,
        },
      },
    });
    const started = Date.now();
    const result = await tools.execute("slow", {}, ctx());
    expect(result).toEqual({ content: "slow did not finish within 200 ms", isError: true });
    expect(Date.now() - started).toBeLessThan(2_000);
    const [, failed] = await rt.audit.forTask(TASK);
    expect(failed).toMatchObject({ reason: "timeout" });
  });

  it("stores a large result as a resource and passes its URN; read_resource reads it on", async () => {
    const tools = await service(
      {
        tools: {
          ...DEFAULT_TOOLS.tools,
          big: {
            kind: "http",
            url: `${base}/big`,
            method: "GET",
            description: "Big",
            parameters: { type: "object" },
          },
        },
      },
      { maxInlineChars: 10_000 },
    );
    const result = await tools.execute("big", {}, ctx());
    const urn = /stored as (\S+)\. Its start/.exec(result.content)?.[1] as string;
    expect(urn).toMatch(new RegExp(`^${TASK.replaceAll(".", "\\.")}/common\\.Message\\.`));
    expect(result.content.length).toBeLessThan(3_000);
    const stored = await rt.resources.getAs("common.Message", urn);
    expect(stored?.content).toHaveLength(50_000);
    const [, completed] = await rt.audit.forTask(TASK);
    expect(completed).toMatchObject({ resultUrn: urn });

    const piece = await tools.execute("read_resource", { urn, offset: 49_990, length: 100 }, ctx());
    expect(piece.content).toBe("x".repeat(10));
    const other = await tools.execute("read_resource", { urn: `${tenantUrn("other")}/common.Tool.t` }, ctx());
    expect(other).toMatchObject({
      isError: true,
      content: expect.stringMatching(/belongs to tenant other, not to acme/),
    });
  });

  it("search_resources finds a tenant's resources by URN prefix and by meaning, never another tenant's", async () => {
    const conv = withMeta({ type: "common.Conversation", name: "c", parent: tenantUrn("acme") });
    await rt.resources.put({ meta: conv, title: "Offsite" });
    const msg = withMeta({ type: "common.Message", name: "venue", parent: conv.id });
    await rt.resources.put({ meta: msg, role: "assistant", content: "The venue in Lisbon holds 40 people." });
    const [vector] = await embedder.embed(["The venue in Lisbon holds 40 people."]);
    await index.upsert([{ key: msg.id, vector: vector as Float32Array, type: "common.Message" }]);
    const tools = await service(DEFAULT_TOOLS);

    const byPrefix = await tools.execute("search_resources", { urnPrefix: conv.id }, ctx());
    expect(byPrefix.content).toContain(msg.id);
    const byMeaning = await tools.execute(
      "search_resources",
      { query: "how many people fit the Lisbon venue" },
      ctx(),
    );
    expect(byMeaning.content).toContain("holds 40 people");
    const elsewhere = await tools.execute("search_resources", { urnPrefix: tenantUrn("other") }, ctx());
    expect(elsewhere).toMatchObject({
      isError: true,
      content: expect.stringMatching(/belongs to tenant other, not to acme/),
    });
    const both = await tools.execute("search_resources", { query: "x", urnPrefix: conv.id }, ctx());
    expect(both).toMatchObject({
      isError: true,
      content: expect.stringMatching(/either query or urnPrefix/),
    });
  });

  it("http_request reaches allowed hosts only, and does not follow redirects off the list", async () => {
    const asked: string[] = [];
    const spy: typeof fetch = async (input, init) => {
      asked.push(String(input));
      return guardedFetch(input, init);
    };
    const tools = await service(
      {
        tools: {
          fetch_page: {
            kind: "builtin",
            function: "http_request",
            allowedHosts: ["127.0.0.1", "*.example.org"],
          },
        },
      },
      { fetch: spy },
    );
    const ok = await tools.execute("fetch_page", { url: `${base}/echo?x=1` }, ctx());
    expect(ok.content).toMatch(/^HTTP 200\n/);
    for (const url of [
      "http://169.254.169.254/latest/meta-data",
      "http://localhost/x",
      "https://example.org.evil.com/",
    ]) {
      const denied = await tools.execute("fetch_page", { url }, ctx());
      expect(denied).toMatchObject({
        isError: true,
        content: expect.stringMatching(/is not an allowed host/),
      });
    }
    // The outbound guard follows no redirect: the call fails, saying where it pointed.
    const moved = await tools.execute("fetch_page", { url: `${base}/redirect` }, ctx());
    expect(moved).toMatchObject({
      isError: true,
      content: expect.stringMatching(
        /answered HTTP 302, a redirect to http:\/\/evil\.example\/steal, and Arbor follows no redirects/,
      ),
    });
    // The others were never requested, and the redirect was not followed.
    expect(asked).toEqual([`${base}/echo?x=1`, `${base}/redirect`]);
    expect((await tools.execute("fetch_page", { url: "file:///etc/passwd" }, ctx())).isError).toBe(true);
  });
});

describe("policy on tool calls (the default Cedar policy)", () => {
  it("runs only tools the assistant is configured with, for its own tenant; a denial is audited", async () => {
    const tools = await ToolService.open(DEFAULT_TOOLS, world.options({ policy: defaultPolicy() }));
    const allowed = await tools.execute("sha256", { text: "a" }, { ...ctx(), allowedTools: ["sha256"] });
    expect(allowed.isError).toBeUndefined();
    const notListed = await tools.execute("md5", { text: "a" }, { ...ctx(), allowedTools: ["sha256"] });
    expect(notListed).toMatchObject({
      isError: true,
      content: expect.stringMatching(/^Policy does not allow .* to call md5 \(decision dec_/),
    });
    const otherTenant = `${tenantUrn("beta")}/plan.Task.t9`;
    const crossing = await tools.execute(
      "sha256",
      { text: "a" },
      { ...ctx(), taskId: otherTenant, allowedTools: ["sha256"] },
    );
    expect(crossing.isError).toBe(true);
    const records = await rt.audit.forTask(TASK);
    expect(records.at(-1)).toMatchObject({ tool: "md5", stage: "failed", reason: "denied" });
  });
});

describe("fuzzing tool arguments", () => {
  it("any arguments give a result, never an exception; a tool runs only with valid ones", async () => {
    let ran = 0;
    const tools = await service(
      {
        tools: {
          ...DEFAULT_TOOLS.tools,
          fetch_page: { kind: "builtin", function: "http_request", allowedHosts: ["api.example.com"] },
          echo: {
            kind: "http",
            url: "http://api.example.com/echo",
            description: "Echo",
            parameters: {
              type: "object",
              properties: { q: { type: "string", maxLength: 10 } },
              required: ["q"],
              additionalProperties: false,
            },
          },
        },
      },
      {
        fetch: async () => {
          ran++;
          return new Response("ok");
        },
      },
    );
    const names = [...tools.list().map((t) => t.name), "unknown"];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...names),
        fc.dictionary(fc.string(), fc.jsonValue()),
        async (name, args) => {
          const before = ran;
          const result = await tools.execute(name, args as Record<string, unknown>, ctx());
          expect(typeof result.content).toBe("string");
          if (name === "echo" && ran > before) {
            expect(Object.keys(args)).toEqual(["q"]);
            expect(typeof args.q === "string" && args.q.length <= 10).toBe(true);
          }
          if (name === "fetch_page" && ran > before)
            expect(new URL(String(args.url)).hostname).toBe("api.example.com");
        },
      ),
      { numRuns: 300 },
    );
  });
});
