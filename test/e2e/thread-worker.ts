import type { ChatSurfaces } from "../../shared/notify/chat/sync.ts";
import { NotifyService } from "../../shared/notify/service.ts";
import { notifyUrls } from "../../shared/notify/urls.ts";
import { NOTIFY_WAKE_PATTERNS, requestOfWakeup } from "../../shared/notify/wakeups.ts";
import type { Harness } from "./engine-harness.ts";

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
