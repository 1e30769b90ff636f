import { Worker } from "node:worker_threads";
import { type ArborError, ConfigError, UnavailableError, ValidationError } from "../../errors.ts";
import type {
  EmbeddingSpace,
  VectorIndex,
  VectorMatch,
  VectorQuery,
  VectorRecord,
} from "../../ports/vector-index.ts";
import type { SqliteVectorIndexOptions } from "./sqlite-vector-index.ts";
import { assertValidSpace, checkQuery, checkRecords } from "./vector-checks.ts";

/**
 * The local mode's vector index (openLocalVectorIndex: libSQL DiskANN, migrated from the flat
 * index) on a worker thread of its own: a graph insertion (1-8 ms of CPU) and a query (1-2 ms)
 * never hold the main thread's event loop, so HTTP requests, the engine's steps and /healthz go on
 * while outputs are indexed, and on a machine with two cores the index work runs beside them.
 * Inputs are checked here, before they cross, so that its errors are those every adapter gives.
 * Requests are answered in the order the thread finishes them; a thread that dies fails every
 * request still waiting and every later one with UnavailableError.
 */
export interface ThreadData {
  folder: string;
  name: string;
  space: EmbeddingSpace;
  options: SqliteVectorIndexOptions;
}

export type Request =
  | { id: number; op: "upsert"; records: readonly VectorRecord[] }
  | { id: number; op: "delete"; keys: readonly string[] }
  | { id: number; op: "query"; query: VectorQuery }
  | { id: number; op: "close" };

export interface Reply {
  id: number;
  ok: boolean;
  value?: unknown;
  error?: { code: string; message: string };
}

type Waiting = { resolve: (value: unknown) => void; reject: (e: unknown) => void };

export class ThreadedVectorIndex implements VectorIndex {
  readonly space: EmbeddingSpace;
  readonly #worker: Worker;
  readonly #waiting = new Map<number, Waiting>();
  #nextId = 1;
  #dead: ArborError | undefined;
  #closing: Promise<void> | undefined;

  private constructor(worker: Worker, space: EmbeddingSpace) {
    this.#worker = worker;
    this.space = { embedderId: space.embedderId, dimension: space.dimension };
    worker.on("message", (reply: Reply) => {
      const waiting = this.#waiting.get(reply.id);
      if (!waiting) return;
      this.#waiting.delete(reply.id);
      if (reply.ok) waiting.resolve(reply.value);
      else waiting.reject(rebuild(reply.error));
    });
    const die = (cause: unknown) => {
      this.#dead ??= new UnavailableError("The vector index thread stopped", { cause });
      for (const w of this.#waiting.values()) w.reject(this.#dead);
      this.#waiting.clear();
    };
    worker.on("error", die);
    worker.on("exit", (code) => die(new Error(`exit code ${code}`)));
  }

  /** Starts the thread and opens `<folder>/<name>.db` there (see openLocalVectorIndex). */
  static async open(
    folder: string,
    name: string,
    space: EmbeddingSpace,
    options: SqliteVectorIndexOptions = {},
  ): Promise<ThreadedVectorIndex> {
    assertValidSpace(space);
    const workerData: ThreadData = { folder, name, space, options };
    const worker = new Worker(new URL("./vector-index-worker.mjs", import.meta.url), { workerData });
    worker.unref(); // an index left open does not keep the process alive
    const ready = await new Promise<Reply>((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    }).catch((cause: unknown) => {
      throw new UnavailableError(`Cannot start the vector index thread for ${folder}`, { cause });
    });
    if (!ready.ok) {
      await worker.terminate();
      throw rebuild(ready.error);
    }
    return new ThreadedVectorIndex(worker, space);
  }

  async upsert(records: readonly VectorRecord[]): Promise<void> {
    checkRecords(records, this.space.dimension);
    if (records.length === 0) return;
    await this.#ask({ id: 0, op: "upsert", records });
  }

  async delete(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.#ask({ id: 0, op: "delete", keys });
  }

  async query(query: VectorQuery): Promise<VectorMatch[]> {
    checkQuery(query, this.space.dimension);
    const { vector, topK, type, keyPrefix } = query;
    return (await this.#ask({
      id: 0,
      op: "query",
      query: {
        vector,
        topK,
        ...(type === undefined ? {} : { type }),
        ...(keyPrefix === undefined ? {} : { keyPrefix }),
      },
    })) as VectorMatch[];
  }

  /** Writes what the thread has queued, closes the file and ends the thread. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (!this.#dead) await this.#ask({ id: 0, op: "close" }).catch(() => undefined);
      this.#dead ??= new UnavailableError("The vector index is closed");
      await this.#worker.terminate();
    })();
    return this.#closing;
  }

  #ask(request: Request): Promise<unknown> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#worker.postMessage({ ...request, id });
    });
  }
}

/** The thread's error as the same kind of ArborError. */
function rebuild(error: Reply["error"]): ArborError {
  const message = error?.message ?? "The vector index thread failed";
  if (error?.code === "CONFIG") return new ConfigError(message);
  if (error?.code === "VALIDATION") return new ValidationError(message);
  return new UnavailableError(message);
}
