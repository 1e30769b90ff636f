import type { Command } from "../command.ts";

export const serve: Command = {
  name: "serve",
  usage: ["serve [--port <port>] [--host <address>] [--public-url <url>] [--example offsite]"],
  summary: "the HTTP API on the local runtime, for callers with an API key (Ctrl-C stops it)",
  description:
    "Serves the HTTP API, A2A and the chat channels on the local runtime, for callers with an API key (arbor keys add). Ctrl-C stops it.",
  options: [
    ["--port <port>", "the port (default 8787; 0: any free one)"],
    ["--host <address>", "the address to listen on (default 127.0.0.1)"],
    [
      "--public-url <url>",
      "where callers reach it, for the A2A agent card (default ARBOR_PUBLIC_URL, else where it listens)",
    ],
    ["--example offsite", "answer with the offline scripted model (no model needed)"],
  ],
  examples: ["arbor keys add --id user_ada --role admin && arbor serve --example offsite"],

  async local({ options }) {
    const { localConfig } = await import("../lib/local.ts");
    const config = await localConfig(serve);
    const { serveCommand } = await import("../lib/serve.ts");
    return serveCommand(config, {
      port: options.port,
      host: options.host,
      example: options.example,
      publicUrl: options["public-url"],
    });
  },
};
