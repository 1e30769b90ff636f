import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/** The Teams app package in the repository: the manifest a tenant uploads, and its two icons. */
const dir = join(import.meta.dirname, "../../../../../shared/channels/chat/teams/app-package");

const pngSize = (file: string) => {
  const bytes = readFileSync(join(dir, file));
  expect(bytes.subarray(1, 4).toString("latin1")).toBe("PNG");
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20), bytes: bytes.length };
};

describe("the Teams app package", () => {
  it("declares a bot for chats and channels, taking files (they become documents), with placeholders to fill", () => {
    const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
    expect(Number(manifest.manifestVersion)).toBeGreaterThanOrEqual(1.17);
    expect(manifest.id).toBe("{{APP_ID}}");
    const [bot] = manifest.bots;
    expect(bot).toMatchObject({ botId: "{{BOT_ID}}", supportsFiles: true });
    expect([...bot.scopes].sort()).toEqual(["groupChat", "personal", "team"]);
    expect(manifest.validDomains).toEqual(["{{PUBLIC_HOSTNAME}}"]);
    expect(manifest.icons).toEqual({ color: "color.png", outline: "outline.png" });
    expect(manifest.description.short.length).toBeLessThanOrEqual(80);
    expect(manifest.name.short.length).toBeLessThanOrEqual(30);
  });

  it("has a 192x192 color icon and a 32x32 outline icon, both small", () => {
    expect(pngSize("color.png")).toMatchObject({ width: 192, height: 192 });
    expect(pngSize("outline.png")).toMatchObject({ width: 32, height: 32 });
    expect(pngSize("color.png").bytes + pngSize("outline.png").bytes).toBeLessThan(4096);
  });
});
