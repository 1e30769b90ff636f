import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A local HTTP endpoint that keeps the path of every request it gets and answers "ok, done",
 * after `delayMs` when set: the far side of an `http` tool with effects, whose calls a test
 * counts. `httpTool` describes a tool bound to one of its paths.
 *
 *   const endpoint = await startPostsEndpoint();
 *   toolsConfig: { tools: { notify: endpoint.httpTool("/notify", false) } }
 *   expect(endpoint.posts).toEqual(["/notify"]);
 */
export interface PostsEndpoint {
  readonly base: string;
  readonly posts: string[];
  delayMs: number;
  httpTool(path: string, risky: boolean): Record<string, unknown>;
  close(): Promise<void>;
}

export async function startPostsEndpoint(): Promise<PostsEndpoint> {
  const posts: string[] = [];
  const endpoint: PostsEndpoint = {
    base: "",
    posts,
    delayMs: 0,
    httpTool: (path, risky) => ({
      kind: "http",
      url: `${endpoint.base}${path}`,
      risky,
      timeoutMs: 120_000,
      description: `POST ${path}`,
      parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"] },
    }),
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  const server = createServer(async (req, res) => {
    for await (const _ of req); // the body
    posts.push(req.url ?? "");
    await new Promise((r) => setTimeout(r, endpoint.delayMs));
    res.writeHead(200, { "content-type": "text/plain" }).end("ok, done");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  (endpoint as { base: string }).base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return endpoint;
}
