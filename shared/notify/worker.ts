import type { ArborLogger } from "../kernel/logger.ts";
import type { EventBus } from "../ports/event-bus.ts";
import type { NotifyService } from "./service.ts";
import { NOTIFY_WAKE_PATTERNS, NOTIFY_WAKE_RULE, requestOfWakeup } from "./wakeups.ts";

/**
 * The local runtime's delivery worker, in process. How to drive it:
 *
 *   const worker = new NotifyWorker(notify, runtime.bus, { log });
 *   worker.start();          // subscribes to the wake-ups, sweeps, then works on its own
 *   ...
 *   await worker.stop();     // before the runtime closes: unsubscribes, stops timers, waits for the attempts in flight
 *
 * Wake-ups (wakeups.ts) reconcile the request they concern; a delivery recorded kicks a run at
 * once; a timer runs what is due (retries) every `tickMs`, and sweeps every `sweepEveryMs` for what
 * a lost wake-up missed. A run starts the attempts (the service's dispatchDue: as many as the
 * tenants' and hosts' lanes let through) and does not wait for them: a receiver that never answers
 * holds its own lane, not the worker; each attempt's end kicks another run, for what its lane held
 * back. Runs never overlap: a kick during a run runs again after it. What is "due" is the
 * service's clock (the engine's, injected): tests move it and call `runNow()`.
 */
export interface NotifyWorkerOptions {
  log: Pick<ArborLogger, "error">;
  /** How often due retries are looked for (default 5 s). */
  tickMs?: number;
  /** How often every open subscription is reconciled (default 60 s; and once at start). */
  sweepEveryMs?: number;
}

export class NotifyWorker {
  readonly #service: NotifyService;
  readonly #bus: EventBus;
  readonly #options: Required<NotifyWorkerOptions>;
  #offs: (() => void)[] = [];
  #timers: NodeJS.Timeout[] = [];
  #running: Promise<void> | undefined;
  #again = false;
  #sweepAgain = false;
  #stopped = true;

  constructor(service: NotifyService, bus: EventBus, options: NotifyWorkerOptions) {
    this.#service = service;
    this.#bus = bus;
    this.#options = { tickMs: 5_000, sweepEveryMs: 60_000, ...options };
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#offs = NOTIFY_WAKE_PATTERNS.map((pattern, i) =>
      this.#bus.subscribe({
        name: `${NOTIFY_WAKE_RULE}-${i + 1}`,
        pattern,
        handler: async (event) => {
          const root = requestOfWakeup(event);
          if (root && !this.#stopped) await this.#service.reconcile(root);
        },
      }),
    );
    this.#offs.push(this.#service.onRecorded(() => this.kick()));
    this.#offs.push(this.#service.onSettled(() => this.kick()));
    const tick = setInterval(() => this.kick(), this.#options.tickMs);
    const sweep = setInterval(() => this.kick(true), this.#options.sweepEveryMs);
    tick.unref();
    sweep.unref();
    this.#timers = [tick, sweep];
    this.kick(true);
  }

  /** Runs what is due as soon as the run in progress ends (with `sweep`: reconciles every open subscription first). */
  kick(sweep = false): void {
    if (this.#stopped) return;
    if (sweep) this.#sweepAgain = true;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
    });
  }

  /**
   * Runs once now (after the run in progress), and resolves when done, with no attempt of this
   * worker still in flight: for tests and the CLI (a test that moves the clock next must not have
   * an attempt of a run a wake-up started meanwhile finish at the moved time).
   */
  async runNow(sweep = false): Promise<void> {
    await this.#running;
    if (sweep) await this.#service.sweep();
    await this.#service.runDue();
    // The attempts a kick started meanwhile, and the runs their ends kicked.
    do {
      while (this.#running) await this.#running;
      await this.#service.idle();
    } while (this.#running);
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      try {
        if (this.#sweepAgain) {
          this.#sweepAgain = false;
          await this.#service.sweep();
        }
        if (!this.#stopped) await this.#service.dispatchDue();
      } catch (error) {
        this.#options.log.error("notify: a delivery run failed", { error: error as Error });
      }
    } while (this.#again && !this.#stopped);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const off of this.#offs) off();
    for (const t of this.#timers) clearInterval(t);
    this.#offs = [];
    this.#timers = [];
    await this.#running;
    await this.#service.idle();
  }
}
