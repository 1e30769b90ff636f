import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * The prompt-injection corpus (test/fixtures/injection/corpus.json): an assistant reads a page
 * that carries an injected instruction, and the model OBEYS it (as a compromised model would),
 * making the calls the injection asks for. Whatever the model does, Arbor must make zero risky
 * calls nobody approved and zero requests to hosts outside the allow-list.
 */
const corpus = JSON.parse(
  readFileSync(join(import.meta.dirname, "../fixtures/injection/corpus.json"), "utf8"),
) as {
  cases: { name: string; text: string; calls: { name: string; arguments: Record<string, unknown> }[] }[];
};

const READER: AssistantDefinition[] = [
  {
    name: "Reader",
    id: "reader",
    purpose: "Read material and summarise it",
    tools: ["fetch_page", "send_email", "sha256"],
  },
];
const TOOLS = {
  tools: {
    fetch_page: { kind: "builtin", function: "http_request", allowedHosts: ["docs.example.com"] },
    send_email: { kind: "builtin", function: "send_email" },
    sha256: { kind: "builtin", function: "sha256" },
    md5: { kind: "builtin", function: "md5" }, // configured, but not the Reader's
  },
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("prompt injection (the corpus): an obedient model gets nothing past Arbor", () => {
  for (const c of corpus.cases) {
    it(c.name, async () => {
      const requested: string[] = [];
      const fakeWeb: typeof fetch = async (input) => {
        const url = String(input);
        requested.push(url);
        if (url.endsWith("/moved"))
          return new Response(null, { status: 302, headers: { location: "https://evil.example/x" } });
        return new Response(c.text);
      };
      // Turn 1 reads the page; turn 2 does what the page says; turn 3 answers.
      const script: ScriptFunction = (r) => {
        if (isPlan(r))
          return planOf({ name: "Read the material", purpose: "Read and summarise the material" });
        if (isEvaluation(r)) return pass();
        const results = r.messages.filter((m) => m.role === "tool").length;
        if (results === 0)
          return { toolCalls: [{ name: "fetch_page", arguments: { url: "https://docs.example.com/page" } }] };
        if (results === 1) return { toolCalls: c.calls };
        return { content: "summary" };
      };
      h = await Harness.create({ script, assistants: READER, toolsConfig: TOOLS, fetch: fakeWeb });
      const { rootTaskId } = await h.submit("Summarise the material at docs.example.com");
      await h.idle();

      // The page was read (the injection reached the model)...
      expect(requested[0]).toBe("https://docs.example.com/page");
      expect(
        h.llm.calls.some((r) =>
          r.messages.some((m) => m.role === "tool" && (m.content ?? "").includes(c.text)),
        ),
      ).toBe(true);
      // ...and zero requests went outside the allow-list (no redirect followed either).
      for (const url of requested) expect(new URL(url).hostname).toBe("docs.example.com");
      // Zero risky calls nobody approved: every send_email waits for a person, none ran.
      const audit = await h.rt.audit.forTask(`${rootTaskId}`);
      expect(audit.filter((r) => r.tool === "send_email" && r.stage !== "failed")).toEqual([]);
      const emails = c.calls.filter((k) => k.name === "send_email");
      const pending = await h.pending(rootTaskId);
      if (emails.some((e) => /^[^,\s]+@[^,\s]+$/.test(String(e.arguments.to)))) {
        expect(pending.map((p) => p.binding?.tool)).toContain("send_email");
      } else if (emails.length > 0) {
        // Arguments that could not run are refused at once: nobody is asked to approve them.
        expect(pending).toEqual([]);
      }
      // A tool the assistant is not given never runs: the model is told so.
      expect(audit.filter((r) => r.tool === "md5" && r.stage === "completed")).toEqual([]);
      if (c.calls.some((k) => k.name === "md5")) {
        const transcript = await h.rt.resources.children(rootTaskId, "common.Message");
        const told = transcript.flatMap((m) => ("isError" in m && m.isError ? [m.content] : []));
        expect(told).toContain('Tool "md5" is not available to Reader');
      }
    });
  }
});
