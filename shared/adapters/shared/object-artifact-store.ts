import { hash } from "node:crypto";
import { childUrn, deterministicId, isUrn, lastElement, parentUrn, type Urn } from "../../domain/urn.ts";
import { ConflictError, TooLargeError, ValidationError } from "../../kernel/errors.ts";
import {
  type ArtifactInfo,
  type ArtifactInput,
  type ArtifactStore,
  MAX_ARTIFACT_BYTES,
  MAX_ARTIFACTS_PER_TASK,
} from "../../ports/artifact-store.ts";
import { listAll, type ObjectStore } from "../../ports/object-store.ts";

/**
 * Artifacts over any object store: an artifact `<task>/common.Artifact.<id>` (its id from the task
 * and its name, so the same name replaces) keeps its bytes at `<urn>.bytes` and what it is at
 * `<urn>.info`, the bytes first: an info is only ever written for bytes that are stored, so a
 * crash between the two leaves bytes nobody lists, never an info without its bytes. Neither key
 * ends in `.json`, so no listing of resources takes them for one.
 */
const TYPE = { pkg: "common", type: "Artifact" } as const;
// biome-ignore lint/suspicious/noControlCharactersInRegex: a file name holds no control characters
const NAME = /^[^/\\\u0000-\u001f\u007f]{1,200}$/;
const CONTENT_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/i;

export class ObjectArtifactStore implements ArtifactStore {
  readonly #objects: ObjectStore;
  readonly #clock: () => Date;

  constructor(objects: ObjectStore, options: { clock?: () => Date } = {}) {
    this.#objects = objects;
    this.#clock = options.clock ?? (() => new Date());
  }

  async put(input: ArtifactInput): Promise<ArtifactInfo> {
    const problems: string[] = [];
    if (!isUrn(input.taskId) || lastElement(input.taskId).type !== "Task")
      problems.push("taskId: a task's URN");
    if (!NAME.test(input.name) || input.name === "." || input.name === "..")
      problems.push("name: 1 to 200 characters, no slash, backslash or control character");
    if (!CONTENT_TYPE.test(input.contentType)) problems.push("contentType: a MIME type, e.g. text/csv");
    if (problems.length) throw new ValidationError("Invalid artifact", problems);
    const body = typeof input.body === "string" ? Buffer.from(input.body, "utf8") : input.body;
    if (body.byteLength > MAX_ARTIFACT_BYTES)
      throw new TooLargeError(
        `The artifact ${input.name} is ${body.byteLength} bytes, over the ${MAX_ARTIFACT_BYTES}-byte bound: split it, or keep it elsewhere and give its link`,
        { size: body.byteLength, limit: MAX_ARTIFACT_BYTES },
      );
    const urn = artifactUrn(input.taskId, input.name);
    const known = await this.describe(urn);
    if (!known && (await this.#count(input.taskId)) >= MAX_ARTIFACTS_PER_TASK)
      throw new ConflictError(
        `The task already keeps ${MAX_ARTIFACTS_PER_TASK} artifacts, the most one task may: put a new version under an existing name`,
      );
    const info: ArtifactInfo = {
      urn,
      taskId: input.taskId,
      name: input.name,
      contentType: input.contentType,
      size: body.byteLength,
      sha256: hash("sha256", body),
      createdAt: this.#clock().toISOString(),
    };
    await this.#objects.put(`${urn}.bytes`, body, { contentType: input.contentType });
    await this.#objects.put(`${urn}.info`, JSON.stringify(info), { contentType: "application/json" });
    return info;
  }

  async describe(urn: string): Promise<ArtifactInfo | undefined> {
    if (!isArtifactUrn(urn)) return undefined;
    const bytes = await this.#objects.get(`${urn}.info`);
    return bytes === undefined
      ? undefined
      : (JSON.parse(Buffer.from(bytes).toString("utf8")) as ArtifactInfo);
  }

  async get(urn: string): Promise<{ info: ArtifactInfo; body: Uint8Array } | undefined> {
    const info = await this.describe(urn);
    if (!info) return undefined;
    const body = await this.#objects.get(`${urn}.bytes`);
    // Bytes replaced since the info was read (a put of the same name): read what is there now.
    if (body === undefined) return undefined;
    if (hash("sha256", body) !== info.sha256) {
      const now = await this.describe(urn);
      return now && hash("sha256", body) === now.sha256 ? { info: now, body } : undefined;
    }
    return { info, body };
  }

  async listByTask(taskId: string): Promise<ArtifactInfo[]> {
    const keys = await this.#infoKeys(taskId);
    const infos = await this.#objects.getMany(keys);
    return infos
      .flatMap((b) => (b === undefined ? [] : [JSON.parse(Buffer.from(b).toString("utf8")) as ArtifactInfo]))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async #count(taskId: string): Promise<number> {
    return (await this.#infoKeys(taskId)).length;
  }

  /** The info keys directly below the task (an artifact of a subtask is the subtask's). */
  async #infoKeys(taskId: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const page of listAll(this.#objects, `${taskId}/common.Artifact.`, { delimiter: "/" }))
      for (const key of page.keys) if (key.endsWith(".info")) keys.push(key);
    return keys.slice(0, MAX_ARTIFACTS_PER_TASK);
  }
}

/** An artifact's URN: below its task, its id from the task and its name. */
export const artifactUrn = (taskId: string, name: string): Urn =>
  childUrn(taskId, { ...TYPE, id: deterministicId(taskId, "common.Artifact", name) });

const isArtifactUrn = (urn: string): boolean => {
  if (!isUrn(urn)) return false;
  const last = lastElement(urn);
  return last.pkg === TYPE.pkg && last.type === TYPE.type && parentUrn(urn) !== undefined;
};
