import {
  createServerApp,
  type RunningServer,
  type ServerAppParts,
  startServer,
} from "../../shared/channels/http-server.ts";

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
