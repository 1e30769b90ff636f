import type { Command } from "../command.ts";

export const replay: Command = {
  name: "replay",
  usage: ["replay"],
  summary: "rebuild every task view from the event log and check it against the stored views",
  examples: ["arbor replay"],

  async local({ write }) {
    const { withRuntime } = await import("../lib/local.ts");
    const { readAllEvents } = await import("../../shared/ports/state-store.ts");
    const { heading } = await import("../lib/render.ts");
    return withRuntime(replay, async (rt) => {
      let events = 0;
      for await (const _ of readAllEvents(rt.state)) events++;
      const { replayCheck } = await import("../lib/replay.ts");
      const { rebuilt, differ } = await replayCheck(rt.tasks);
      write(
        `${heading("Replay")}: ${events} events, ${rebuilt} task views rebuilt, ${differ.length} differ from the stored views`,
      );
      for (const d of differ) write(`  differs: ${d}`);
      return differ.length > 0 ? 1 : 0;
    });
  },
};
