import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { openToolWorld } from "../scenarios/tool-world.ts";
import { toolPortContract } from "./tool-port.contract.ts";

toolPortContract("ToolService in process (local mode)", async (bindings) => {
  const world = await openToolWorld("arbor-tool-port-");
  const port = new ToolService(bindings, world.options({ policy: defaultPolicy() }));
  return {
    port,
    audit: world.rt.audit,
    resources: world.rt.resources,
    close: async () => {
      await port.close();
      await world.close();
    },
  };
});
