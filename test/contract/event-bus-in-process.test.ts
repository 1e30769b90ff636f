import { InProcessEventBus } from "../../shared/adapters/local/in-process-event-bus.ts";
import { eventBusContract } from "./event-bus.contract.ts";

eventBusContract("InProcessEventBus", async () => {
  const bus = new InProcessEventBus({ retryDelayMs: () => 1 });
  return {
    bus,
    subscribe: async (sub) => bus.subscribe(sub),
    settle: () => bus.idle(),
    cleanup: () => bus.close(),
  };
});
