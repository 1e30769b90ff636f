import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listDocuments } from "../../shared/knowledge/documents.ts";
import { ROOT, startTeamsWorld, stopTeamsWorld, type TeamsWorld } from "./teams-world.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * A file shared with the bot in a Teams personal chat becomes one of the tenant's documents: Teams
 * hands it as a `file.download.info` attachment with a pre-authenticated URL, downloaded through the
 * outbound guard, by an admin only; the outcome is the bot's reply in the chat.
 */
let w: TeamsWorld;
let files: Server;
let base: string;
const served: string[] = [];

beforeAll(async () => {
  w = await startTeamsWorld({ outbound: LOOPBACK_ALLOWED });
  files = createServer((req, res) => {
    served.push(req.url ?? "");
    res.writeHead(200, { "content-type": "text/markdown" }).end("# Travel\n\nTrains under four hours.\n");
  });
  await new Promise<void>((r) => files.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
});
afterAll(async () => {
  files?.close();
  await stopTeamsWorld(w);
});

/** A message of `from` carrying one shared file, and `text`. */
const sharing = (from: string, name: string, url: string, text = "") => ({
  ...w.message(text, { from }),
  text: text ? `<at>Arbor</at> ${text}` : "",
  attachments: [
    {
      contentType: "application/vnd.microsoft.teams.file.download.info",
      name,
      content: { downloadUrl: url, uniqueId: "u1", fileType: "md" },
    },
  ],
});
const lastReply = () => {
  const call = w.teams.activities.at(-1) as { body?: { text?: string } } | undefined;
  return call?.body?.text ?? "";
};

describe("a file shared with the bot in Teams", () => {
  it("by an admin: downloaded and added as a document", async () => {
    const res = await w.send(sharing(ROOT, "travel.md", `${base}/download/travel.md?tempauth=x`));
    expect(res.status).toBe(200);
    await w.h.idle();
    expect(lastReply()).toMatch(/travel\.md: added to the documents/);
    const { documents } = await listDocuments(w.h.engine.deps, "acme");
    expect(documents.map((d) => [d.name, d.status])).toContainEqual(["travel.md", "ready"]);
  });

  it("by someone who is not an admin: refused, nothing downloaded", async () => {
    const before = served.length;
    await w.send(sharing("0a0a0a0a-0000-0000-0000-00000000ada0", "mine.md", `${base}/download/mine.md`));
    expect(lastReply()).toMatch(/mine\.md: not added, only the tenant's admins add documents/);
    expect(served.length).toBe(before);
  });

  it("at an address the outbound guard refuses: not added, saying why", async () => {
    await w.send(sharing(ROOT, "meta.md", "http://169.254.169.254/latest/meta-data"));
    expect(lastReply()).toMatch(/meta\.md: not added, .*169\.254\.169\.254/);
  });

  it("in a channel: not read (Teams gives no link there), and the person is told where to share it", async () => {
    const before = served.length;
    const base = w.message("", { from: ROOT, conversation: "19:general@thread.tacv2;messageid=1700" });
    const res = await w.send({
      ...base,
      text: "<at>Arbor</at>",
      conversation: { ...(base.conversation as object), conversationType: "channel" },
      attachments: [
        {
          contentType: "text/html",
          content: '<div><at>Arbor</at> <attachment id="5e1c"></attachment></div>',
        },
      ],
    });
    expect(res.status).toBe(200);
    expect(lastReply()).toMatch(/not added to the documents.*personal chat/);
    expect(served.length).toBe(before);
  });
});
