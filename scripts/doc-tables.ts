/**
 * The docs' generated tables, made from the code:
 *
 *   npm run docs:tables            # writes every generated table into its doc
 *   npm run docs:tables -- --check # writes nothing; exits 1 naming each table that is stale
 *
 * A generated table sits in its doc between two comment lines that name it:
 *
 *   <!-- generated: routes (npm run docs:tables) -->
 *   | method | path | what it is for |
 *   ...
 *   <!-- end generated: routes -->
 *
 * Everything between them is the generator's; edit the source it is made from, then run the
 * command. test/unit/house/routes-table.test.ts fails when a table is not what the code makes.
 *
 * Tables: `routes` in docs/http-api.md, every route of the one app (createServerApp, as `arbor
 * serve` and the API function mount it, with the chat channels and the notify routes) and its line
 * in shared/channels/http/route-purposes.ts.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { inspectRoutes } from "hono/dev";
import { ScriptedLlm } from "../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys } from "../shared/adapters/local/api-keys.ts";
import { chatRoutes } from "../shared/channels/chat/chat-routes.ts";
import { createServerApp } from "../shared/channels/http/http-server.ts";
import { ROUTE_PURPOSES } from "../shared/channels/http/route-purposes.ts";
import { createLocalRuntime } from "../shared/runtime/local/local.ts";
import { createLocalEngine } from "../shared/runtime/local/local-engine.ts";
import { startLocalNotify } from "../shared/runtime/local/local-notify.ts";

export const ROOT = join(import.meta.dirname, "..");

export interface Route {
  method: string;
  path: string;
}

/**
 * Every route of the one app, in the app's order (middleware left out): the app is built as `arbor
 * serve` builds it, on a local runtime in a temporary folder with a model that is never called,
 * no keys, and the chat channels mounted (their settings empty: the routes exist either way).
 */
export async function appRoutes(): Promise<Route[]> {
  const dataDir = await mkdtemp(join(tmpdir(), "arbor-routes-"));
  const rt = createLocalRuntime({ mode: "local", tenant: "local", dataDir, durable: false });
  try {
    const engine = await createLocalEngine(rt, { llm: new ScriptedLlm([]) });
    const notify = startLocalNotify(engine);
    try {
      const app = createServerApp({
        engine,
        keys: new ApiKeys({ keys: [] }),
        publicUrl: "http://127.0.0.1:8787",
        notify: notify.service,
        chat: chatRoutes({ engine, notify: notify.service, settings: async () => undefined }),
      });
      const seen = new Set<string>();
      const routes: Route[] = [];
      for (const { method, path, isMiddleware } of inspectRoutes(app)) {
        const key = `${method} ${path}`;
        if (isMiddleware || seen.has(key)) continue;
        seen.add(key);
        routes.push({ method, path });
      }
      return routes;
    } finally {
      await notify.stop();
      await engine.close();
    }
  } finally {
    await rt.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** A Markdown table cell: pipes escaped, one line. */
const cell = (text: string) => text.replaceAll("|", "\\|").replaceAll("\n", " ");

/** The routes table: one row per route, its purpose from ROUTE_PURPOSES ("(none)" where it has none). */
export function routesTable(routes: readonly Route[]): string {
  const rows = routes.map(
    ({ method, path }) =>
      `| ${method} | \`${path}\` | ${cell(ROUTE_PURPOSES[`${method} ${path}`] ?? "(no purpose: add it to route-purposes.ts)")} |`,
  );
  return ["| method | path | what it is for |", "|---|---|---|", ...rows].join("\n");
}

export interface GeneratedTable {
  /** The doc, from the root of the checkout. */
  doc: string;
  /** The name in its markers. */
  name: string;
  make(): Promise<string>;
}

export const TABLES: readonly GeneratedTable[] = [
  { doc: "docs/http-api.md", name: "routes", make: async () => routesTable(await appRoutes()) },
];

export const startMarker = (name: string) => `<!-- generated: ${name} (npm run docs:tables) -->`;
export const endMarker = (name: string) => `<!-- end generated: ${name} -->`;

/** What stands between a table's markers in `text` (without the newlines next to them). */
export function generatedPart(text: string, name: string): string {
  const start = text.indexOf(startMarker(name));
  const end = text.indexOf(endMarker(name));
  if (start < 0 || end < start)
    throw new Error(`no ${startMarker(name)} ... ${endMarker(name)} in order in the doc`);
  return text
    .slice(start + startMarker(name).length, end)
    .replace(/^\n/, "")
    .replace(/\n$/, "");
}

/** `text` with the part between the table's markers replaced by `table`. */
export function withGenerated(text: string, name: string, table: string): string {
  generatedPart(text, name); // the markers are there, in order
  const start = text.indexOf(startMarker(name)) + startMarker(name).length;
  return `${text.slice(0, start)}\n${table}\n${text.slice(text.indexOf(endMarker(name)))}`;
}

async function main(args: string[]): Promise<number> {
  const check = args.includes("--check");
  let stale = 0;
  for (const table of TABLES) {
    const path = join(ROOT, table.doc);
    const text = await readFile(path, "utf8");
    const next = withGenerated(text, table.name, await table.make());
    if (next === text) {
      process.stdout.write(`${table.doc}: ${table.name} is up to date\n`);
      continue;
    }
    stale++;
    if (check) process.stdout.write(`${table.doc}: ${table.name} is stale: run npm run docs:tables\n`);
    else {
      await writeFile(path, next);
      process.stdout.write(`${table.doc}: ${table.name} written\n`);
    }
  }
  return check && stale > 0 ? 1 : 0;
}

if (process.argv[1] && relative(process.argv[1], fileURLToPath(import.meta.url)) === "") {
  process.env.POWERTOOLS_LOG_LEVEL ??= "WARN";
  process.exitCode = await main(process.argv.slice(2));
}
