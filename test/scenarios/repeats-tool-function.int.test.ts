import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { lambdaToolFunction } from "../../shared/adapters/aws/tool-function-invoke.ts";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import { SimulatedCrash } from "../../shared/engine/context.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { ToolPort } from "../../shared/ports/tools.ts";
import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import { createLocalRuntime, type LocalRuntime } from "../../shared/runtime/local/local.ts";
import { ToolFunctionPort } from "../../shared/tools/service/tool-function-port.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { embedder, guardedFetch } from "./tool-world.ts";

/**
 * The rules for a call that a crash interrupted (repeats.test.ts), with the tools in their own
 * function, as on AWS: the engine's steps call the tool function (functions/tool.ts, its own
 * runtime on the same data) through ToolFunctionPort, the real Lambda client and the local Invoke
 * peer. The step's process dies while its Invoke is out, or after the call ended but before its
 * result was kept; the tool function lives on. A risky call is never run again on its old approval;
 * a call that is not risky runs again by itself with the same Idempotency-Key.
 */
const FUNCTION = "arbor-tools";
interface Post {
  url: string;
  headers: IncomingHttpHeaders;
}
let server: Server;
let base: string;
const posts: Post[] = [];
const held: ServerResponse[] = [];
let hold = false;
beforeAll(async () => {
  server = createServer(async (req, res) => {
    for await (const _ of req); // the body
    posts.push({ url: req.url ?? "", headers: req.headers });
    if (hold) held.push(res);
    else res.writeHead(200, { "content-type": "text/plain" }).end("ok, done");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const httpTool = (path: string, risky: boolean) => ({
  kind: "http",
  url: `${base}${path}`,
  risky,
  timeoutMs: 120_000,
  description: `POST ${path}`,
  parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"] },
});
const WORKER: AssistantDefinition[] = [
  { name: "Mailer", id: "mailer", purpose: "Invite the team by email", tools: ["send_email", "notify"] },
];
const scriptFor =
  (tool: string): ScriptFunction =>
  (r) => {
    if (isPlan(r)) return planOf({ name: "Invite", purpose: "Invite the team by email" });
    if (isEvaluation(r)) return pass();
    const told = r.messages.find((m) => m.role === "tool");
    return told
      ? { content: `noted: ${told.content}` }
      : { toolCalls: [{ name: tool, arguments: { to: "team@example.com" } }] };
  };

/** The tool function: its own runtime on the data folder, its tool service, behind the Invoke peer. */
interface ToolFunction {
  rt: LocalRuntime;
  service: ToolService;
  handler: ToolHandler;
  peer: LambdaInvokePeer;
}
let fn: ToolFunction | undefined;
async function toolFunction(dataDir: string): Promise<ToolFunction> {
  const rt = createLocalRuntime({ mode: "local", tenant: "acme", dataDir, durable: false });
  const index = await LocalVectorIndex.open(join(dataDir, "tool-function-vectors"), {
    embedderId: embedder.id,
    dimension: embedder.dimension,
  });
  const service = await ToolService.open(
    { tools: { send_email: httpTool("/send", true), notify: httpTool("/notify", false) } },
    {
      resources: rt.resources,
      audit: rt.audit,
      untilDurable: () => rt.untilDurable(),
      policy: defaultPolicy(),
      clock: () => new Date(),
      embedder,
      index,
      fetch: guardedFetch,
    },
  );
  const handler = createToolHandler({ service });
  const peer = await LambdaInvokePeer.start({ [FUNCTION]: (event) => handler(event) });
  return { rt, service, handler, peer };
}

/** The engine's side, anew in each process: a port to the tool function. */
const viaToolFunction = async (rt: LocalRuntime, dataDir: string): Promise<ToolPort> => {
  fn ??= await toolFunction(dataDir);
  return ToolFunctionPort.open({
    toolFunction: lambdaToolFunction({ client: fn.peer.client(), ownsClient: true, functionName: FUNCTION }),
    audit: rt.audit,
    clock: () => new Date(),
  });
};

let h: Harness | undefined;
beforeEach(() => {
  posts.length = 0;
  hold = false;
});
afterEach(async () => {
  for (const res of held.splice(0)) res.destroy();
  await h?.close();
  h = undefined;
  if (fn) {
    await fn.peer.close();
    await fn.handler.close();
    await fn.service.close();
    await fn.rt.close();
  }
  fn = undefined;
});

/** The step's process dies in the next call: while its Invoke is out, or once the call has ended. */
function dieIn(tools: ToolPort, when: "in-flight" | "after") {
  const execute = tools.execute.bind(tools);
  tools.execute = async (name, args, context) => {
    const running = execute(name, args, context);
    if (when === "after") await running;
    else {
      running.catch(() => undefined); // its Invoke ends with a process that is gone
      while (posts.length === 0) await new Promise((r) => setTimeout(r, 5));
    }
    throw new SimulatedCrash("after-write", "tool");
  };
}

async function start(tool: string, before?: (harness: Harness) => void) {
  h = await Harness.create({
    script: scriptFor(tool),
    assistants: WORKER,
    tools: viaToolFunction,
    bus: { maxAttempts: 1 },
  });
  before?.(h);
  const { rootTaskId } = await h.submit("Invite the team");
  await h.idle();
  return rootTaskId;
}

async function restart(harness: Harness) {
  await harness.restart();
  harness.advance(10 * 60_000);
  await harness.engine.watchdog(60_000);
  await harness.idle();
}

describe("a call that a crash interrupted, with the tools in the tool function", () => {
  it("risky, the step gone while its Invoke is out: asked again, outcome unknown; a denial is final", async () => {
    const root = await start("send_email");
    const harness = h as Harness;
    const [first] = await harness.pending(root);
    dieIn(harness.engine.deps.tools, "in-flight");
    hold = true;
    await harness.engine.respond(first?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await harness.idle();
    expect(posts).toHaveLength(1);

    await restart(harness);
    expect(posts).toHaveLength(1); // not again on the old approval
    const [again] = await harness.pending(root);
    expect(again?.meta.name).toBe(`${first?.meta.name}-attempt-2`);
    expect(again?.display.title).toBe("Run send_email again? The outcome of attempt 1 is unknown");
    await harness.engine.respond(again?.meta.id as string, { selectedOptionId: "deny" }, PERSON);
    await harness.idle();
    const { view, output } = await harness.engine.result(root);
    expect(view?.status).toBe("done");
    expect(output).toMatch(
      /^noted: A person declined to run send_email again\. Its earlier attempt may or may not/,
    );
    expect(posts).toHaveLength(1);
    // Each Invoke was one synchronous call, none retried by the client.
    expect(fn?.peer.invocations.every((i) => i.invocationType === "RequestResponse")).toBe(true);
  }, 60_000);

  it("risky, completed but its result lost: asked again, saying so; approved, it runs with the same key", async () => {
    const root = await start("send_email");
    const harness = h as Harness;
    const [first] = await harness.pending(root);
    dieIn(harness.engine.deps.tools, "after");
    await harness.engine.respond(first?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await harness.idle();
    expect(posts).toHaveLength(1);

    await restart(harness);
    const [again] = await harness.pending(root);
    expect(again?.display.title).toBe("Run send_email again? Attempt 1 completed, its result was lost");
    await harness.engine.respond(again?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await harness.idle();
    expect((await harness.engine.result(root)).output).toBe("noted: ok, done");
    expect(posts.map((p) => p.headers["arbor-attempt"])).toEqual(["1", "2"]);
    expect(posts[1]?.headers["idempotency-key"]).toBe(posts[0]?.headers["idempotency-key"]);
  }, 60_000);

  it("not risky: runs again by itself, with the same Idempotency-Key and the next attempt, both on record", async () => {
    const root = await start("notify", (harness) => dieIn(harness.engine.deps.tools, "after"));
    const harness = h as Harness;
    expect(posts).toHaveLength(1);
    await restart(harness);
    expect((await harness.engine.result(root)).output).toBe("noted: ok, done");
    expect(posts.map((p) => [p.url, p.headers["arbor-attempt"]])).toEqual([
      ["/notify", "1"],
      ["/notify", "2"],
    ]);
    expect(posts[1]?.headers["idempotency-key"]).toBe(posts[0]?.headers["idempotency-key"]);
    const leaf = [...(await harness.tree(root)).values()].find((v) => v.title === "Invite");
    const audit = await harness.rt.audit.forTask(leaf?.taskId as string);
    expect(audit.map((r) => `${r.stage}:${r.attempt ?? 1}`)).toEqual([
      "requested:1",
      "completed:1",
      "requested:2",
      "completed:2",
    ]);
  }, 60_000);
});
