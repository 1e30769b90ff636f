import { Hono } from "hono";
import * as z from "zod";
import type { Engine } from "../../engine/engine.ts";
import { markWindow, type WindowMark } from "../../engine/window/window-marks.ts";
import { NotFoundError } from "../../kernel/errors.ts";
import { type ApiEnv, asker, ownUrn, readJson, taskPath } from "./http-kit.ts";

/**
 * A leaf's conversation with its model, over the HTTP API (mounted in http-api.ts, behind its key,
 * rate limit and body bound). Nothing is deleted: a mark says from which turn on the conversation
 * is sent to the model (engine/window/window-marks.ts, which states the rules).
 *
 *   POST /v1/tasks/:urn/conversation/truncate  {"keepLast": n}  keep the newest n turns -> 200 {mark}
 *   POST /v1/tasks/:urn/conversation/clear     {}               keep none               -> 200 {mark}
 *
 * Who may: whoever may write the task (the policy: the conversation's owner, or an admin). Another
 * tenant's task, or none: 404. Not a leaf, or ended: 409. Each refusal writes nothing.
 */
const TruncateSchema = z.object({ keepLast: z.number().int().min(0).max(100_000) }).strict();
const ClearSchema = z.object({}).strict();

export function createConversationRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  const mark = async (
    urn: string,
    who: ReturnType<typeof asker>,
    request: Parameters<typeof markWindow>[2],
  ): Promise<WindowMark> => {
    // Who may, first: a task the caller may not write is refused before anything else is read.
    await engine.authorize(who, "resource.write", urn);
    if (!(await engine.deps.tasks.view(urn))) throw new NotFoundError("Task", urn);
    return markWindow(engine.deps, urn, request, who.actor);
  };
  const answer = (urn: string, m: WindowMark) => ({ taskId: urn, mark: m, links: { task: taskPath(urn) } });

  app.post("/v1/tasks/:urn/conversation/truncate", async (c) => {
    const urn = ownUrn(c, "Task", c.req.param("urn"));
    const { keepLast } = await readJson(c, TruncateSchema);
    return c.json(answer(urn, await mark(urn, asker(c), { action: "truncate", keepLast })));
  });

  app.post("/v1/tasks/:urn/conversation/clear", async (c) => {
    const urn = ownUrn(c, "Task", c.req.param("urn"));
    await readJson(c, ClearSchema);
    return c.json(answer(urn, await mark(urn, asker(c), { action: "clear" })));
  });

  return app;
}
