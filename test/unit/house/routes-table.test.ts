import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { appRoutes, generatedPart, ROOT, type Route, routesTable } from "../../../scripts/doc-tables.ts";
import { ROUTE_PURPOSES } from "../../../shared/channels/http/route-purposes.ts";

/**
 * docs/http-api.md's table of routes is the app's: every route of the one app (createServerApp,
 * chat channels and notify routes mounted) has its line in shared/channels/http/route-purposes.ts,
 * every line there names a route the app has, and the table between the doc's markers is what
 * `npm run docs:tables` makes of them. A route added, removed or described anew fails here until
 * the command is run.
 */
let routes: Route[];
beforeAll(async () => {
  routes = await appRoutes();
});
const key = (r: Route) => `${r.method} ${r.path}`;

describe("the routes table of docs/http-api.md", () => {
  it("lists the app's channels", () => {
    const paths = routes.map((r) => r.path);
    for (const path of [
      "/v1/messages",
      "/healthz",
      "/a2a",
      "/.well-known/agent-card.json",
      "/slack/events",
      "/teams/messages",
    ])
      expect(paths).toContain(path);
  });

  it("has a purpose for every route, and no purpose for a route the app lacks", () => {
    const keys = routes.map(key);
    expect(
      keys.filter((k) => !(k in ROUTE_PURPOSES)),
      "routes without a line in route-purposes.ts",
    ).toEqual([]);
    expect(
      Object.keys(ROUTE_PURPOSES).filter((k) => !keys.includes(k)),
      "lines for routes that are gone",
    ).toEqual([]);
  });

  it("is what npm run docs:tables makes", () => {
    const doc = readFileSync(join(ROOT, "docs/http-api.md"), "utf8");
    expect(generatedPart(doc, "routes"), "docs/http-api.md is stale: run npm run docs:tables").toBe(
      routesTable(routes),
    );
  });
});
