import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { apiEvent } from "../peers/api-gateway-events.ts";
import { planningModel } from "../peers/planning-model.ts";
import { type AwsFunctions, startAwsFunctions } from "./aws-functions.ts";
import { type AwsWorld, EventBridgePlayer, startAwsWorld } from "./aws-world.ts";

/**
 * Files a leaf makes, through the functions the engine stack deploys: the tool function stores them
 * (within its grants: below a task's artifacts only), the leaf's end records them, and the API
 * function hands them back: listed and downloaded over HTTP, and in an A2A answer as a file part,
 * the small one's bytes inline, the large one's by a signed S3 URL that s3rver serves.
 */
const TENANT = "acme";
const BUS = "arbor-artifacts";
const TOOL_FUNCTION = "arbor-artifacts-tools";
const root = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });
const CSV = "city,people\nLisbon,12\n";
const BIG = "y".repeat(300 * 1024);

const WRITER = { purpose: "Write the offsite's files", tools: ["create_artifact"] };
const TEAM = { assistants: [{ name: "Writer", id: "writer", ...WRITER }] };

const model = planningModel({
  plan: { name: "Offsite files", ...WRITER, tools: undefined },
  evaluation: { reason: "written" },
  leaf: ({ toolResult }) =>
    toolResult === undefined
      ? {
          toolCalls: [
            {
              name: "create_artifact",
              arguments: { name: "cities.csv", contentType: "text/csv", content: CSV },
            },
            {
              name: "create_artifact",
              arguments: { name: "big.txt", contentType: "text/plain", content: BIG },
            },
          ],
        }
      : { content: "files written" },
});

describe("artifacts through the AWS handlers, offline", () => {
  let world: AwsWorld;
  let fns: AwsFunctions;
  const { drain } = new EventBridgePlayer(
    () => world,
    BUS,
    () => fns.steps,
  );

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-artifacts",
      bus: BUS,
      model,
      env: {
        ARBOR_STAGE: "artifacts",
        ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
        ARBOR_PUBLIC_URL: "https://abc123.execute-api.us-east-1.amazonaws.com",
      },
    });
    fns = await startAwsFunctions(world, TOOL_FUNCTION, [root.entry]);
  });
  afterAll(async () => {
    await fns?.close();
    await world?.close();
  });

  it("stores them within the tool function's grants, records them, and hands them back over HTTP and A2A", async () => {
    const admin = fns.as(root.key);
    expect((await admin.put("/v1/admin/team", TEAM)).status).toBe(200);
    const sent = await fns.call(
      apiEvent("POST", "/a2a", {
        key: root.key,
        headers: { "a2a-version": "1.0" },
        body: {
          jsonrpc: "2.0",
          id: 1,
          method: "SendMessage",
          params: {
            message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "Write the offsite's files" }] },
            configuration: { returnImmediately: true },
          },
        },
      }),
    );
    expect(sent.status).toBe(200);
    const task = (sent.json.result as { task: { id: string; metadata: { arbor: { rootTaskId: string } } } })
      .task;
    await drain();
    expect(fns.toolGuard.denied).toEqual([]);

    // Over HTTP: listed on the request's root, downloaded as an attachment.
    const rootTask = task.metadata.arbor.rootTaskId;
    const listed = await admin.get(`/v1/tasks/${encodeURIComponent(rootTask)}/artifacts`);
    expect(listed.status).toBe(200);
    const artifacts = listed.json.artifacts as { name: string; urn: string; links: { download: string } }[];
    expect(artifacts.map((a) => a.name).sort()).toEqual(["big.txt", "cities.csv"]);
    const csv = artifacts.find((a) => a.name === "cities.csv") as (typeof artifacts)[number];
    const raw = await fns.api(apiEvent("GET", csv.links.download, { key: root.key }), { awsRequestId: "r1" });
    expect(raw.statusCode).toBe(200);
    const body = raw.isBase64Encoded ? Buffer.from(raw.body, "base64").toString() : raw.body;
    expect(body).toBe(CSV);
    expect(raw.headers?.["content-disposition"]).toMatch(/^attachment;/);

    // Over A2A: the small file inline, the large one by a signed S3 URL.
    const got = await fns.call(
      apiEvent("POST", "/a2a", {
        key: root.key,
        headers: { "a2a-version": "1.0" },
        body: { jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: task.id } },
      }),
    );
    const result = got.json.result as {
      status: { state: string };
      artifacts: {
        artifactId: string;
        name: string;
        parts: { raw?: string; url?: string; filename: string }[];
      }[];
    };
    expect(result.status.state).toBe("TASK_STATE_COMPLETED");
    const small = result.artifacts.find((a) => a.name === "cities.csv")?.parts[0];
    expect(Buffer.from(small?.raw ?? "", "base64").toString()).toBe(CSV);
    const large = result.artifacts.find((a) => a.name === "big.txt")?.parts[0];
    expect(large?.url).toMatch(/X-Amz-Signature=/);
    const download = await fetch(large?.url as string);
    expect(download.status).toBe(200);
    expect((await download.text()).length).toBe(BIG.length);
  });
});
