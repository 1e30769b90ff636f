import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import type { Chunk } from "../../shared/domain/resources.ts";
import type { Engine } from "../../shared/engine/engine.ts";
import { addDocument, deleteDocument, getDocument } from "../../shared/knowledge/documents.ts";
import { searchKnowledge } from "../../shared/knowledge/search.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { createAwsEngine } from "../../shared/runtime/aws/aws-engine.ts";
import { type AwsWorld, apiGuard, EventBridgePlayer, guarded, startAwsWorld } from "./aws-world.ts";

/**
 * Documents on the deployed shape: added as the API function adds them (under its grants), read by
 * the documents step function driven as EventBridge drives it (under its own), with s3rver,
 * DynamoDB Local, the Titan fake and the S3 Vectors fake through the real SDK clients. Replaced,
 * delivered twice, and deleted.
 */
const TENANT = "acme";
const BUS = "arbor-documents-test";
const GUIDE = `# Packing guide

## Tents

Dry the tent fully within 48 hours so it does not grow mildew.

## Stoves

Never use a gas stove inside the tent: carbon monoxide builds up.
`;

describe("documents through the API's grants and the documents step", () => {
  let world: AwsWorld;
  let rt: AwsRuntime;
  let engine: Engine;
  let handlers: StepHandler[];
  const { drain, deliver, events } = new EventBridgePlayer(
    () => world,
    BUS,
    () => handlers,
  );
  /** As the API function does it: within its grants. */
  const asApi = <T>(fn: () => Promise<T>) => guarded(apiGuard(world), fn)();

  beforeAll(async () => {
    world = await startAwsWorld({ name: "arbor-documents", bus: BUS, model: () => ({ content: "ok" }) });
    rt = createAwsRuntime(world.config, world.clients);
    engine = await createAwsEngine(rt, world.config, { clients: world.engineClients });
    const deps = {
      config: () => world.config,
      clients: world.clients,
      engine: { clients: world.engineClients },
    };
    handlers = [createStepHandler(deps), createStepHandler(deps)];
  });

  afterAll(async () => {
    for (const h of handlers ?? []) await h.close();
    await rt?.close();
    await world?.close();
  });

  const chunks = async (urn: string) => (await rt.resources.children(urn, "doc.Chunk")) as Chunk[];
  let urn: string;

  it("is read into chunks, embedded and indexed, and found by its tenant", async () => {
    const added = await asApi(() =>
      addDocument(engine.deps, {
        tenant: TENANT,
        actor: "user_ada",
        name: "packing.md",
        bytes: Buffer.from(GUIDE),
      }),
    );
    urn = added.urn;
    await rt.untilDurable?.();
    await drain();
    const state = await getDocument(engine.deps, TENANT, urn);
    expect(state).toMatchObject({ status: "ready", chunks: 2, title: "Packing guide" });
    expect((await chunks(urn)).map((c) => c.location.headings?.at(-1)).sort()).toEqual(["Stoves", "Tents"]);
    const found = await searchKnowledge(engine.deps, {
      tenant: TENANT,
      text: "gas stove carbon monoxide",
      limit: 1,
    });
    expect(found[0]?.text).toContain("carbon monoxide");
    // Another tenant finds none of it.
    expect(await searchKnowledge(engine.deps, { tenant: "globex", text: "gas stove", limit: 5 })).toEqual([]);
  });

  it("delivered twice, is read once", async () => {
    const commands = events().filter((e) => e["detail-type"] === "DOCUMENT_ADDED");
    const before = (await rt.state.get(`document#${urn}`))?.version;
    await deliver(commands);
    expect((await rt.state.get(`document#${urn}`))?.version).toBe(before);
  });

  it("added again changed, replaces its chunks and their vectors (the step's own deletes)", async () => {
    const old: string[] = (await chunks(urn)).map((c) => c.meta.id);
    await asApi(() =>
      addDocument(engine.deps, {
        tenant: TENANT,
        actor: "user_ada",
        name: "packing.md",
        bytes: Buffer.from(GUIDE.replace("48 hours", "two days")),
      }),
    );
    await drain();
    const now = await chunks(urn);
    expect(now.some((c) => old.includes(c.meta.id))).toBe(false);
    expect(now.some((c) => c.content.includes("two days"))).toBe(true);
    expect(world.s3vectors.keys().filter((k) => old.includes(k))).toEqual([]);
  });

  it("deleted by the API, takes its chunks, vectors, bytes and record", async () => {
    const ids: string[] = (await chunks(urn)).map((c) => c.meta.id);
    await asApi(() => deleteDocument(engine.deps, TENANT, urn));
    expect(await chunks(urn)).toEqual([]);
    expect(world.s3vectors.keys().filter((k) => ids.includes(k))).toEqual([]);
    expect(await rt.state.get(`document#${urn}`)).toBeUndefined();
    expect((await rt.objects.list(`${urn}.source.`)).keys).toEqual([]);
  });
});
