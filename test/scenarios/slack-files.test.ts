import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDocument, listDocuments } from "../../shared/knowledge/documents.ts";
import { eventCallback } from "../peers/fake-slack.ts";
import { GENERALIST } from "./scenarios.ts";
import { oneVenue, type SlackWorld, startSlackWorld, TEAM } from "./slack-world.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * A file shared with the bot in Slack becomes one of the tenant's documents: downloaded with the
 * workspace's bot token from Slack's file host only, through the outbound guard, by an admin of
 * the workspace only; every file's outcome is told to the person who shared it, only them.
 */
let w: SlackWorld;
beforeAll(async () => {
  w = await startSlackWorld({ script: oneVenue, assistants: GENERALIST, outbound: LOOPBACK_ALLOWED });
});
afterAll(() => w?.close());

let seq = 0;
/** A direct message from `user` sharing `files`, with `text`. */
const share = (user: string, files: Record<string, unknown>[], text = "") =>
  w.post(
    "/slack/events",
    eventCallback({
      team: TEAM,
      eventId: `EvF${++seq}`,
      event: {
        type: "message",
        subtype: "file_share",
        channel_type: "im",
        channel: "D1",
        user,
        text,
        ts: `1780000${seq}.000100`,
        files,
      },
    }),
  );
const told = () => w.fake.calls("chat.postEphemeral").at(-1)?.args.text as string;

describe("a file shared with the bot in Slack", () => {
  it("by an admin: downloaded with the bot token, added as a document, and read", async () => {
    const file = w.fake.addFile("handbook.md", "# Handbook\n\nRefunds within 14 days.\n", "text/markdown");
    expect((await share("U_ADM", [file])).status).toBe(200);
    await w.h.idle();
    expect(told()).toMatch(/handbook\.md: added to the documents/);
    expect(w.fake.downloads().at(-1)?.token).toBe("xoxb-test-token-acme-1");
    const { documents } = await listDocuments(w.h.engine.deps, "acme");
    const doc = documents.find((d) => d.name === "handbook.md");
    expect(doc?.addedBy).toBe("user_slack.T1.U_ADM");
    expect((await getDocument(w.h.engine.deps, "acme", doc?.urn as string)).status).toBe("ready");
  });

  it("by someone who is not an admin: refused, nothing downloaded, told why", async () => {
    const before = w.fake.downloads().length;
    const file = w.fake.addFile("notes.md", "# Notes", "text/markdown");
    await share("U_BOB", [file]);
    expect(told()).toMatch(/notes\.md: not added, only the tenant's admins add documents/);
    expect(w.fake.downloads().length).toBe(before);
  });

  it("pointing anywhere but Slack's file host: never downloaded, the token goes nowhere", async () => {
    const before = w.fake.downloads().length;
    await share("U_ADM", [
      { id: "F9", name: "evil.md", size: 10, url_private_download: "https://attacker.example/steal" },
    ]);
    expect(told()).toMatch(/evil\.md: not added, the chat gave no download link/);
    expect(w.fake.downloads().length).toBe(before);
  });

  it("too large, or not a document: refused, saying which and why", async () => {
    const zip = w.fake.addFile(
      "report.pdf",
      Buffer.from([0x50, 0x4b, 0x03, 0x04, 1, 2, 3]),
      "application/pdf",
    );
    await share("U_ADM", [{ id: "F8", name: "huge.txt", size: 50_000_000, url_private_download: "x" }, zip]);
    expect(told()).toMatch(/huge\.txt: not added, it is 50000000 bytes/);
    expect(told()).toMatch(/report\.pdf: not added, .*ZIP archive/);
  });

  it("with a request beside it: the files are added, and the request starts", async () => {
    const file = w.fake.addFile("venues.txt", "The barn seats forty.", "text/plain");
    await share("U_ADM", [file], "Where should the offsite be?");
    await w.h.idle();
    expect(told()).toMatch(/venues\.txt: added/);
    expect(w.fake.calls("chat.postMessage").length).toBeGreaterThan(0);
  });
});
