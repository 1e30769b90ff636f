import { parentPort, workerData } from "node:worker_threads";
import { ArborError } from "../../errors.ts";
import type { VectorIndex } from "../../ports/vector-index.ts";
import { openLocalVectorIndex } from "./open-local-index.ts";
import type { Reply, Request, ThreadData } from "./threaded-vector-index.ts";

/** The worker side of ThreadedVectorIndex: opens the index, then answers requests in order. */
const port = parentPort;
if (!port) throw new Error("vector-index-thread runs in a worker thread");
const data = workerData as ThreadData;

const failure = (e: unknown): NonNullable<Reply["error"]> => ({
  code: e instanceof ArborError ? e.code : "UNAVAILABLE",
  message: e instanceof Error ? e.message : String(e),
});

let index: VectorIndex | undefined;
try {
  index = await openLocalVectorIndex(data.folder, data.name, data.space, data.options);
  port.postMessage({ id: 0, ok: true } satisfies Reply);
} catch (e) {
  port.postMessage({ id: 0, ok: false, error: failure(e) } satisfies Reply);
}

port.on("message", (request: Request) => {
  const open = index;
  if (!open) return;
  const run = async (): Promise<unknown> => {
    switch (request.op) {
      case "upsert":
        return open.upsert(request.records);
      case "delete":
        return open.delete(request.keys);
      case "query":
        return open.query(request.query);
      case "close":
        return open.close?.();
    }
  };
  run().then(
    (value) => port.postMessage({ id: request.id, ok: true, value } satisfies Reply),
    (e: unknown) => port.postMessage({ id: request.id, ok: false, error: failure(e) } satisfies Reply),
  );
});
