import { DataFactory } from "n3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { StateGraphStore } from "../../shared/graph/state-graph-store.ts";
import type { PolicyEngine } from "../../shared/ports/policy.ts";
import type { ToolContext } from "../../shared/ports/tools.ts";
import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { ASSISTANT, ctx, openToolWorld, TASK, type ToolWorld } from "./tool-world.ts";

/**
 * The graph tools through the tool service, as an assistant's calls reach them: arguments checked
 * against the schema, the tenant taken from the task's URN, the policy deciding tool.call and then
 * graph.read / graph.write. Hostile input gets an error the model can read and changes nothing.
 */
const GRAPH_TOOLS = ["graph_add", "graph_query", "graph_remove"];
const CONFIG = {
  tools: Object.fromEntries(GRAPH_TOOLS.map((n) => [n, { kind: "builtin", function: n }])),
};
const BETA_TASK = `${tenantUrn("beta")}/common.Conversation.c9/common.Message.m9/plan.Task.t9`;
const BETA_ASSISTANT = `${tenantUrn("beta")}/common.Assistant.b1`;
const as = (c: ToolContext): ToolContext => ({ ...c, allowedTools: GRAPH_TOOLS });
const acme = () => as(ctx());
const beta = () => as({ ...ctx(BETA_TASK), actor: BETA_ASSISTANT });

const ADA = "https://example.org/people/ada";
const { namedNode, variable } = DataFactory;
const fact = (s: string, p: string, o: unknown) => ({ subject: s, predicate: p, object: o });

let world: ToolWorld;
let graph: StateGraphStore;
let tools: ToolService;
beforeEach(async () => {
  world = await openToolWorld("arbor-graph-tools-");
  graph = new StateGraphStore(world.rt.state);
  tools = await ToolService.open(CONFIG, world.options({ graph, policy: defaultPolicy() }));
});
afterEach(() => world.close());

const results = (content: string) => JSON.parse(content).results as Record<string, unknown>[];

describe("graph tools within a tenant", () => {
  it("adds facts, finds them joined on variables, and removes them; blank nodes get IRIs of their call", async () => {
    const added = await tools.execute(
      "graph_add",
      {
        triples: [
          fact(ADA, "schema:name", { value: "Ada Lovelace", language: "en" }),
          fact(ADA, "schema:birthDate", { value: "1815-12-10", datatype: "xsd:date" }),
          fact(ADA, "schema:author", "_:note"),
          fact("_:note", "schema:name", { value: "Note G" }),
          fact(TASK, "schema:about", ADA),
        ],
      },
      acme(),
    );
    expect(added.isError).toBeUndefined();
    expect(added.content).toMatch(
      /^Added 5 triples; the graph holds 5\.\nBlank nodes: _:note = urn:arbor:genid:[0-9a-f]{32}$/,
    );
    const found = await tools.execute(
      "graph_query",
      {
        patterns: [
          fact("?who", "schema:name", "?name"),
          fact("?who", "schema:author", "?work"),
          fact("?work", "schema:name", "?title"),
        ],
      },
      acme(),
    );
    expect(found.isError).toBeUndefined();
    expect(results(found.content)).toEqual([
      {
        who: ADA,
        name: { value: "Ada Lovelace", language: "en" },
        work: expect.stringMatching(/^urn:arbor:genid:/),
        title: { value: "Note G" },
      },
    ]);
    const typed = await tools.execute(
      "graph_query",
      { patterns: [fact(ADA, "schema:birthDate", "?d")] },
      acme(),
    );
    expect(results(typed.content)).toEqual([{ d: { value: "1815-12-10", datatype: "xsd:date" } }]);
    const about = await tools.execute(
      "graph_query",
      { patterns: [fact("?task", "schema:about", ADA)] },
      acme(),
    );
    expect(results(about.content)).toEqual([{ task: TASK }]);
    const removed = await tools.execute("graph_remove", { patterns: [fact(ADA, "?p", "?o")] }, acme());
    expect(removed.content).toBe("Removed 3 triples; the graph holds 2.");
  });

  it("a repeated call (same idempotency key) adds nothing new, its blank nodes the same", async () => {
    const context = { ...acme(), callId: "call_same" };
    const args = { triples: [fact("_:x", "schema:name", { value: "X" })] };
    const first = await tools.execute("graph_add", args, context);
    const again = await tools.execute("graph_add", args, context);
    expect(again.content).toMatch(/^Added 0 triples \(1 already there\); the graph holds 1\./);
    expect(again.content.split("\n")[1]).toBe(first.content.split("\n")[1]);
    expect(await graph.count("acme")).toBe(1);
  });
});

