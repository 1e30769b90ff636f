import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { ResourceStore } from "../../shared/store/resource-store.ts";
import { DEFAULT_TOOLS, type ToolsConfig } from "../../shared/tools/service/config.ts";
import { registryHash, toolUrn } from "../../shared/tools/service/tool-registry.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { openToolWorld, type ToolWorld } from "./tool-world.ts";

/**
 * Tools as resources across processes: each ToolService below is one process (a restart, another
 * Lambda instance) opened on one data folder, as `arbor serve` after a configuration change, or
 * two tool function instances at once. What a tenant's listing shows is what its stored Tool
 * resources say, registered from the configuration of whoever registered last, whole.
 */
let world: ToolWorld;
const opened: ToolService[] = [];

beforeEach(async () => {
  world = await openToolWorld("arbor-tool-registry-");
});
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
  await world.close();
});

async function process_(config: ToolsConfig, resources?: ResourceStore): Promise<ToolService> {
  const service = await ToolService.open(
    config,
    world.options(resources ? { resources } : {}),
    "the test's configuration",
  );
  opened.push(service);
  return service;
}

const builtin = (
  fn: "sha256" | "md5" | "word_count" | "calculator",
  extra: Record<string, unknown> = {},
) => ({
  kind: "builtin" as const,
  function: fn,
  ...extra,
});
const BEFORE: ToolsConfig = {
  tools: { sha256: builtin("sha256"), md5: builtin("md5"), word_count: builtin("word_count") },
};
const AFTER: ToolsConfig = {
  tools: {
    sha256: builtin("sha256", { namespace: "hashing" }), // changed: a namespace of its own
    word_count: builtin("word_count"), // unchanged
    calculator: builtin("calculator", { description: "Arithmetic" }), // added; md5 removed
  },
};
/** The world's resources, each call made to wait a little: racing registrations interleave. */
function interleaved(): ResourceStore {
  const real = world.rt.resources;
  const pause = () => new Promise((r) => setTimeout(r, Math.floor(Math.random() * 4)));
  return {
    children: async (...a: Parameters<ResourceStore["children"]>) => {
      await pause();
      return real.children(...a);
    },
    put: async (r: unknown) => {
      await pause();
      return real.put(r);
    },
    delete: async (urn: string) => {
      await pause();
      return real.delete(urn);
    },
  } as unknown as ResourceStore;
}

const names = async (s: ToolService, tenant: string, namespace?: string) =>
  (await s.listTools(tenant, namespace === undefined ? {} : { namespace })).map((d) => d.name);
const stored = async (tenant: string) =>
  (await world.rt.resources.children(tenantUrn(tenant), "common.Tool")).map((r) => r.meta.name).sort();

describe("a changed configuration", () => {
  it("shows in the next listing: a tool added, changed and removed; only what changed is rewritten", async () => {
    const before = await process_(BEFORE);
    expect(await names(before, "acme")).toEqual(["md5", "sha256", "word_count"]);
    expect(await names(before, "acme", "builtin")).toEqual(["md5", "sha256", "word_count"]);

    // The next process has another configuration: its first need of the tenant registers it.
    const after = await process_(AFTER);
    const registration = await after.register("acme");
    expect(registration).toMatchObject({ written: ["calculator", "sha256"], deleted: ["md5"] });
    expect(await names(after, "acme")).toEqual(["calculator", "sha256", "word_count"]);
    expect(await names(after, "acme", "hashing")).toEqual(["sha256"]);
    expect(await names(after, "acme", "builtin")).toEqual(["calculator", "word_count"]);
    expect(await world.rt.resources.get(toolUrn("acme", "md5"))).toBeUndefined();
    const calculator = await world.rt.resources.getAs("common.Tool", toolUrn("acme", "calculator"));
    expect(calculator?.function.description).toBe("Arithmetic");

    // The old process lists what is stored (it does not answer from its own configuration)...
    expect(await names(before, "acme")).toEqual(["calculator", "sha256", "word_count"]);
    // ...and a third process with the same configuration as the last finds nothing to do.
    const again = await process_(AFTER);
    expect(await again.register("acme")).toMatchObject({ written: [], deleted: [] });
    // The registration record holds the set's hash: later registrations read nothing else.
    const record = await world.rt.state.get<{ hash: string; tools: string[] }>("toolregistry#acme");
    expect(record?.data).toEqual({
      hash: registryHash(after.list()),
      tools: ["calculator", "sha256", "word_count"],
    });
  });

  it("registers each tenant on its own: another tenant's resources are neither read nor touched", async () => {
    const before = await process_(BEFORE);
    await before.register("acme");
    const after = await process_(AFTER);
    expect(await names(after, "beta")).toEqual(["calculator", "sha256", "word_count"]);
    expect(await stored("acme")).toEqual(["md5", "sha256", "word_count"]);
  });
});

