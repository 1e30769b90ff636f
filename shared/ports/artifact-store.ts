import type { Urn } from "../domain/urn.ts";

/**
 * Artifact store port: the files a task makes (a report, a chart, a CSV), each under its task,
 * kept with what it is (content type, size, sha256). Tenant-bound as the task is: an artifact's URN
 * lies below its task's. Adapters: over the object store (shared/adapters/shared/object-artifact-store.ts),
 * so on the local SQLite table or files and on S3 alike.
 */
export interface ArtifactInput {
  /** The task that makes it: the artifact lies below it. */
  taskId: string;
  /** Its file name, unique within the task: putting the same name again replaces it. */
  name: string;
  /** A MIME type, e.g. text/csv or application/pdf. */
  contentType: string;
  body: Uint8Array | string;
}

export interface ArtifactInfo {
  urn: Urn;
  taskId: string;
  name: string;
  contentType: string;
  /** Bytes. */
  size: number;
  /** Lowercase hex sha256 of the bytes. */
  sha256: string;
  /** ISO 8601: when these bytes were put. */
  createdAt: string;
}

export interface ArtifactStore {
  /** Stores the bytes and what they are; ValidationError for a bad name or type, TooLargeError past the bound. */
  put(input: ArtifactInput): Promise<ArtifactInfo>;
  /** What an artifact is, without its bytes; undefined when there is none. */
  describe(urn: string): Promise<ArtifactInfo | undefined>;
  /** The bytes and what they are; undefined when there is none. */
  get(urn: string): Promise<{ info: ArtifactInfo; body: Uint8Array } | undefined>;
  /** The task's artifacts by name, at most MAX_ARTIFACTS_PER_TASK. */
  listByTask(taskId: string): Promise<ArtifactInfo[]>;
}

/** The most bytes one artifact holds (a larger file is refused, saying so). */
export const MAX_ARTIFACT_BYTES = 25 * 1024 * 1024;
/** The most artifacts one task keeps. */
export const MAX_ARTIFACTS_PER_TASK = 100;
