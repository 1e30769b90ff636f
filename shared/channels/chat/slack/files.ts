import * as z from "zod";
import { addSharedFiles as addFiles, type SharedFile } from "../shared-files.ts";
import type { SlackPerson } from "./identity.ts";
import type { Inbound } from "./inbound.ts";

/**
 * Files shared with the bot in Slack (a mention or a direct message with files) become the
 * tenant's documents (../shared-files.ts). Each is downloaded with the workspace's bot token, and
 * only from Slack's file host (or the settings' API host: a test's fake Slack): the token goes
 * nowhere else, whatever an event names.
 */
export const SlackFileSchema = z
  .object({
    id: z.string().min(1).max(64),
    name: z.string().max(500).optional(),
    title: z.string().max(500).optional(),
    mimetype: z.string().max(200).optional(),
    size: z.number().int().nonnegative().optional(),
    url_private_download: z.string().max(2000).optional(),
  })
  .loose();
export type SlackFile = z.output<typeof SlackFileSchema>;

/** Where Slack serves files: its file host, or the settings' API host (a test's fake Slack). */
function fromSlack(url: string, apiUrl: string): boolean {
  try {
    const u = new URL(url);
    return (
      (u.protocol === "https:" && u.hostname === "files.slack.com") || u.origin === new URL(apiUrl).origin
    );
  } catch {
    return false;
  }
}

export function addSharedFiles(
  x: Inbound,
  person: SlackPerson,
  files: readonly SlackFile[],
): Promise<string[]> {
  const shared = files.map((f): SharedFile => {
    const url = f.url_private_download;
    return {
      name: f.name ?? f.title ?? f.id,
      ...(f.size !== undefined ? { size: f.size } : {}),
      ...(f.mimetype ? { contentType: f.mimetype } : {}),
      ...(url && fromSlack(url, x.slack.apiUrl)
        ? { url, headers: { authorization: `Bearer ${x.ws.botToken}` } }
        : {}),
    };
  });
  return addFiles(x.parts.engine, person, shared);
}
