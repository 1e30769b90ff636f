import { compareSchedulable, type Schedulable } from "../domain/scheduler.ts";
import { ConfigError } from "../kernel/errors.ts";

/**
 * At most `concurrency` steps run at once; the others wait and start in the scheduler policy's
 * order (priority, then age). The local runtime puts task starts and turns through it, so a
 * single model server is not flooded and foreground work goes first.
 */
export class StepQueue {
  readonly #concurrency: number;
  #running = 0;
  readonly #waiting: { item: Schedulable; seq: number; start: () => void }[] = [];
  #seq = 0;

  constructor(concurrency: number) {
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new ConfigError(
        `The engine's maxConcurrentSteps must be a whole number >= 1, got ${concurrency}: set it to 1 or more`,
      );
    this.#concurrency = concurrency;
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /** Whether a step given to `run` now starts at once (a slot is free). */
  get hasRoom(): boolean {
    return this.#running < this.#concurrency;
  }

  /** Runs `step` when a slot is free; `waited` tells it whether it had to wait for one. */
  async run<T>(item: Schedulable, step: (waited: boolean) => Promise<T>): Promise<T> {
    const waited = this.#running >= this.#concurrency;
    if (waited) {
      await new Promise<void>((start) => {
        this.#waiting.push({ item, seq: this.#seq++, start });
        this.#waiting.sort((a, b) => compareSchedulable(a.item, b.item) || a.seq - b.seq);
      });
    } else {
      this.#running++;
    }
    try {
      return await step(waited);
    } finally {
      const next = this.#waiting.shift();
      if (next) next.start();
      else this.#running--;
    }
  }
}
