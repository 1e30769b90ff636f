import { hash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Context } from "hono";
import { ConfigError } from "../../kernel/errors.ts";

/**
 * The console's two static files, `console.js` and `console.css`, read once (at the first request
 * for one) and served with an ETag (a reload that has them asks and gets a 304).
 *
 * They are kept as plain files in assets/ beside this module. In a Lambda bundle everything is one
 * module file, and the infra's bundling copies the two files beside it
 * (infra/constructs/engine-function.ts, CONSOLE_ASSETS): so they are looked for in assets/ next to
 * this module first, then next to the bundle.
 */
export const ASSET_FILES = {
  "console.js": "text/javascript; charset=utf-8",
  "console.css": "text/css; charset=utf-8",
} as const;
export type AssetName = keyof typeof ASSET_FILES;

interface Asset {
  body: string;
  etag: string;
  type: string;
}

function read(name: AssetName): Asset {
  const places = [new URL(`./assets/${name}`, import.meta.url), new URL(`./${name}`, import.meta.url)];
  for (const place of places) {
    try {
      const body = readFileSync(place, "utf8");
      return { body, etag: `"${hash("sha256", body).slice(0, 20)}"`, type: ASSET_FILES[name] };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
  }
  throw new ConfigError(
    `The console's ${name} is missing (looked in ${places.map(String).join(" and ")}): reinstall Arbor, or redeploy the stack`,
  );
}

let assets: Map<string, Asset> | undefined;

/** The asset's response (404 for any other name; 304 when the browser has it). */
export function assetResponse(c: Context, name: string): Response {
  assets ??= new Map(Object.keys(ASSET_FILES).map((n) => [n, read(n as AssetName)]));
  const asset = assets.get(name);
  if (!asset) return c.text("Not found", 404);
  c.header("ETag", asset.etag);
  c.header("Cache-Control", "no-cache");
  // Sent compressed, the tag comes back weak (W/"..."): the same file all the same.
  if (c.req.header("if-none-match")?.replace(/^W\//, "") === asset.etag) return c.body(null, 304);
  c.header("Content-Type", asset.type);
  return c.body(asset.body);
}
