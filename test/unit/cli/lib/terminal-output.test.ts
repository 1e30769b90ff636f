import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { ask } from "../../../../cli/lib/ask.ts";
import { LiveTree } from "../../../../cli/lib/live-tree.ts";
import { Remote } from "../../../../cli/lib/remote.ts";
import { remoteEvents, remoteGet, remoteLs } from "../../../../cli/lib/remote-commands.ts";
import type { TreeNode } from "../../../../shared/engine/task-tree.ts";

/**
 * What the CLI prints that it did not write itself (a plan's name from the model, an assistant's
 * name from a team file, anything a remote Arbor answers) cannot drive the terminal: a plan named
 * with escape sequences must not hide, restyle or reorder the plan a person is asked to approve.
 */
const HOSTILE = "Say hello\u001b[8m\u001b]52;c;cm0gLXJmIH4=\u0007 \u202eevil\u009b2J";

function sink() {
  const out = new PassThrough();
  let text = "";
  out.on("data", (b: Buffer) => {
    text += b.toString("utf8");
  });
  return { out, text: () => text };
}

const noControl = (text: string) =>
  [...text].filter((ch) => {
    const c = ch.codePointAt(0) as number;
    return (c < 0x20 && ch !== "\n") || (c >= 0x7f && c <= 0x9f) || (c >= 0x202a && c <= 0x202e);
  });

describe("text from elsewhere on the terminal", () => {
  it("an approval's title, description and options print without control characters", async () => {
    const { out, text } = sink();
    const answers = (async function* () {
      yield "1";
    })();
    const answer = await ask(
      {
        display: {
          title: `Approve the plan for "${HOSTILE}"?`,
          description: `Line one\n${HOSTILE}`,
          content: { name: HOSTILE },
          contentKind: "Json",
        },
        options: [
          { id: "approve", label: `Run ${HOSTILE}`, style: "primary" },
          { id: "reject", label: "Cancel", style: "danger" },
        ],
      },
      false,
      answers,
      out,
    );
    expect(answer).toEqual({ selectedOptionId: "approve" });
    expect(noControl(text())).toEqual([]);
    expect(text()).toContain("Say hello");
    expect(text()).toContain("Line one\n");
  });

  it("the live tree prints task titles and assistant names without control characters", async () => {
    const { out, text } = sink();
    const node: TreeNode = {
      taskId: "t",
      parentTaskId: null,
      title: HOSTILE,
      status: "in_progress",
      assistant: { urn: "a", name: HOSTILE, score: 0.5 },
      round: 0,
      budgets: {},
      createdAt: "2026-11-29T00:00:00.000Z",
      updatedAt: "2026-11-29T00:00:00.000Z",
      usage: { inputTokens: 0, outputTokens: 0, tokens: 0, costUsd: 0, unpricedCalls: 0 },
      pendingInteractions: [],
      childCount: 0,
      children: [],
    };
    const tree = new LiveTree(async () => node, out as unknown as NodeJS.WriteStream);
    await tree.draw(true);
    expect(text()).toContain("Say hello");
    expect(noControl(text())).toEqual([]);
  });
});

describe("what a remote Arbor answers, on the terminal", () => {
  const hostileServer = (async (input: string | URL | Request) => {
    const url = String(input);
    const body = url.includes("/events")
      ? {
          events: [
            { seq: 1, at: HOSTILE, type: HOSTILE, actor: { id: HOSTILE, kind: "human" }, id: HOSTILE },
          ],
        }
      : url.includes("/children")
        ? { urn: "u", children: [{ urn: HOSTILE, type: HOSTILE, name: HOSTILE, links: {} }] }
        : { resource: { meta: { id: HOSTILE, name: HOSTILE } } };
    return new Response(JSON.stringify(body), {
      status: 200,
      headers: { "content-type": "application/json" },
    });
  }) as typeof fetch;
  const remote = new Remote({ url: "http://127.0.0.1:1", key: "k".repeat(20) }, { fetch: hostileServer });

  it("arbor events, ls and get print it without control characters", async () => {
    const lines: string[] = [];
    const write = (l: string) => lines.push(l);
    await remoteEvents(remote, "cld:common.Tenant.acme/plan.Task.t", write);
    await remoteLs(remote, "cld:common.Tenant.acme", false, write);
    await remoteGet(remote, "cld:common.Tenant.acme/plan.Task.t", write);
    expect(lines.join("\n")).toContain("Say hello");
    expect(noControl(lines.join("\n"))).toEqual([]);
  });
});
