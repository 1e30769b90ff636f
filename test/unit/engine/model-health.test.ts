import { describe, expect, it } from "vitest";
import {
  ModelHealth,
  PROBE_TIMEOUT_MS,
  PROBE_TTL_MS,
  RECENT_CALL_MS,
} from "../../../shared/engine/model-health.ts";
import { ArborError, ThrottledError, UnavailableError } from "../../../shared/kernel/errors.ts";

/** What /healthz is told of the model: the engine's calls first, else a bounded, cached probe. */
describe("ModelHealth", () => {
  it("keeps the last calls' outcome: a streak of failures since its first, ended by a success", async () => {
    let now = Date.parse("2026-06-01T09:00:00.000Z");
    const health = new ModelHealth({}, () => now);
    expect(await health.status()).toEqual({ status: "unknown" });
    health.failed(new UnavailableError("Could not reach the server (ECONNREFUSED)"));
    now += 4_000;
    health.failed(new UnavailableError("Could not reach the server (ECONNREFUSED)"));
    expect(health.failingForMs()).toBe(4_000);
    expect(await health.status()).toEqual({
      status: "unreachable",
      from: "calls",
      at: "2026-06-01T09:00:04.000Z",
      since: "2026-06-01T09:00:00.000Z",
      error: "Could not reach the server (ECONNREFUSED)",
    });
    health.failed(new ThrottledError("slow down"));
    expect((await health.status()).status).toBe("failing");
    health.failed(new ArborError("CONFIG", "answered 401: check the apiKey"));
    expect(await health.status()).toMatchObject({
      status: "failing",
      error: "answered 401: check the apiKey",
    });
    now += 1_000;
    health.succeeded();
    expect(health.failingForMs()).toBe(0);
    expect(await health.status()).toEqual({ status: "ok", from: "calls", at: "2026-06-01T09:00:05.000Z" });
  });

  it("probes when no call is recent: once per TTL, shared by concurrent checks, and answers what calls said before", async () => {
    let now = 0;
    let probes = 0;
    let reachable = false;
    const health = new ModelHealth(
      {
        probe: async () => {
          probes++;
          if (!reachable) throw new UnavailableError("Could not reach the server (ECONNREFUSED)");
        },
      },
      () => now,
    );
    const [a, b] = await Promise.all([health.status(), health.status()]);
    expect(a).toEqual(b);
    expect(a).toMatchObject({
      status: "unreachable",
      from: "probe",
      error: expect.stringContaining("ECONNREFUSED"),
    });
    expect(probes).toBe(1);
    reachable = true;
    now += PROBE_TTL_MS - 1;
    expect((await health.status()).status).toBe("unreachable"); // cached
    now += 1;
    expect(await health.status()).toMatchObject({ status: "ok", from: "probe" });
    expect(probes).toBe(2);
    // A recent call answers without a probe; an old one no longer does.
    health.failed(new UnavailableError("down again"));
    expect(await health.status()).toMatchObject({ status: "unreachable", from: "calls" });
    now += RECENT_CALL_MS + PROBE_TTL_MS;
    expect(await health.status()).toMatchObject({ status: "ok", from: "probe" });
    expect(probes).toBe(3);
  });

  it("bounds a probe that gets no answer", async () => {
    const health = new ModelHealth({
      probe: (signal) =>
        new Promise<void>((_resolve, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason)),
        ),
    });
    const started = Date.now();
    const status = await health.status();
    expect(Date.now() - started).toBeLessThan(PROBE_TIMEOUT_MS + 1_000);
    expect(status).toMatchObject({ status: "unreachable", from: "probe" });
  });
});
