import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { Harness } from "../scenarios/engine-harness.ts";
import { arborCli } from "../support/arbor-process.ts";

/**
 * The tools guide's MCP example (docs/tools.md): the server it names is in examples/mcp-venues/, its
 * registry entry starts it as written (from the checkout), and its tools answer, listed and called
 * with the SDK's own client and through Arbor's MCP binding (`arbor tools ls`, ExecuteTool).
 */
const root = join(import.meta.dirname, "../..");
type Entry = { kind: string; transport: string; command: string; args: string[]; namespace?: string };
const registry = JSON.parse(readFileSync(join(root, "examples/mcp-venues/tools.json"), "utf8")) as {
  tools: Record<string, Entry>;
};

/** The tool registry of the tools guide (docs/tools.md): its first JSON block. */
function readmeTools(): Record<string, Entry> {
  const guide = readFileSync(join(root, "docs/tools.md"), "utf8");
  const block = /```json\n([\s\S]*?)```/.exec(guide)?.[1];
  return (JSON.parse(block as string) as { tools: Record<string, Entry> }).tools;
}

const SCOUT: AssistantDefinition[] = [
  {
    name: "Scout",
    id: "scout",
    purpose: "Find venues for team events",
    tools: ["lookup_venue", "venue_details"],
  },
];

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "arbor-mcp-example-"));
});
afterAll(() => rm(dataDir, { recursive: true, force: true }));

describe("the tools guide's MCP example server", () => {
  it("is the server the guide's registry entry starts, and the example registry's", () => {
    const { lookup_venue } = readmeTools();
    expect(lookup_venue).toEqual({
      kind: "mcp",
      transport: "stdio",
      command: "node",
      args: ["examples/mcp-venues/server.ts"],
    });
    for (const entry of Object.values(registry.tools)) expect(entry).toMatchObject(lookup_venue as Entry);
  });

  it("answers the SDK's client, started as the guide's entry says, from the checkout", async () => {
    const entry = readmeTools().lookup_venue as Entry;
    const client = new Client({ name: "arbor-test", version: "1.0.0" });
    await client.connect(
      new StdioClientTransport({ command: entry.command, args: entry.args, cwd: root, stderr: "pipe" }),
    );
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["lookup_venue", "venue_details"]);
      expect(tools.find((t) => t.name === "lookup_venue")?.inputSchema).toMatchObject({
        type: "object",
        required: ["city", "people"],
      });

      const found = await client.callTool({
        name: "lookup_venue",
        arguments: { city: "lisbon", people: 12 },
      });
      expect(found.isError).toBeFalsy();
      // Cheapest first; a venue too small for 20 is left out below.
      expect(found.content).toEqual([
        {
          type: "text",
          text: "LX Factory Loft (lis-lx-factory-loft): Lisbon, seats 16, 70 EUR per person per day\nCasa do Rio (lis-casa-do-rio): Lisbon, seats 40, 95 EUR per person per day",
        },
      ]);
      const bigger = await client.callTool({
        name: "lookup_venue",
        arguments: { city: "Lisbon", people: 20 },
      });
      expect(JSON.stringify(bigger.content)).not.toContain("LX Factory");
      const none = await client.callTool({ name: "lookup_venue", arguments: { city: "Oslo", people: 5 } });
      expect(JSON.stringify(none.content)).toContain(
        "No venue in Oslo seats 5. Cities with venues: Lisbon, Porto.",
      );

      const details = await client.callTool({ name: "venue_details", arguments: { id: "por-armazem" } });
      expect(JSON.stringify(details.content)).toContain("Rooms: a warehouse hall for 25, one breakout room.");
      const unknown = await client.callTool({ name: "venue_details", arguments: { id: "nowhere" } });
      expect(unknown.isError).toBe(true);
      // Arguments outside the schema are refused by the server's SDK, as a tool error.
      const invalid = await client.callTool({
        name: "lookup_venue",
        arguments: { city: "Lisbon", people: 0 },
      });
      expect(invalid.isError).toBe(true);
    } finally {
      await client.close();
    }
  });

  it("is listed by `arbor tools ls` with ARBOR_TOOLS_FILE=examples/mcp-venues/tools.json, as the guide runs it", async () => {
    // From the checkout (every child of the kit runs there): the tools file's path is relative to it.
    const { stdout, stderr } = await arborCli(["tools", "ls", "--namespace", "venues"], {
      ...process.env,
      ARBOR_DATA_DIR: dataDir,
      ARBOR_TOOLS_FILE: "examples/mcp-venues/tools.json",
      ARBOR_URL: "",
      NO_COLOR: "1",
    });
    expect(stderr).toBe("");
    const rows = stdout.split("\n").filter((l) => l.startsWith("venues "));
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(/^venues\s+lookup_venue\s+mcp\s+Finds venues in a city that seat a team/);
    expect(rows[1]).toMatch(/^venues\s+venue_details\s+mcp\s+The rooms and price of one venue/);
    expect(stdout).toContain("2 tools in namespace venues");
  });

  describe("through Arbor's MCP binding", () => {
    let h: Harness | undefined;
    afterEach(async () => {
      await h?.close();
      h = undefined;
    });

    it("an assistant's call of lookup_venue reaches the server and its answer comes back", async () => {
      // The example registry as it is; the cwd Arbor's own process has when run from the checkout.
      const tools = Object.fromEntries(
        Object.entries(registry.tools).map(([name, e]) => [name, { ...e, cwd: root }]),
      );
      h = await Harness.create({ script: [], assistants: SCOUT, toolsConfig: { tools } });
      const [lookup] = h.engine.deps.tools.describe(["lookup_venue"]);
      expect(lookup).toMatchObject({
        kind: "mcp",
        namespace: "venues",
        parameters: { required: ["city", "people"] },
      });
      const context = {
        taskId: "cld:common.Tenant.acme/plan.Task.t",
        actor: "cld:common.Tenant.acme/common.Assistant.scout",
        callId: "c1",
        allowedTools: ["lookup_venue", "venue_details"],
      };
      const result = await h.engine.deps.tools.execute(
        "lookup_venue",
        { city: "Porto", people: 20 },
        context,
      );
      expect(result).toEqual({
        content: "Armazém do Douro (por-armazem): Porto, seats 25, 80 EUR per person per day",
      });
      const refused = await h.engine.deps.tools.execute(
        "lookup_venue",
        { city: "Porto" },
        { ...context, callId: "c2" },
      );
      expect(refused.isError).toBe(true);
      expect(refused.content).toMatch(/Invalid arguments for lookup_venue/);
    });
  });
});
