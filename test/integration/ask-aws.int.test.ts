import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { FakeBedrock } from "../peers/fake-bedrock.ts";
import type { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { planningModel } from "../peers/planning-model.ts";
import { type AwsFunctions, startAwsFunctions } from "./aws-functions.ts";
import { type AwsWorld, EventBridgePlayer, startAwsWorld } from "./aws-world.ts";

/**
 * An assistant that asks a person (`ask_person`), through the functions the engine stack deploys:
 * the tool function lists `ask_person` (ListTools, with `engine: "ask_person"`), the turn step asks
 * (it never sends the call to the tool function), the leaf waits in awaiting_user, the answer comes
 * through the API function (a wrong one refused with 400), and the leaf resumes with the answer.
 * Every event delivered again, in reverse, changes nothing.
 */
const TENANT = "acme";
const BUS = "arbor-ask";
const TOOL_FUNCTION = "arbor-ask-tools";
const root = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });

const CLERK = { purpose: "Book meetings, asking a person what is missing", tools: ["ask_person"] };
const TEAM = { assistants: [{ name: "Clerk", id: "clerk", ...CLERK }] };
const QUESTION = {
  title: "Which date should the offsite be on?",
  validation: { regex: "^\\d{4}-\\d{2}-\\d{2}$", required: true },
};

const model = planningModel({
  plan: { name: "Book the offsite", ...CLERK, tools: undefined },
  evaluation: { reason: "booked" },
  leaf: ({ toolResult }) =>
    toolResult === undefined
      ? { toolCalls: [{ name: "ask_person", arguments: QUESTION }] }
      : { content: `booked: ${(JSON.parse(toolResult) as { text: string }).text}` },
});

describe("ask_person through the AWS handlers, offline", () => {
  let world: AwsWorld;
  let bedrock: FakeBedrock;
  let toolPeer: LambdaInvokePeer;
  let fns: AwsFunctions;
  const as = (key: string) => fns.as(key);
  const enc = (urn: string) => encodeURIComponent(urn);
  const { deliver, drain, events } = new EventBridgePlayer(
    () => world,
    BUS,
    () => fns.steps,
  );

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-ask",
      bus: BUS,
      model,
      env: {
        ARBOR_STAGE: "ask",
        ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
        ARBOR_PUBLIC_URL: "https://abc123.execute-api.us-east-1.amazonaws.com",
      },
    });
    bedrock = world.bedrock as FakeBedrock;
    fns = await startAwsFunctions(world, TOOL_FUNCTION, [root.entry]);
    toolPeer = fns.toolPeer;
  });

  afterAll(async () => {
    await fns?.close();
    await world?.close();
  });

  it("asks on the turn step, takes the answer through the API function, and the leaf resumes with it", async () => {
    const admin = as(root.key);
    expect((await admin.put("/v1/admin/team", TEAM)).status).toBe(200);
    const made = await admin.post("/v1/admin/keys", { id: "user_ada" });
    const ada = as(String(made.json.key));
    const sent = await ada.post("/v1/messages", { text: "Book the offsite" });
    expect(sent.status).toBe(202);
    const rootTask = String(sent.json.rootTaskId);
    await drain();

    // The tool function lists ask_person as the engine's to handle.
    const listed = toolPeer.invocations
      .map((i) => i.payload as { op: string })
      .filter((p) => p.op === "ListTools");
    expect(listed.length).toBeGreaterThan(0);
    const waiting = await ada.get(`/v1/tasks/${enc(rootTask)}/interactions`);
    const questions = waiting.json.interactions as { urn: string; kind: string; purpose: string }[];
    expect(questions.map((q) => [q.kind, q.purpose])).toEqual([["input", "request_info"]]);
    expect(((await ada.get(`/v1/tasks/${enc(rootTask)}`)).json.task as { status: string }).status).toBe(
      "awaiting_user",
    );
    const answer = `/v1/interactions/${enc(questions[0]?.urn ?? "")}/answer`;
    const wrong = await ada.post(answer, { inputValue: "soon" });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error?.code).toBe("VALIDATION");
    expect((await ada.post(answer, { inputValue: "2026-07-03" })).status).toBe(204);
    await drain();

    const result = await ada.get(`/v1/tasks/${enc(rootTask)}`);
    expect(result.json).toMatchObject({ task: { status: "done" }, output: "booked: 2026-07-03" });
    // The call never went to the tool function: the step handled it.
    const executed = toolPeer.invocations
      .map((i) => i.payload as { op: string; tool?: string })
      .filter((p) => p.op === "ExecuteTool");
    expect(executed).toEqual([]);

    // Every event again, newest first: no new question, no model call, the same result.
    const modelCalls = bedrock.calls.length;
    await deliver([...events()].reverse());
    await drain();
    expect(bedrock.calls.length).toBe(modelCalls);
    expect((await ada.get(`/v1/tasks/${enc(rootTask)}`)).json).toMatchObject({
      task: { status: "done" },
      output: "booked: 2026-07-03",
    });
    expect((await ada.get(`/v1/tasks/${enc(rootTask)}/interactions`)).json.interactions).toEqual([]);
  });
});
