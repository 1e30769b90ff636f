import type { ChatSurfaces } from "../../shared/notify/chat/sync.ts";
import { NotifyService } from "../../shared/notify/service.ts";
import { notifyUrls } from "../../shared/notify/urls.ts";
import { NOTIFY_WAKE_PATTERNS, requestOfWakeup } from "../../shared/notify/wakeups.ts";
import { type Harness, PERSON } from "./engine-harness.ts";

/**
 * A notify worker for the thread tests: a notify service over the harness's engine, reconciling on
 * every wake-up (`reconciles` times, as a redelivered event would) and attempting what is due at
 * once (the local worker's kick on a recording) unless `kick` is false. Its bus subscriptions go
 * into `offs`, for the test's afterEach to end.
 */
export function threadWorker(
  w: Harness,
  surfaces: ChatSurfaces | (() => ChatSurfaces | undefined),
  holder: string,
  offs: (() => void)[],
  options: { kick?: boolean; reconciles?: number } = {},
): NotifyService {
  const service = new NotifyService({
    deps: w.engine.deps,
    urls: notifyUrls(),
    surfaces,
    holder,
    random: () => 0,
  });
  for (const [i, pattern] of NOTIFY_WAKE_PATTERNS.entries())
    offs.push(
      w.rt.bus.subscribe({
        name: `${holder}-wake-${i}`,
        pattern,
        handler: async (event) => {
          const root = requestOfWakeup(event);
          if (!root) return;
          for (let n = 0; n < (options.reconciles ?? 1); n++) await service.reconcile(root);
          if (options.kick !== false) await service.runDue();
        },
      }),
    );
  return service;
}

/**
 * Runs a request to its end with thread workers, in at most 40 rounds: the bus idle, each worker's
 * due deliveries attempted, each waiting question approved (`onQuestion` told first), and the
 * clock a minute on while deliveries are due (their retries come due). Done once the root is done
 * and no delivery is pending or sending (as the first worker sees them); throws otherwise.
 */
export async function runThreadsToEnd(
  w: Harness,
  rootTaskId: string,
  workers: NotifyService[],
  onQuestion?: () => void,
): Promise<void> {
  for (let round = 0; round < 40; round++) {
    await w.idle();
    await Promise.all(workers.map((s) => s.runDue()));
    const view = await w.rt.tasks.view(rootTaskId);
    const first = workers[0] as NotifyService;
    const due =
      (await first.deliveries("pending")).items.length + (await first.deliveries("sending")).items.length;
    if (view?.status === "done" && due === 0) return;
    const pending = await w.pending(rootTaskId);
    if (pending.length > 0) onQuestion?.();
    for (const p of pending) await w.engine.respond(p.meta.id, { selectedOptionId: "approve" }, PERSON);
    if (due > 0) w.advance(60_000);
  }
  throw new Error(`the request did not end: ${(await w.rt.tasks.view(rootTaskId))?.status}`);
}
