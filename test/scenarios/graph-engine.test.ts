import { join } from "node:path";
import { DataFactory } from "n3";
import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import type { Actor } from "../../shared/domain/events.ts";
import { SimulatedCrash } from "../../shared/engine/context.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { graphStoreOf } from "../../shared/graph/state-graph-store.ts";
import type { ToolPort } from "../../shared/ports/tools.ts";
import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import { DEFAULT_TOOLS } from "../../shared/tools/service/config.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { firstUser, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";
import { embedder } from "./tool-world.ts";

/**
 * The graph tool end to end, on the local runtime with the scripted model: an assistant adds what
 * it learns in one request; a later request of the same tenant finds it, also after the process
 * restarts; a request of another tenant finds nothing, and cannot name the first tenant's resources.
 */
const LIBRARIAN: AssistantDefinition[] = [
  {
    name: "Librarian",
    id: "librarian",
    purpose: "Remember and recall facts about people and their work",
    tools: ["graph_add", "graph_query", "graph_remove"],
  },
];
const BETA_PERSON: Actor = { id: "user_bea", kind: "human" };
const ADA = "https://example.org/people/ada";
const LIBRARIAN_URN = "cld:common.Tenant.acme/common.Assistant.librarian";

const ADD = {
  triples: [
    { subject: ADA, predicate: "schema:name", object: { value: "Ada Lovelace", language: "en" } },
    { subject: ADA, predicate: "schema:author", object: "_:note" },
    { subject: "_:note", predicate: "schema:name", object: { value: "Note G" } },
    { subject: LIBRARIAN_URN, predicate: "schema:knowsAbout", object: ADA },
  ],
};
const QUERY = {
  patterns: [
    { subject: "?who", predicate: "schema:name", object: "?name" },
    { subject: "?who", predicate: "schema:author", object: "?work" },
    { subject: "?work", predicate: "schema:name", object: "?title" },
  ],
};
/** Beta's assistant tries to name acme's assistant: refused by the terms, before any read. */
const SNOOP = { patterns: [{ subject: LIBRARIAN_URN, predicate: "?p", object: "?o" }] };

/** Each request is one task; its leaf makes one graph call, then answers with what the tool said. */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) {
    const text = firstUser(r);
    const name = /Remember/.test(text) ? "Remember Ada" : /Snoop/.test(text) ? "Snoop" : "Recall Ada";
    return planOf({ name, purpose: text.slice(0, 100) });
  }
  if (isEvaluation(r)) return pass();
  const told = [...r.messages].reverse().find((m) => m.role === "tool");
  if (told && "content" in told) return { content: `The graph says: ${told.content}` };
  const name = taskName(r);
  if (name === "Remember Ada") return { toolCalls: [{ name: "graph_add", arguments: ADD }] };
  if (name === "Snoop") return { toolCalls: [{ name: "graph_query", arguments: SNOOP }] };
  return { toolCalls: [{ name: "graph_query", arguments: QUERY }] };
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function answerOf(h: Harness, submitted: Promise<{ rootTaskId: string }>): Promise<string> {
  const { rootTaskId } = await submitted;
  await h.idle();
  const { view, output } = await h.engine.result(rootTaskId);
  expect(view?.status).toBe("done");
  return output ?? "";
}

const resultsIn = (answer: string) =>
  JSON.parse(answer.replace(/^The graph says: /, "")).results as Record<string, unknown>[];

