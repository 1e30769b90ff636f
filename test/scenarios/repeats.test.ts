import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { SimulatedCrash } from "../../shared/engine/context.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { ToolPort } from "../../shared/ports/tools.ts";
import { until } from "../support/until.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * A call whose process died during it or just after it, run by the same data folder's next
 * process. A risky call is never run again on the approval that covered the first attempt: the
 * person is asked again and told what is known (outcome unknown, or completed with its result
 * lost); a denial is final and the model is told. A call that is not risky runs again by itself,
 * with the same Idempotency-Key and the next attempt number.
 */
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
const tools = () => ({ tools: { send_email: httpTool("/send", true), notify: httpTool("/notify", false) } });
const WORKER: AssistantDefinition[] = [
  { name: "Mailer", id: "mailer", purpose: "Invite the team by email", tools: ["send_email", "notify"] },
];
/** The leaf calls `tool` once, then answers with what it was told. */
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

let h: Harness | undefined;
beforeEach(() => {
  posts.length = 0;
  hold = false;
});
afterEach(async () => {
  for (const res of held.splice(0)) res.destroy();
  await h?.close();
  h = undefined;
});

/** The process "dies" in the next call: `when` the call is in flight (started) or done (before its result is kept). */
function dieIn(tools: ToolPort, when: "in-flight" | "after") {
  const execute = tools.execute.bind(tools);
  tools.execute = async (name, args, context) => {
    const running = execute(name, args, context);
    if (when === "after") await running;
    else {
      running.catch(() => undefined); // it ends when its connection does, in a process that is gone
      while (posts.length === 0) await new Promise((r) => setTimeout(r, 5));
    }
    throw new SimulatedCrash("after-write", "tool");
  };
}

async function start(tool: string, before?: (harness: Harness) => void, settle = true) {
  h = await Harness.create({
    script: scriptFor(tool),
    assistants: WORKER,
    toolsConfig: tools(),
    outbound: LOOPBACK_ALLOWED,
    bus: { maxAttempts: 1 },
  });
  before?.(h);
  const { rootTaskId } = await h.submit("Invite the team");
  if (settle) await h.idle();
  return rootTaskId;
}

/** A new process on the data folder, and its watchdog re-driving what stopped. */
async function restart(harness: Harness) {
  await harness.restart();
  harness.advance(10 * 60_000);
  await harness.engine.watchdog(60_000);
  await harness.idle();
}

describe("a call that a crash interrupted", () => {
  it("risky, outcome unknown: asked again; a denial is final, and the model hears the outcome is unknown", async () => {
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
    expect(again?.binding).toEqual(first?.binding);
    await harness.engine.respond(again?.meta.id as string, { selectedOptionId: "deny" }, PERSON);
    await harness.idle();
    const { view, output } = await harness.engine.result(root);
    expect(view?.status).toBe("done");
    expect(output).toMatch(
      /^noted: A person declined to run send_email again\. Its earlier attempt may or may not have taken effect/,
    );
    expect(posts).toHaveLength(1);
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
    expect(again?.display.description).toMatch(/^Attempt 1 of send_email completed at .*, but Arbor stopped/);
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
    expect(await harness.pending(root)).toEqual([]);
  }, 60_000);

  for (const tool of ["notify", "send_email"])
    it(`${tool}: still running when a watchdog pass drives its turn again, it is joined, not run twice`, async () => {
      hold = true;
      let executions = 0;
      const root = await start(
        tool,
        (harness) => {
          const tools = harness.engine.deps.tools;
          const execute = tools.execute.bind(tools);
          tools.execute = (name, args, context) => {
            executions++;
            return execute(name, args, context);
          };
        },
        tool === "send_email",
      ); // a call that is not risky goes out at once, and is held: nothing settles
      const harness = h as Harness;
      if (tool === "send_email") {
        const [ask] = await harness.pending(root);
        expect(ask).toBeDefined();
        void harness.engine.respond(ask?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
      }
      await until("the endpoint to hold the first POST", () => posts.length === 1);
      // The call is out (the endpoint holds it); a watchdog pass finds the task quiet and drives it again.
      harness.advance(10 * 60_000);
      await harness.engine.watchdog(60_000);
      await until("the call to be executed again", () => executions === 2);
      for (const res of held.splice(0)) res.writeHead(200).end("ok, done");
      await harness.idle();
      expect(posts).toHaveLength(1);
      expect((await harness.engine.result(root)).output).toBe("noted: ok, done");
      expect(await harness.pending(root)).toEqual([]);
      const leaf = [...(await harness.tree(root)).values()].find((v) => v.title === "Invite");
      const audit = await harness.rt.audit.forTask(leaf?.taskId as string);
      expect(audit.map((r) => `${r.stage}:${r.attempt ?? 1}`)).toEqual(["requested:1", "completed:1"]);
    }, 60_000);
});