describe("registrations that race", () => {
  it("two processes with one configuration end with that set", async () => {
    const [a, b] = [await process_(DEFAULT_TOOLS), await process_(DEFAULT_TOOLS)];
    for (const tenant of ["r1", "r2", "r3"]) {
      await Promise.all([a.register(tenant), b.register(tenant), a.listTools(tenant), b.listTools(tenant)]);
      expect(await stored(tenant)).toEqual(Object.keys(DEFAULT_TOOLS.tools).sort());
    }
  });

  it("two processes with different configurations (a deploy under way) end with one set whole, never a mix", async () => {
    const sets = [Object.keys(BEFORE.tools).sort(), Object.keys(AFTER.tools).sort()];
    for (let i = 0; i < 8; i++) {
      const tenant = `mix${i}`;
      // Half of them from a third set first (each has something to delete), half from nothing.
      if (i % 2)
        await (
          await process_({ tools: { md5: builtin("md5"), calculator: builtin("calculator") } })
        ).register(tenant);
      // Every store call of the two takes its turn with the other's (as two processes' would).
      const [x, y] = [await process_(BEFORE, interleaved()), await process_(AFTER, interleaved())];
      await Promise.all([x.register(tenant), y.register(tenant)]);
      const final = await stored(tenant);
      expect(sets).toContainEqual(final);
      // The record says which set it is.
      const record = await world.rt.state.get<{ tools: string[] }>(`toolregistry#${tenant}`);
      expect(record?.data.tools).toEqual(final);
    }
  });
});

describe("a registration cut short", () => {
  it("leaves no record; the next registration, here or in another process, completes the set", async () => {
    const real = world.rt.resources;
    let puts = 0;
    let failing = true;
    // The store fails on the second write, as a crash in the middle of a registration would.
    const flaky = {
      children: real.children.bind(real),
      delete: real.delete.bind(real),
      getAs: real.getAs.bind(real),
      get: real.get.bind(real),
      put: async (r: unknown) => {
        if (failing && ++puts === 2) throw new Error("the disk went away");
        return real.put(r);
      },
    } as unknown as ResourceStore;
    const cut = await process_(BEFORE, flaky);
    await expect(cut.listTools("acme")).rejects.toThrow(/the disk went away/);
    expect(await world.rt.state.get("toolregistry#acme")).toBeUndefined();
    expect((await stored("acme")).length).toBe(1);

    // Another process completes it...
    const other = await process_(BEFORE);
    expect((await other.register("acme")).written).toHaveLength(2);
    expect(await stored("acme")).toEqual(["md5", "sha256", "word_count"]);
    // ...and the process whose registration failed tries again (it did not remember the failure).
    failing = false;
    expect(await names(cut, "acme")).toEqual(["md5", "sha256", "word_count"]);
  });
});

describe("hostile input", () => {
  it("a description longer than a resource keeps (an MCP server's, say) is cut in the resource, not refused", async () => {
    const long = "d".repeat(10_000);
    const s = new ToolService(
      [
        {
          descriptor: {
            name: "wordy",
            kind: "mcp",
            description: long,
            parameters: { type: "object" },
            risky: false,
            pure: false,
          },
          check: () => [],
          run: async () => "ok",
        },
      ],
      world.options(),
    );
    opened.push(s);
    const [listed] = await s.listTools("acme");
    expect(listed?.description).toHaveLength(4000);
    expect(listed?.namespace).toBe("mcp");
    expect(s.describe(["wordy"])[0]?.description).toBe(long); // what the model is shown
  });

  it("a tenant id that cannot be in a URN, or a bad namespace in the configuration, is refused", async () => {
    const s = await process_(BEFORE);
    await expect(s.listTools("../beta")).rejects.toThrow(/is not a tenant id/);
    await expect(s.register("acme/common.Tool.x")).rejects.toThrow(/is not a tenant id/);
    await expect(s.listTools("ácme")).rejects.toThrow(/is not a tenant id/);
    expect(await world.rt.resources.descendantUrns("cld:common.Tenant.acme")).toEqual([]);
    await expect(process_({ tools: { sha256: builtin("sha256", { namespace: "../etc" }) } })).rejects.toThrow(
      /tools\.sha256\.namespace: a namespace is 1-64 of a-z 0-9 _ -/,
    );
    await expect(process_({ tools: { sha256: builtin("sha256", { namespace: "Ħash" }) } })).rejects.toThrow(
      /namespace/,
    );
  });
});
