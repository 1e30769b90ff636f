import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import {
  createServerApp,
  type RunningServer,
  type ServerAppParts,
  startServer,
} from "../../shared/channels/http/http-server.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST } from "./scenarios.ts";

/**
 * The real HTTP server (HTTP API and A2A endpoint, as `arbor serve` mounts them) on an ephemeral port of
 * 127.0.0.1, around an engine a test holds; its public URL is where it listens.
 */
export async function serveHttp(parts: Omit<ServerAppParts, "publicUrl">): Promise<RunningServer> {
  let url = "";
  const server = await startServer(createServerApp({ ...parts, publicUrl: () => url }), {
    port: 0,
    host: "127.0.0.1",
  });
  url = server.url;
  return server;
}

export const acme = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
export const beta = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: [] });

/**
 * Two tenants behind one real server: the generalist in acme and in beta (election always finds a
 * tenant's own assistant, so the only question asked is the plan's approval), and `acme`'s and `beta`'s keys.
 */
export async function twoTenantServer(
  script: ScriptFunction,
): Promise<{ h: Harness; server: RunningServer }> {
  const h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  try {
    await h.engine.registerAssistants("beta", GENERALIST);
    const server = await serveHttp({
      engine: h.engine,
      keys: new ApiKeys({ keys: [acme.entry, beta.entry] }),
    });
    return { h, server };
  } catch (error) {
    await h.close();
    throw error;
  }
}
