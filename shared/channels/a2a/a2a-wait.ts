import { COMMANDS, SOURCE } from "../../engine/context.ts";
import type { Engine } from "../../engine/engine.ts";
import { INTERACTION_REQUESTED } from "../../engine/interactions.ts";
import { outputMeta } from "../../engine/steps/outcome.ts";
import type { Authenticated } from "../../ports/key-store.ts";
import { isUnderway, type Outcome, readOutcome } from "../../protocols/a2a/a2a-mapping.ts";

/**
 * Waits until a request ends or asks a person (no longer submitted or working), woken by the root's output announcement and by
 * interaction notices under it; reads the state again every `recheckMs` in case a notice was lost.
 * Undefined when `signal` fires or `waitMs` passes first.
 */
export async function settled(
  engine: Engine,
  rootTaskId: string,
  who: Authenticated,
  signal: AbortSignal,
  options: { waitMs: number; recheckMs: number; name: string },
): Promise<Outcome | undefined> {
  const bus = engine.deps.bus;
  let woken = false;
  let wake: (() => void) | undefined;
  const poke = async () => {
    woken = true;
    wake?.();
  };
  const offs = [
    bus.subscribe({
      name: `${options.name} output`,
      pattern: {
        source: ["arbor"],
        "detail-type": [COMMANDS.resourcePut],
        detail: { urn: [outputMeta(rootTaskId).id] },
      },
      handler: poke,
    }),
    bus.subscribe({
      name: `${options.name} interaction`,
      pattern: {
        source: [SOURCE],
        "detail-type": [INTERACTION_REQUESTED],
        detail: { taskId: [{ prefix: rootTaskId }] },
      },
      handler: poke,
    }),
  ];
  const deadline = performance.now() + options.waitMs;
  try {
    for (;;) {
      woken = false;
      const outcome = await readOutcome(engine, rootTaskId, who);
      if (!isUnderway(outcome)) return outcome;
      if (signal.aborted) return undefined;
      if (!woken) {
        const left = deadline - performance.now();
        if (left <= 0) return undefined;
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            wake = undefined;
            resolve();
          };
          const timer = setTimeout(done, Math.min(left, options.recheckMs));
          signal.addEventListener("abort", done, { once: true });
          wake = done;
        });
      }
    }
  } finally {
    for (const off of offs) off();
  }
}