describe("graph tools across tenants", () => {
  it("an assistant of another tenant sees nothing of this tenant's graph, and cannot name its resources", async () => {
    await tools.execute(
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "acme's secret" })] },
      acme(),
    );
    const everything = { patterns: [fact("?s", "?p", "?o")] };
    expect(results((await tools.execute("graph_query", everything, beta())).content)).toEqual([]);
    const naming = await tools.execute(
      "graph_query",
      { patterns: [fact(`${tenantUrn("acme")}/common.Assistant.a1`, "?p", "?o")] },
      beta(),
    );
    expect(naming).toMatchObject({ isError: true });
    expect(naming.content).toMatch(/is not a resource of your tenant \(beta\)/);
    // No argument names a tenant: the task's URN does.
    const chosen = await tools.execute("graph_query", { ...everything, tenant: "acme" }, beta());
    expect(chosen).toMatchObject({ isError: true });
    expect(chosen.content).toMatch(/tenant/);
    // An assistant of acme acting in a beta task: refused (tool.call, then the graph's own boundary).
    const crossing = await tools.execute("graph_query", everything, { ...beta(), actor: ASSISTANT });
    expect(crossing).toMatchObject({ isError: true });
    const unguarded = await ToolService.open(CONFIG, world.options({ graph })); // no policy at all
    const still = await unguarded.execute("graph_query", everything, { ...beta(), actor: ASSISTANT });
    expect(still).toMatchObject({ isError: true });
    expect(still.content).toMatch(
      /may not read the graph of tenant beta: it belongs to tenant beta, not to acme/,
    );
    expect(await graph.count("beta")).toBe(0);
    expect(await graph.count("acme")).toBe(1);
  });

  it("a call whose actor is not an assistant's URN is of no tenant: refused, whatever task it names", async () => {
    const unguarded = await ToolService.open(CONFIG, world.options({ graph })); // the boundary alone
    const everything = { patterns: [fact("?s", "?p", "?o")] };
    for (const actor of ["user_mallory", "system_engine", "cld:common.Tenant.acme/bad"]) {
      for (const [tool, args] of [
        ["graph_query", everything],
        ["graph_add", { triples: [fact(ADA, "schema:name", { value: "planted" })] }],
      ] as const) {
        const refused = await unguarded.execute(tool, args, { ...beta(), actor });
        expect([actor, tool, refused.isError]).toEqual([actor, tool, true]);
        expect(refused.content).not.toMatch(/planted|Added/);
      }
    }
    expect(await graph.count("beta")).toBe(0);
  });

  it("the policy decides graph.read / graph.write on its own: a call the tool policy allows is still refused the graph", async () => {
    // The default policy, except that it refuses the graph actions (as an operator's policy may).
    const base = defaultPolicy();
    const noGraph: PolicyEngine = {
      engine: base.engine,
      revision: "no-graph",
      decide: async (input) => {
        const decision = await base.decide(input);
        return input.action.startsWith("graph.") ? { ...decision, allow: false } : decision;
      },
    };
    const refusing = await ToolService.open(CONFIG, world.options({ graph, policy: noGraph }));
    const read = await refusing.execute("graph_query", { patterns: [fact("?s", "?p", "?o")] }, acme());
    expect(read).toMatchObject({ isError: true });
    expect(read.content).toMatch(/may not read the graph of tenant acme \(policy decision dec_/);
    const write = await refusing.execute(
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "x" })] },
      acme(),
    );
    expect(write.content).toMatch(/may not write the graph of tenant acme \(policy decision dec_/);
    expect(await graph.count("acme")).toBe(0);
  });
});

