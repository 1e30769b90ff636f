import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ValidationError } from "../../shared/kernel/errors.ts";
import type { DeliveryQueue } from "../../shared/ports/delivery-queue.ts";

/**
 * The one contract every DeliveryQueue adapter passes. `setup` returns an empty queue and a
 * reader: `ready()` takes every message due now (consuming them); `later()` makes the delayed ones
 * due (what waiting their delay would do) and takes them.
 */
export interface DeliveryQueueFixture {
  queue: DeliveryQueue;
  ready(): Promise<string[]>;
  later(): Promise<string[]>;
  /** How many requests reached the queue's service so far. */
  requests(): number;
  cleanup(): Promise<void>;
}

const ids = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `dlv_contract${from + i}`);

export function deliveryQueueContract(name: string, setup: () => Promise<DeliveryQueueFixture>): void {
  describe(`DeliveryQueue contract: ${name}`, () => {
    let fx: DeliveryQueueFixture;
    beforeEach(async () => {
      fx = await setup();
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    it("every id queued is taken once, also past one batch", async () => {
      await fx.queue.enqueue(ids(23));
      const got = await fx.ready();
      expect(got.sort()).toEqual(ids(23).sort());
      expect(await fx.ready()).toEqual([]);
    });

    it("an id queued twice in one call is one message", async () => {
      await fx.queue.enqueue(["dlv_a", "dlv_a", "dlv_b"]);
      expect((await fx.ready()).sort()).toEqual(["dlv_a", "dlv_b"]);
    });

    it("a delayed id is not due now, and is after its delay", async () => {
      await fx.queue.enqueue(["dlv_now"]);
      await fx.queue.enqueue(["dlv_later"], { delaySeconds: 900 });
      expect(await fx.ready()).toEqual(["dlv_now"]);
      expect(await fx.later()).toEqual(["dlv_later"]);
    });

    it("no ids send nothing", async () => {
      const before = fx.requests();
      await fx.queue.enqueue([]);
      expect(fx.requests()).toBe(before);
    });

    it("a delay out of range or an id that is not a delivery's is refused, and nothing is queued", async () => {
      for (const delaySeconds of [-1, 901, 1.5]) {
        await expect(fx.queue.enqueue(["dlv_x"], { delaySeconds })).rejects.toThrow(ValidationError);
      }
      await expect(fx.queue.enqueue(["dlv_ok", "not a delivery"])).rejects.toThrow(/delivery ids/);
      expect(await fx.later()).toEqual([]);
    });
  });
}