describe("the graph tool in the engine", () => {
  it("a later request of the tenant finds what an earlier one added, also after a restart; another tenant finds nothing", async () => {
    // One assistant per tenant: it takes every task, however its description compares.
    h = await Harness.create({ script, assistants: LIBRARIAN, settings: { electionThreshold: -1 } });
    await h.engine.registerAssistants("beta", LIBRARIAN);

    const added = await answerOf(h, h.submit("Remember: Ada Lovelace wrote Note G"));
    expect(added).toMatch(
      /^The graph says: Added 4 triples; the graph holds 4\.\nBlank nodes: _:note = urn:arbor:genid:/,
    );

    const expected = [
      {
        who: ADA,
        name: { value: "Ada Lovelace", language: "en" },
        work: expect.stringMatching(/^urn:arbor:genid:[0-9a-f]{32}$/),
        title: { value: "Note G" },
      },
    ];
    expect(resultsIn(await answerOf(h, h.submit("Recall what Ada wrote")))).toEqual(expected);

    // Another tenant: its own (empty) graph; naming acme's resources is refused.
    const betaAnswer = await answerOf(
      h,
      h.engine.submit({ tenant: "beta", text: "Recall what Ada wrote", actor: BETA_PERSON, mode: "eager" }),
    );
    expect(resultsIn(betaAnswer)).toEqual([]);
    const snoop = await answerOf(
      h,
      h.engine.submit({ tenant: "beta", text: "Snoop on acme", actor: BETA_PERSON, mode: "eager" }),
    );
    expect(snoop).toMatch(/is not a resource of your tenant \(beta\)/);

    // A new process on the same data folder.
    await h.restart();
    expect(resultsIn(await answerOf(h, h.submit("Recall what Ada wrote, again")))).toEqual(expected);
    const graph = graphStoreOf(h.rt.state);
    expect(await graph.count("acme")).toBe(4);
    expect(await graph.count("beta")).toBe(0);
  });
});

describe("a crash after graph_add ran, before its result was recorded", () => {
  it("the call runs again after the restart and adds nothing twice: same triples, same blank node IRI", async () => {
    let crashing = true;
    let runs = 0;
    // The tools of each process: graph_add really runs; in the first process, the process then
    // "dies" before the engine can record the result.
    const tools = async (rt: Harness["rt"], dataDir: string): Promise<ToolPort> => {
      const service = await ToolService.open(DEFAULT_TOOLS, {
        resources: rt.resources,
        audit: rt.audit,
        clock: () => new Date("2026-06-01T09:00:00.000Z"),
        embedder,
        index: await LocalVectorIndex.open(join(dataDir, "tool-vectors"), {
          embedderId: embedder.id,
          dimension: embedder.dimension,
        }),
        fetch: async () => new Response("no network here", { status: 599 }),
        graph: graphStoreOf(rt.state),
        policy: defaultPolicy(),
      });
      const execute = service.execute.bind(service);
      service.execute = async (name, args, context) => {
        const result = await execute(name, args, context);
        if (name === "graph_add") runs++;
        if (name === "graph_add" && crashing) throw new SimulatedCrash("after-write", "graph_add");
        return result;
      };
      return service;
    };
    h = await Harness.create({
      script,
      assistants: LIBRARIAN,
      settings: { electionThreshold: -1 },
      bus: { maxAttempts: 1 },
      tools,
    });
    const { rootTaskId } = await h.submit("Remember: Ada Lovelace wrote Note G");
    await h.idle();
    expect(runs).toBe(1);
    const graph = () => graphStoreOf(h?.rt.state as Harness["rt"]["state"]);
    const { variable: v } = DataFactory;
    const after = await graph().query("acme", [{ subject: v("s"), predicate: v("p"), object: v("o") }]);
    expect(after.bindings).toHaveLength(4);
    const blank = (b: typeof after) =>
      b.bindings.map((x) => x.get("s")?.value).find((v) => v?.startsWith("urn:arbor:genid:"));
    const firstBlank = blank(after);

    crashing = false;
    await h.restart();
    for (let round = 0; round < 10; round++) {
      await h.idle();
      const view = await h.rt.tasks.view(rootTaskId);
      if (view && ["done", "failed", "canceled"].includes(view.status)) break;
      for (const p of await h.pending(rootTaskId))
        await h.engine.respond(p.meta.id, { selectedOptionId: "approve" }, PERSON);
      h.advance(10 * 60_000);
      await h.engine.watchdog(60_000);
    }
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(runs).toBe(2);
    expect(output).toMatch(/^The graph says: Added 0 triples \(4 already there\); the graph holds 4\./);
    expect(output).toContain(`_:note = ${firstBlank}`);
    expect(await graph().count("acme")).toBe(4);
  });
});
