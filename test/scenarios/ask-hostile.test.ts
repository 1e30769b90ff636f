import { afterEach, describe, expect, it } from "vitest";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import type { StoredEvent } from "../../shared/domain/events.ts";
import { fetchApi } from "../support/http.ts";
import { askingScript, CLERK } from "./ask-fixture.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";

/**
 * `ask_person` as its worst users use it: a key of another tenant answering, two channels answering
 * at once, and regexes written to hang the process that checks an answer (ones the rule refuses at
 * ask time, and one it lets through whose check is stopped by its clock). The server always
 * answers; a refused answer changes nothing.
 */
let h: Harness | undefined;
let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  await h?.close();
  h = undefined;
  server = undefined;
});

async function start(question: Record<string, unknown>, seen: string[] = []) {
  h = await Harness.create({
    script: askingScript(question, seen),
    assistants: CLERK,
    settings: { electionThreshold: -1 },
  });
  await h.engine.registerAssistants("beta", CLERK);
  server = await serveHttp({ engine: h.engine, keys: new ApiKeys({ keys: [acme.entry, beta.entry] }) });
  const { rootTaskId } = await h.submit("Book the offsite");
  await h.idle();
  return { h, root: rootTaskId };
}

const api = (key: string, method: string, path: string, body?: unknown) =>
  fetchApi<{ error: { code: string } }>(`${server?.url}`, method, path, key, body);
const answerPath = (urn: string) => `/v1/interactions/${encodeURIComponent(urn)}/answer`;
const events = async (hh: Harness, root: string) =>
  ((await hh.rt.state.readStream(root, { fromSeq: 1, limit: 500 })) as StoredEvent[]).map((e) => e.type);

describe("ask_person under hostile use", () => {
  it("another tenant's key cannot answer, nor learn that the question exists", async () => {
    const { h, root } = await start({ title: "Which day?" });
    const [q] = await h.pending(root);
    const urn = q?.meta.id as string;
    const before = await events(h, root);
    const theirs = await api(beta.key, "POST", answerPath(urn), { inputValue: "Monday" });
    const none = await api(beta.key, "POST", answerPath(`${urn}x`), { inputValue: "Monday" });
    expect([theirs.status, none.status]).toEqual([404, 404]);
    expect(theirs.json.error.code).toBe(none.json.error.code);
    expect((await api(beta.key, "GET", `/v1/tasks/${encodeURIComponent(root)}/interactions`)).status).toBe(
      404,
    );
    await h.idle();
    expect(await events(h, root)).toEqual(before);
    expect((await h.rt.tasks.view(root))?.status).toBe("awaiting_user");
    expect((await api(acme.key, "POST", answerPath(urn), { inputValue: "Tuesday" })).status).toBe(204);
    await h.idle();
    expect((await h.engine.result(root)).output).toBe("booked: Tuesday (told by user_ada)");
  });

  it("two channels answering at once: one answer is taken, the model sees only it, the other hears 409", async () => {
    const seen: string[] = [];
    const { h, root } = await start({ title: "Which day?" }, seen);
    const [q] = await h.pending(root);
    const urn = q?.meta.id as string;
    const [overHttp, inProcess] = await Promise.allSettled([
      api(acme.key, "POST", answerPath(urn), { inputValue: "Monday" }),
      h.engine.respond(urn, { inputValue: "Friday" }, PERSON),
    ]);
    await h.idle();
    const httpWon = overHttp.status === "fulfilled" && overHttp.value.status === 204;
    const processWon = inProcess.status === "fulfilled";
    expect(httpWon !== processWon).toBe(true); // exactly one
    if (!httpWon) expect(overHttp.status === "fulfilled" && overHttp.value.status).toBe(409);
    if (!processWon)
      expect(inProcess.status === "rejected" && String(inProcess.reason)).toMatch(/already answered/);
    const won = httpWon ? "Monday" : "Friday";
    expect(seen.map((s) => JSON.parse(s).text)).toEqual([won]);
    expect((await h.engine.result(root)).output).toMatch(new RegExp(`^booked: ${won} `));
    expect((await events(h, root)).filter((t) => t === "UserInteractionResponded")).toHaveLength(1);
  });

  it("a regex written to hang is refused when asked: the model reads why, and nothing waits", async () => {
    for (const regex of ["(a|a){30}b", "(?:\\d*){20}x", "(?=(a|aa)+)b", "((a|b){2}){10}"]) {
      const seen: string[] = [];
      const started = await start({ title: "Code?", validation: { regex } }, seen);
      expect(await started.h.pending(started.root), regex).toEqual([]);
      expect(seen[0], regex).toMatch(/Nothing was asked: .*repeated group/);
      await server?.close();
      await started.h.close();
      server = undefined;
      h = undefined;
    }
  });

  it("a regex the rule lets through whose check would run for minutes: the answer is refused, the server answers, nothing changes", async () => {
    const { h, root } = await start({
      title: "Code?",
      validation: { regex: "[\\s\\S]*[\\s\\S]*[\\s\\S]*x" },
    });
    const [q] = await h.pending(root);
    const urn = q?.meta.id as string;
    const before = await events(h, root);
    const slow = await api(acme.key, "POST", answerPath(urn), { inputValue: "a".repeat(500) });
    expect(slow.status).toBe(400);
    expect(JSON.stringify(slow.json.error)).toMatch(/in time/);
    expect((await api(acme.key, "GET", `/v1/tasks/${encodeURIComponent(root)}/interactions`)).status).toBe(
      200,
    );
    expect(await events(h, root)).toEqual(before);
    expect((await api(acme.key, "POST", answerPath(urn), { inputValue: "ax" })).status).toBe(204);
    await h.idle();
    expect((await h.rt.tasks.view(root))?.status).toBe("done");
  });
});