describe("hostile input changes nothing", () => {
  const ok = fact(ADA, "schema:name", { value: "Ada" });
  const cases: [string, string, Record<string, unknown>, RegExp][] = [
    ["a relative IRI", "graph_add", { triples: [fact("ada", "schema:name", "x:y")] }, /is not an IRI/],
    [
      "an IRI with a space",
      "graph_add",
      { triples: [fact("https://exa mple.org/", "schema:name", ADA)] },
      /may not/,
    ],
    [
      "an IRI that closes its brackets",
      "graph_add",
      { triples: [fact("<urn:a> <urn:b> <urn:c", "schema:p", ADA)] },
      /not an IRI/,
    ],
    ["an empty IRI", "graph_add", { triples: [fact("<>", "schema:name", ADA)] }, /is empty/],
    [
      "a malformed cld: URN",
      "graph_add",
      { triples: [fact("cld:common.Tenant.acme/nope", "schema:name", ADA)] },
      /Invalid URN/,
    ],
    [
      "a literal as subject",
      "graph_add",
      { triples: [fact({ value: "x" } as unknown as string, "schema:name", ADA)] },
      /subject/,
    ],
    [
      "a 1 MB literal",
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "x".repeat(1_000_000) })] },
      /value/,
    ],
    [
      "a 9,000-character literal",
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "y".repeat(9_000) })] },
      /value/,
    ],
    [
      "10,000 triples in one call",
      "graph_add",
      { triples: Array.from({ length: 10_000 }, () => ok) },
      /triples/,
    ],
    [
      "a variable in an add",
      "graph_add",
      { triples: [fact("?s", "schema:name", ADA)] },
      /graph_add takes no variables/,
    ],
    [
      "a bad language tag",
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "x", language: "en_GB!" })] },
      /not a language tag/,
    ],
    [
      "a wrong typed literal",
      "graph_add",
      { triples: [fact(ADA, "schema:age", { value: "ten", datatype: "xsd:integer" })] },
      /not a valid xsd:integer/,
    ],
    [
      "language and datatype",
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "x", language: "en", datatype: "xsd:string" })] },
      /not both/,
    ],
    [
      "a lone surrogate",
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "\ud800" })] },
      /well-formed Unicode/,
    ],
    [
      "a query of 50 patterns",
      "graph_query",
      { patterns: Array.from({ length: 50 }, (_, i) => fact(`?s${i}`, "?p", "?o")) },
      /patterns/,
    ],
    [
      "a blank node in a query",
      "graph_query",
      { patterns: [fact("_:b", "?p", "?o")] },
      /names nothing outside the call/,
    ],
    ["a bad variable name", "graph_query", { patterns: [fact("?1bad", "?p", "?o")] }, /not a variable name/],
    [
      "a limit of a million",
      "graph_query",
      { patterns: [fact("?s", "?p", "?o")], limit: 1_000_000 },
      /limit/,
    ],
  ];
  // Another tenant's resource, in every position a term takes, and in every tool; and its scheme in
  // capitals (the same IRI to anyone who reads it, RFC 3986), which the tenant check once let by.
  const BETA_CONVERSATION = `${tenantUrn("beta")}/common.Conversation.c9`;
  for (const urn of [
    BETA_CONVERSATION,
    `CLD:${BETA_CONVERSATION.slice(4)}`,
    `Cld:${BETA_CONVERSATION.slice(4)}`,
  ]) {
    const refused = /not a resource of your tenant \(acme\)|write the scheme/;
    cases.push(
      [
        `${urn.slice(0, 4)} of beta as subject`,
        "graph_add",
        { triples: [fact(urn, "schema:p", ADA)] },
        refused,
      ],
      [`${urn.slice(0, 4)} of beta as predicate`, "graph_add", { triples: [fact(ADA, urn, ADA)] }, refused],
      [
        `${urn.slice(0, 4)} of beta as object`,
        "graph_add",
        { triples: [fact(ADA, "schema:p", urn)] },
        refused,
      ],
      [
        `${urn.slice(0, 4)} of beta in <...>`,
        "graph_add",
        { triples: [fact(ADA, "schema:p", `<${urn}>`)] },
        refused,
      ],
      [
        `${urn.slice(0, 4)} of beta as a datatype`,
        "graph_add",
        { triples: [fact(ADA, "schema:p", { value: "x", datatype: urn })] },
        refused,
      ],
      [
        `${urn.slice(0, 4)} of beta in a query`,
        "graph_query",
        { patterns: [fact("?s", "?p", urn)] },
        refused,
      ],
      [
        `${urn.slice(0, 4)} of beta in a removal`,
        "graph_remove",
        { patterns: [fact(urn, "?p", "?o")] },
        refused,
      ],
    );
  }
  cases.push(
    [
      "a control character in an IRI",
      "graph_add",
      { triples: [fact(`${ADA}\u0001`, "schema:p", ADA)] },
      /may not/,
    ],
    ["a C1 control in an IRI", "graph_add", { triples: [fact(`${ADA}\u0085`, "schema:p", ADA)] }, /may not/],
    ["a > inside an IRI", "graph_add", { triples: [fact(`<${ADA}>x>`, "schema:p", ADA)] }, /may not/],
    [
      "a lone surrogate in an IRI",
      "graph_add",
      { triples: [fact(`${ADA}\udc00`, "schema:p", ADA)] },
      /well-formed/,
    ],
    [
      "an 8,001-character literal",
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "z".repeat(8_001) })] },
      /value/,
    ],
  );
  for (const [what, tool, args, message] of cases) {
    it(`${what}: a clear error, nothing written`, async () => {
      await tools.execute("graph_add", { triples: [ok] }, acme());
      const result = await tools.execute(tool, args, acme());
      expect(result).toMatchObject({ isError: true });
      expect(result.content).toMatch(message);
      expect(await graph.count("acme")).toBe(1);
    });
  }

  it("an 8,000-character literal of control characters, quotes and astral text is stored and returned exactly", async () => {
    const value = `${'\u0000\u0001\u001f\u007f\u2028"\\\n\r\t>😀'.repeat(727)}ab`.slice(0, 8_000);
    expect(value).toHaveLength(8_000);
    const added = await tools.execute(
      "graph_add",
      { triples: [fact(ADA, "schema:text", { value })] },
      acme(),
    );
    expect(added.isError ?? false).toBe(false);
    // Read back through a fresh store (loaded from its N-Triples records, not from memory).
    const found = await new StateGraphStore(world.rt.state).query("acme", [
      { subject: namedNode(ADA), predicate: namedNode("https://schema.org/text"), object: variable("v") },
    ]);
    expect(found.bindings.map((b) => b.get("v")?.value)).toEqual([value]);
  });

  it("one bad triple among good ones: none is added", async () => {
    const triples = [
      ...Array.from({ length: 49 }, (_, i) => fact(`${ADA}/${i}`, "schema:name", { value: "n" })),
      fact("bad", "p", "q"),
    ];
    const result = await tools.execute("graph_add", { triples }, acme());
    expect(result).toMatchObject({ isError: true });
    expect(await graph.count("acme")).toBe(0);
  });

  it("injection-like text in a literal is one literal, stored and returned exactly", async () => {
    const nasty = [
      '"x" .\n<urn:evil> <urn:p> "y" .',
      "'); DROP TABLE records; --",
      "} UNION { ?s ?p ?o } #",
      "\u0000\u0007 null and bell",
      "<script>alert(1)</script>",
    ];
    await tools.execute(
      "graph_add",
      { triples: nasty.map((value, i) => fact(`${ADA}/${i}`, "schema:text", { value })) },
      acme(),
    );
    expect(await graph.count("acme")).toBe(nasty.length);
    const back = await tools.execute("graph_query", { patterns: [fact("?s", "schema:text", "?t")] }, acme());
    const values = results(back.content).map((r) => (r.t as { value: string }).value);
    expect(values.sort()).toEqual([...nasty].sort());
    const evil = await tools.execute("graph_query", { patterns: [fact("urn:evil", "?p", "?o")] }, acme());
    expect(results(evil.content)).toEqual([]);
  });

  it("past the tenant's cap: refused, saying how many it holds and what to do", async () => {
    const capped = await ToolService.open(
      CONFIG,
      world.options({
        graph: new StateGraphStore(world.rt.state, { maxTriples: 2 }),
        policy: defaultPolicy(),
      }),
    );
    await capped.execute("graph_add", { triples: [ok, fact(ADA, "schema:name", { value: "B" })] }, acme());
    const over = await capped.execute(
      "graph_add",
      { triples: [fact(ADA, "schema:name", { value: "C" })] },
      acme(),
    );
    expect(over).toMatchObject({ isError: true });
    expect(over.content).toMatch(
      /holds 2 triples; adding 1 would pass its cap of 2: remove some first \(graph_remove\)/,
    );
  });
});
