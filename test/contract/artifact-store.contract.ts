import { createHash } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ObjectArtifactStore } from "../../shared/adapters/shared/object-artifact-store.ts";
import { ConflictError, TooLargeError, ValidationError } from "../../shared/kernel/errors.ts";
import {
  type ArtifactStore,
  MAX_ARTIFACT_BYTES,
  MAX_ARTIFACTS_PER_TASK,
} from "../../shared/ports/artifact-store.ts";
import { listAllKeys, type ObjectStore } from "../../shared/ports/object-store.ts";
import { ResourceStore } from "../../shared/store/resource-store.ts";
import type { ObjectStoreFixture } from "./object-store.contract.ts";

const TASK = "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1/plan.Task.t1";
const SUBTASK = `${TASK}/plan.Task.t2`;
const OTHER = "cld:common.Tenant.other/common.Conversation.c9/common.Message.m9/plan.Task.t9";
const text = (b: Uint8Array) => Buffer.from(b).toString("utf8");

/** The artifact store (shared/adapters/shared/object-artifact-store.ts) over one ObjectStore adapter. */
export function artifactStoreContract(name: string, setup: () => Promise<ObjectStoreFixture>): void {
  describe(`ArtifactStore contract: over ${name}`, () => {
    let fx: ObjectStoreFixture;
    let objects: ObjectStore;
    let artifacts: ArtifactStore;
    beforeEach(async () => {
      fx = await setup();
      objects = fx.store;
      artifacts = new ObjectArtifactStore(objects, { clock: () => new Date("2026-11-29T12:00:00.000Z") });
    });
    afterEach(() => fx.cleanup());

    it("keeps a task's file with what it is, below the task; the same name replaces it", async () => {
      const csv = "city,people\nLisbon,12\n";
      const info = await artifacts.put({
        taskId: TASK,
        name: "people.csv",
        contentType: "text/csv",
        body: csv,
      });
      expect(info).toMatchObject({
        taskId: TASK,
        name: "people.csv",
        contentType: "text/csv",
        size: csv.length,
        sha256: createHash("sha256").update(csv).digest("hex"),
        createdAt: "2026-11-29T12:00:00.000Z",
      });
      expect(info.urn.startsWith(`${TASK}/common.Artifact.`)).toBe(true);
      const got = await artifacts.get(info.urn);
      expect(got && text(got.body)).toBe(csv);
      expect(got?.info).toEqual(info);
      const again = await artifacts.put({
        taskId: TASK,
        name: "people.csv",
        contentType: "text/csv",
        body: "city\n",
      });
      expect(again.urn).toBe(info.urn);
      expect(again.sha256).not.toBe(info.sha256);
      expect(text((await artifacts.get(info.urn))?.body ?? new Uint8Array())).toBe("city\n");
      expect(await artifacts.describe(info.urn)).toEqual(again);
    });

    it("lists a task's artifacts by name, not its subtasks' nor another task's, and no resource listing takes them", async () => {
      const binary = new Uint8Array([0, 255, 1, 254]);
      await artifacts.put({
        taskId: TASK,
        name: "b.bin",
        contentType: "application/octet-stream",
        body: binary,
      });
      await artifacts.put({
        taskId: TASK,
        name: "a report.md",
        contentType: "text/markdown",
        body: "# Report",
      });
      await artifacts.put({ taskId: SUBTASK, name: "sub.txt", contentType: "text/plain", body: "x" });
      await artifacts.put({ taskId: OTHER, name: "theirs.txt", contentType: "text/plain", body: "y" });
      const listed = await artifacts.listByTask(TASK);
      expect(listed.map((a) => [a.name, a.size])).toEqual([
        ["a report.md", 8],
        ["b.bin", 4],
      ]);
      expect([...((await artifacts.get(listed[1]?.urn as string))?.body ?? [])]).toEqual([...binary]);
      expect((await artifacts.listByTask(SUBTASK)).map((a) => a.name)).toEqual(["sub.txt"]);
      // Resources below the task stay what they were: an artifact's keys are no resource's.
      expect(await new ResourceStore(objects).childUrns(TASK)).toEqual([]);
      expect((await listAllKeys(objects, `${TASK}/`)).every((k) => !k.endsWith(".json"))).toBe(true);
    });

    it("says what is missing: an unknown URN, or one that is no artifact's, is undefined", async () => {
      expect(await artifacts.get(`${TASK}/common.Artifact.0000000000000000`)).toBeUndefined();
      expect(await artifacts.describe(TASK)).toBeUndefined();
      expect(await artifacts.describe("not a urn")).toBeUndefined();
      expect(await artifacts.listByTask(TASK)).toEqual([]);
    });

    it("refuses bad names, types and tasks, and what is too large, writing nothing", async () => {
      const bad = [
        { taskId: TASK, name: "", contentType: "text/plain" },
        { taskId: TASK, name: "a/b.txt", contentType: "text/plain" },
        { taskId: TASK, name: "..", contentType: "text/plain" },
        { taskId: TASK, name: "ok\u0000.txt", contentType: "text/plain" },
        { taskId: TASK, name: "x".repeat(201), contentType: "text/plain" },
        { taskId: TASK, name: "ok.txt", contentType: "text" },
        { taskId: TASK, name: "ok.txt", contentType: "text/plain; charset=utf-8\r\nX: y" },
        { taskId: "cld:common.Tenant.acme", name: "ok.txt", contentType: "text/plain" },
        { taskId: "not a urn", name: "ok.txt", contentType: "text/plain" },
      ];
      for (const input of bad)
        await expect(artifacts.put({ ...input, body: "x" })).rejects.toBeInstanceOf(ValidationError);
      await expect(
        artifacts.put({
          taskId: TASK,
          name: "big.bin",
          contentType: "application/octet-stream",
          body: new Uint8Array(MAX_ARTIFACT_BYTES + 1),
        }),
      ).rejects.toBeInstanceOf(TooLargeError);
      expect(await listAllKeys(objects, "cld:")).toEqual([]);
    });

    it(`keeps at most ${MAX_ARTIFACTS_PER_TASK} per task; a new version of one of them is still taken`, async () => {
      for (let i = 0; i < MAX_ARTIFACTS_PER_TASK; i++)
        await artifacts.put({ taskId: TASK, name: `f${i}.txt`, contentType: "text/plain", body: String(i) });
      await expect(
        artifacts.put({ taskId: TASK, name: "one-more.txt", contentType: "text/plain", body: "x" }),
      ).rejects.toBeInstanceOf(ConflictError);
      const replaced = await artifacts.put({
        taskId: TASK,
        name: "f7.txt",
        contentType: "text/plain",
        body: "seven",
      });
      expect(replaced.size).toBe(5);
      expect(await artifacts.listByTask(TASK)).toHaveLength(MAX_ARTIFACTS_PER_TASK);
    });
  });
}
