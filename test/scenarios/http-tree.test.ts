import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { parentUrn } from "../../shared/domain/urn.ts";
import { fetchApi } from "../support/http.ts";
import { Harness } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";
import { GENERALIST, GENERALIST_URN, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

/**
 * GET /v1/tasks/:urn/tree over real HTTP: a lazy request's pending approval, an eager tree of three
 * levels (status, assistant and score, tokens), the tenant boundary (404), the owner policy (403),
 * and the bound on its size (maxTasks, truncated).
 */
const carl = newApiKey({ id: "user_carl", kind: "human", tenant: "acme", roles: [] });
const script: ScriptFunction = (r) => {
  if (isPlan(r))
    return planOf({
      name: "Offsite",
      purpose: "Plan the offsite",
      subtasks: [
        {
          name: "Venue",
          purpose: "Find a venue",
          subtasks: [
            { name: "Lisbon", purpose: "Check Lisbon" },
            { name: "Porto", purpose: "Check Porto" },
          ],
        },
        { name: "Agenda", purpose: "Write the agenda" },
      ],
    });
  if (isEvaluation(r)) return pass();
  return { content: `done: ${taskName(r)}` };
};

let h: Harness;
let server: RunningServer;
beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  await h.engine.registerAssistants("beta", GENERALIST);
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acme.entry, beta.entry, carl.entry] }),
  });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

interface Node {
  taskId: string;
  parentTaskId: string | null;
  title: string;
  status: string;
  assistant: { urn: string; name: string; score: number } | null;
  usage: { tokens: number; costUsd: number };
  pendingInteractions: { urn: string; purpose: string; title: string; links: { answer: string } }[];
  childCount: number;
  children: Node[];
}
interface TreeBody {
  tree: Node;
  taskCount: number;
  truncated: boolean;
  error: { code: string };
}

const call = (method: string, path: string, key: string, body?: unknown) =>
  fetchApi<TreeBody>(server.url, method, path, key, body);
const treeOf = (key: string, urn: string, query = "") =>
  call("GET", `/v1/tasks/${encodeURIComponent(urn)}/tree${query}`, key);
const submit = async (key: string, body: Record<string, unknown>) =>
  (await call("POST", "/v1/messages", key, body)).json as unknown as { rootTaskId: string };

/** Polls the tree until `done(root)` holds (or 20 s pass). */
async function pollTree(key: string, urn: string, done: (root: Node) => boolean): Promise<TreeBody> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await treeOf(key, urn);
    expect(res.status).toBe(200);
    if (done(res.json.tree) || Date.now() > deadline) return res.json;
    await new Promise((r) => setTimeout(r, 20));
  }
}
const all = (n: Node): Node[] => [n, ...n.children.flatMap(all)];

describe("GET /v1/tasks/:urn/tree", () => {
  it("shows a lazy request's pending plan approval, with the link that answers it", async () => {
    const { rootTaskId } = await submit(acme.key, { text: "Plan the offsite, ask me first", mode: "lazy" });
    const first = await treeOf(acme.key, rootTaskId); // accepted, maybe not planned yet: still a tree
    expect(first.status).toBe(200);
    expect(first.json.tree.taskId).toBe(rootTaskId);
    const body = await pollTree(acme.key, rootTaskId, (r) => r.pendingInteractions.length > 0);
    expect(body.tree).toMatchObject({ status: "awaiting_user", parentTaskId: null });
    const [approval] = body.tree.pendingInteractions;
    expect(approval).toMatchObject({ purpose: "approve_plan" });
    expect(approval?.links.answer).toBe(`/v1/interactions/${encodeURIComponent(approval?.urn ?? "")}/answer`);
    const answered = await call("POST", approval?.links.answer ?? "", acme.key, {
      selectedOptionId: "approve",
    });
    expect(answered.status).toBe(204);
    const done = await pollTree(acme.key, rootTaskId, (r) => r.status === "done");
    expect(done.tree.pendingInteractions).toEqual([]);
  });

  it("shows an eager tree of three levels: statuses, assistants with scores, tokens; bounded by maxTasks", async () => {
    const { rootTaskId } = await submit(acme.key, { text: "Plan the offsite" });
    const body = await pollTree(acme.key, rootTaskId, (r) => r.status === "done");
    expect(body).toMatchObject({ taskCount: 5, truncated: false });
    const nodes = all(body.tree);
    expect(nodes.map((n) => n.title).sort()).toEqual(["Agenda", "Lisbon", "Offsite", "Porto", "Venue"]);
    for (const n of nodes) {
      expect(n.status).toBe("done");
      expect(n.assistant).toMatchObject({ urn: GENERALIST_URN, name: "generalist" });
      expect(typeof n.assistant?.score).toBe("number");
      expect(n.usage.tokens).toBeGreaterThan(0);
    }
    const venue = body.tree.children.find((c) => c.title === "Venue") as Node;
    expect(venue).toMatchObject({ parentTaskId: rootTaskId, childCount: 2 });
    expect(venue.children.map((c) => c.parentTaskId)).toEqual([venue.taskId, venue.taskId]);
    // The root's tokens roll up its subtree's.
    expect(body.tree.usage.tokens).toBeGreaterThanOrEqual(venue.usage.tokens);

    // The bound: breadth first, at most maxTasks tasks, and the cut is said.
    const cut = await treeOf(acme.key, rootTaskId, "?maxTasks=3");
    expect(cut.status).toBe(200);
    expect(cut.json).toMatchObject({ taskCount: 3, truncated: true });
    expect(
      all(cut.json.tree)
        .map((n) => n.title)
        .sort(),
    ).toEqual(["Agenda", "Offsite", "Venue"]);
    expect(cut.json.tree.children.find((c) => c.title === "Venue")).toMatchObject({
      childCount: 2,
      children: [],
    });
    for (const q of ["?maxTasks=0", "?maxTasks=100000", "?maxTasks=many", "?depth=2"])
      expect((await treeOf(acme.key, rootTaskId, q)).json.error.code).toBe("VALIDATION");

    // Another tenant's URN is answered as a made-up one; another user of the tenant is refused.
    const missing = `${parentUrn(parentUrn(rootTaskId) ?? "")}/common.Message.m/plan.Task.nope`;
    expect(await treeOf(beta.key, rootTaskId)).toMatchObject({
      status: 404,
      json: { error: { code: "NOT_FOUND" } },
    });
    expect(await treeOf(acme.key, missing)).toMatchObject({
      status: 404,
      json: { error: { code: "NOT_FOUND" } },
    });
    expect(await treeOf(carl.key, rootTaskId)).toMatchObject({
      status: 403,
      json: { error: { code: "FORBIDDEN" } },
    });
  });
});
