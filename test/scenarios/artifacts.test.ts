import { TaskState } from "@a2a-js/sdk";
import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import type { TaskView } from "../../shared/domain/task-view.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import { a2aClient, ada as a2aPerson, send, serveA2a, userMessage } from "./a2a-fixtures.ts";
import { Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

/**
 * Files an agent makes (the create_artifact built-in) end to end on the local runtime: the leaf's
 * tool stores them under its task, its end records them, its parents carry them up, and they come
 * back through the HTTP API (listed, downloaded as attachments) and as A2A file parts: the bytes
 * when small, a link when large. Nobody but the request's readers gets them.
 */
const BASE = "https://arbor.example";
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const eve = newApiKey({ id: "user_eve", kind: "human", tenant: "globex", roles: ["admin"] });
const CSV = "city,people\nLisbon,12\nPorto,8\n";
const BIG = "x".repeat(300 * 1024);

const toolResults = (r: LlmRequest) =>
  r.messages.filter((m) => m.role === "tool").map((m) => m.content ?? "");

/** Each leaf makes its file, then answers; "Planted" also names a file of another task. */
const script: ScriptFunction = (r) => {
  if (isPlan(r))
    return planOf({
      name: "Offsite numbers",
      purpose: "Tabulate the offsite",
      subtasks: [
        { name: "Table", purpose: "Write the table of cities as CSV" },
        { name: "Page", purpose: "Write the long page and a planted reference" },
      ],
    });
  if (isEvaluation(r)) return pass();
  const results = toolResults(r);
  const leaf = taskName(r);
  if (results.length === 0)
    return {
      toolCalls: [
        leaf === "Table"
          ? {
              name: "create_artifact",
              arguments: { name: "cities.csv", contentType: "text/csv", content: CSV },
            }
          : {
              name: "create_artifact",
              arguments: {
                name: "page.html",
                contentType: "text/html",
                content: `<script>steal()</script>${BIG}`,
              },
            },
      ],
    };
  if (leaf === "Page" && results.length === 1)
    return { toolCalls: [{ name: "word_count", arguments: { text: `see ${planted}` } }] };
  return { content: `${leaf} done` };
};
/** A URN of an artifact below another task: a result that names it must add nothing. */
const planted =
  "cld:common.Tenant.acme/common.Conversation.x/common.Message.y/plan.Task.z/common.Artifact.0123456789abcdef";

let h: Harness;
let app: Hono;
let a2a: Awaited<ReturnType<typeof serveA2a>>;

beforeAll(async () => {
  h = await Harness.create({
    script,
    assistants: [
      {
        id: "writer",
        name: "Writer",
        purpose: "Writes tables and pages as files",
        tools: ["create_artifact", "word_count"],
      },
    ],
    settings: { electionThreshold: -1 },
    publicUrl: () => BASE,
  });
  const keys = new ApiKeys({ keys: [ada.entry, bob.entry, eve.entry] });
  app = createServerApp({ engine: h.engine, keys, publicUrl: BASE });
  a2a = await serveA2a(h.engine);
});
afterAll(async () => {
  await a2a?.close();
  await h?.close();
});

const call = (key: string, path: string) =>
  app.fetch(new Request(`${BASE}${path}`, { headers: { authorization: `Bearer ${key}` } }));
type Listed = {
  artifacts: { urn: string; name: string; size: number; sha256: string; links: { download: string } }[];
};

describe("a request whose leaves make files", () => {
  let root: string;

  it("records them on the leaves' ends and carries them up to the request's root", async () => {
    const res = await app.fetch(
      new Request(`${BASE}/v1/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${ada.key}`, "content-type": "application/json" },
        body: JSON.stringify({ text: "Tabulate the offsite" }),
      }),
    );
    root = ((await res.json()) as { rootTaskId: string }).rootTaskId;
    await h.idle();
    const view = (await h.rt.tasks.view(root)) as TaskView;
    expect(view.status).toBe("done");
    expect(view.artifacts).toHaveLength(2);
    expect(view.artifacts?.every((a) => a.startsWith(`${root}/plan.Task.`))).toBe(true);
    expect(view.artifacts).not.toContain(planted);
  });

  it("lists and downloads them over HTTP, as attachments that never run on the API's origin", async () => {
    const listed = (await (
      await call(ada.key, `/v1/tasks/${encodeURIComponent(root)}/artifacts`)
    ).json()) as Listed;
    const csv = listed.artifacts.find((a) => a.name === "cities.csv");
    expect(csv).toMatchObject({ size: CSV.length });
    const got = await call(ada.key, csv?.links.download ?? "");
    expect(got.status).toBe(200);
    expect(got.headers.get("content-type")).toBe("text/csv");
    expect(await got.text()).toBe(CSV);
    const page = listed.artifacts.find((a) => a.name === "page.html");
    const html = await call(ada.key, page?.links.download ?? "");
    expect(html.headers.get("content-disposition")).toMatch(/^attachment;/);
    expect(html.headers.get("content-security-policy")).toMatch(/sandbox/);
    expect(html.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("gives them to nobody else: another person of the tenant, another tenant", async () => {
    const listed = (await (
      await call(ada.key, `/v1/tasks/${encodeURIComponent(root)}/artifacts`)
    ).json()) as Listed;
    const download = listed.artifacts[0]?.links.download ?? "";
    expect((await call(bob.key, download)).status).toBe(403);
    expect((await call(bob.key, `/v1/tasks/${encodeURIComponent(root)}/artifacts`)).status).toBe(403);
    expect((await call(eve.key, download)).status).toBe(404);
    expect((await call(eve.key, `/v1/tasks/${encodeURIComponent(root)}/artifacts`)).status).toBe(404);
    expect(
      (await call(ada.key, `/v1/artifacts/${encodeURIComponent(`${root}/common.Artifact.nope`)}`)).status,
    ).toBe(404);
  });
});

describe("an A2A answer with files", () => {
  it("carries a small file's bytes and a large one's link, beside the answer", async () => {
    const client = await a2aClient(a2aPerson.key, a2a.url);
    const task = await send(client, userMessage("Tabulate the offsite"));
    await h.idle();
    const done = await client.getTask({ tenant: "", id: task.id, historyLength: 0 });
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const files = done.artifacts.filter((a) => a.artifactId.startsWith("file-"));
    expect(files.map((f) => f.name).sort()).toEqual(["cities.csv", "page.html"]);
    const csv = files.find((f) => f.name === "cities.csv")?.parts[0];
    expect(csv?.content?.$case).toBe("raw");
    expect(Buffer.from(csv?.content?.value as Uint8Array).toString()).toBe(CSV);
    expect(csv).toMatchObject({ filename: "cities.csv", mediaType: "text/csv" });
    const page = files.find((f) => f.name === "page.html")?.parts[0];
    expect(page?.content?.$case).toBe("url");
    expect(String(page?.content?.value)).toMatch(/\/v1\/artifacts\/cld%3Acommon\.Tenant\.acme%2F/);
    expect(done.artifacts.some((a) => a.artifactId === "answer")).toBe(true);
  });
});
