import { describe, expect, it } from "vitest";
import { StepQueue } from "../../../shared/engine/step-queue.ts";

describe("StepQueue", () => {
  it("never runs more than its concurrency, and starts waiting steps by priority then age", async () => {
    const q = new StepQueue(2);
    const order: string[] = [];
    let peak = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const step = (name: string, wait?: Promise<void>) => async () => {
      peak = Math.max(peak, q.running);
      order.push(name);
      await wait;
    };
    const at = (s: number) => `2026-01-01T00:00:0${s}.000Z`;
    const runs = [
      q.run({ priority: "normal", createdAt: at(0) }, step("first", gate)),
      q.run({ priority: "normal", createdAt: at(0) }, step("second", gate)),
      q.run({ priority: "background", createdAt: at(1) }, step("background")),
      q.run({ priority: "normal", createdAt: at(3) }, step("normal-newer")),
      q.run({ priority: "normal", createdAt: at(2) }, step("normal-older")),
      q.run({ priority: "foreground", createdAt: at(4) }, step("foreground")),
    ];
    expect(q.waiting).toBe(4);
    release();
    await Promise.all(runs);
    expect(order).toEqual(["first", "second", "foreground", "normal-older", "normal-newer", "background"]);
    expect(peak).toBeLessThanOrEqual(2);
    expect(q.running).toBe(0);
  });

  it("frees its slot when a step fails", async () => {
    const q = new StepQueue(1);
    await expect(
      q.run({ priority: "normal", createdAt: "" }, async () => Promise.reject(new Error("boom"))),
    ).rejects.toThrow("boom");
    expect(await q.run({ priority: "normal", createdAt: "" }, async () => 42)).toBe(42);
  });
});
