import type { Engine } from "../../engine/engine.ts";
import { NotifyService, type NotifyServiceOptions, type NotifySettings } from "../../notify/service.ts";
import { notifyUrls } from "../../notify/urls.ts";
import { NotifyWorker, type NotifyWorkerOptions } from "../../notify/worker.ts";
import type { GuardOptions } from "../../outbound/guard.ts";
import type { OutboundSettings } from "../../outbound/policy.ts";
import type { NotifyConfig } from "../config.ts";

/**
 * The notify path on the local runtime: the delivery service over the engine's state, and its
 * in-process worker on the runtime's bus. How to drive it:
 *
 *   const notify = startLocalNotify(engine, { outbound: config.outbound, notify: config.notify, surfaces });
 *   createServerApp({ ..., notify: notify.service });
 *   ...
 *   await notify.stop();   // before the runtime closes
 */
export interface LocalNotifyOptions {
  outbound?: OutboundSettings | undefined;
  notify?: NotifyConfig | undefined;
  settings?: Partial<NotifySettings>;
  worker?: Partial<Omit<NotifyWorkerOptions, "log">>;
  /** Tests: how names are resolved by the guard. */
  guard?: GuardOptions;
  random?: () => number;
  holder?: string;
  /**
   * The chat channels' surfaces (Slack, Teams), or a function returning them (the chat settings
   * load asynchronously): the thread sync posts through them. Absent: chat deliveries wait (retried,
   * then dead, saying what to configure).
   */
  surfaces?: NotifyServiceOptions["surfaces"];
}

export interface LocalNotify {
  service: NotifyService;
  worker: NotifyWorker;
  stop(): Promise<void>;
}

export function startLocalNotify(engine: Engine, options: LocalNotifyOptions = {}): LocalNotify {
  const service = new NotifyService({
    deps: engine.deps,
    urls: notifyUrls(options.outbound, {
      allowLoopbackHttp: options.notify?.allowLoopbackHttp,
      allow: options.notify?.allow,
      ports: options.notify?.ports,
      ...(options.guard ? { guard: options.guard } : {}),
    }),
    ...(options.settings ? { settings: options.settings } : {}),
    ...(options.random ? { random: options.random } : {}),
    ...(options.holder ? { holder: options.holder } : {}),
    ...(options.surfaces ? { surfaces: options.surfaces } : {}),
  });
  const worker = new NotifyWorker(service, engine.deps.bus, { log: engine.deps.log, ...options.worker });
  worker.start();
  return { service, worker, stop: () => worker.stop() };
}
