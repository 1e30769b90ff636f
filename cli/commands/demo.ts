import type { Command } from "../command.ts";

export const demo: Command = {
  name: "demo",
  usage: ["demo"],
  summary: "walk through the local foundation: resources, task log, event bus, replay",
  examples: ["arbor demo && arbor ls --all"],

  async local({ write }) {
    const { withRuntime } = await import("../lib/local.ts");
    const { runDemo } = await import("../lib/demo.ts");
    return withRuntime(demo, (rt) => runDemo(rt, write), { bus: { deliveries: 2 }, lockAs: "arbor demo" });
  },
};
