import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type { StoredEvent } from "../../shared/domain/events.ts";
import type { AnyResource } from "../../shared/domain/resources.ts";
import { isTerminal, type TaskStatus } from "../../shared/domain/task-state.ts";
import type { TreeNode } from "../../shared/engine/task-tree.ts";
import { UsageError } from "../command.ts";
import { ask, type Question } from "./ask.ts";
import { httpEditHelp, pausing, planEditor } from "./edit-plan.ts";
import { LiveTree } from "./live-tree.ts";
import { enc, notAgain, type Remote, RemoteError } from "./remote.ts";
import { heading, note, printable } from "./render.ts";

/**
 * `arbor run`, `ls`, `get` and `events` against a remote Arbor (ARBOR_URL, ARBOR_KEY) through the
 * HTTP API: the same output as on the local data folder, the tree drawn from
 * `GET /v1/tasks/:urn/tree` (polled with backoff), questions answered here with
 * `POST /v1/interactions/:urn/answer`.
 */
type Write = (line: string) => void;

interface Me {
  actor: { id: string };
  tenant: string;
  tenantUrn: string;
  roles: string[];
}
interface Submitted {
  conversationUrn: string;
  rootTaskId: string;
}
interface TaskAnswer {
  task: { status: TaskStatus; failureReason?: string };
  output: string | null;
}
interface Pending extends Question {
  urn: string;
}
interface ChildPage {
  children: { urn: string; type: string; name: string }[];
  cursor?: string;
}

/** Polling the tree: from 250 ms, doubling while nothing changes, at most 3 s. */
const FIRST_POLL_MS = 250;
const MAX_POLL_MS = 3000;
/** After a cancel, polls this many times for the request to end (sending the cancel again now and then). */
const MAX_CANCELS = 120;
/** `ls --all` reads at most this many resources (then says it stopped). */
const MAX_LISTED = 10_000;

export interface RemoteRunOptions {
  text: string | undefined;
  lazy: boolean;
  yes: boolean;
}

export async function remoteRun(remote: Remote, options: RemoteRunOptions): Promise<number> {
  if (!options.text) throw new UsageError('Say what to do: arbor run "<message>"');
  const started = Date.now();
  // One key per command: a retry after a lost answer gets the first request's 202, not a second request.
  const submitted = await remote.post<Submitted>(
    "/v1/messages",
    { text: options.text, mode: options.lazy ? "lazy" : "eager" },
    { idempotencyKey: `cli-${randomUUID()}`, shape: { rootTaskId: "string" } },
  );
  const root = submitted.rootTaskId;
  const taskPath = `/v1/tasks/${enc(root)}`;
  process.stdout.write(
    `${heading("Request")}: ${options.text}\n${note(`Arbor at ${remote.url}, task ${root}`)}\n\n`,
  );
  // One read per poll: the tree has every status and says where questions wait.
  let tree: TreeNode | undefined;
  const live = new LiveTree(async () => tree, process.stdout);
  const lines = createInterface({ input: process.stdin, terminal: false });
  const answers = lines[Symbol.asyncIterator]();
  const held = pausing(lines); // while an editor has the terminal
  // A cancel of a request that has ended meanwhile is a 409: nothing left to cancel.
  const cancel = (reason: string) =>
    remote.post(`${taskPath}/cancel`, { reason }).catch((error: unknown) => {
      if (!(error instanceof RemoteError && error.status === 409)) throw error;
    });
  let interrupted = false;
  let cancels = 0;
  // Ctrl-C: the request is canceled (a question waiting on stdin stops waiting), and the tree is
  // drawn until it has ended; a second Ctrl-C ends the CLI at once.
  const onInterrupt = () => {
    interrupted = true;
    process.stdout.write("\nInterrupted: canceling the request.\n");
    lines.close();
    void cancel("interrupted in the terminal").catch((error: Error) =>
      process.stderr.write(`arbor: the cancel failed: ${error.message}\n`),
    );
  };
  process.once("SIGINT", onInterrupt);
  try {
    let wait = FIRST_POLL_MS;
    let seen = "";
    for (;;) {
      tree = (await remote.get<{ tree: TreeNode }>(`${taskPath}/tree?maxTasks=2000`, { tree: "object" }))
        .tree;
      await live.draw();
      if (isTerminal(tree.status)) break;
      if (interrupted) {
        // Canceling: a request not planned yet refuses a cancel (409) for a moment; ask again.
        if (++cancels > MAX_CANCELS) {
          process.stdout.write(`The request has not ended; cancel it later: it is ${root}\n`);
          return 1;
        }
        if (cancels % 8 === 0) await cancel("canceled in the terminal");
      }
      const interactions =
        asking(tree) && !interrupted
          ? (
              await remote.get<{ interactions: Pending[] }>(`${taskPath}/interactions`, {
                interactions: "array",
              })
            ).interactions
          : [];
      if (interactions.length > 0) {
        for (const interaction of interactions) {
          live.release();
          // The server checks an edit against its own budgets: the defaults here, its 400 says the rest.
          const editPlan = planEditor({
            env: process.env,
            budgets: {},
            howElse: httpEditHelp(remote.url, interaction.urn),
            ...held,
          });
          const answer = await ask(interaction, options.yes, answers, process.stdout, editPlan);
          if (!answer) {
            if (!interrupted) {
              process.stdout.write("No answer; canceling. Rerun with --yes to approve everything.\n");
              await cancel("no answer in the terminal");
            }
            interrupted = true; // asks no more: the request is being canceled
            break;
          }
          try {
            await remote.post(`/v1/interactions/${enc(interaction.urn)}/answer`, answer);
          } catch (error) {
            // Answered elsewhere meanwhile (409), or not ours to answer (403): say so and go on.
            if (!(error instanceof RemoteError) || error.status >= 500 || error.status === 0) throw error;
            process.stdout.write(`${error.message}\n`);
          }
        }
        wait = FIRST_POLL_MS;
        continue;
      }
      const now = JSON.stringify(tree);
      wait = now === seen && !interrupted ? Math.min(MAX_POLL_MS, wait * 2) : FIRST_POLL_MS;
      seen = now;
      await sleep(wait);
    }
  } finally {
    process.off("SIGINT", onInterrupt);
    lines.close();
  }
  live.stop();
  await live.draw(true);
  const { task, output } = await remote.get<TaskAnswer>(taskPath, { task: "object" });
  process.stdout.write(
    `\n${heading(task.status === "done" ? "Answer" : `The request ${task.status}`)}\n${printable(output ?? task.failureReason ?? "", true)}\n`,
  );
  process.stdout.write(
    `${note(`\n${Math.round((Date.now() - started) / 100) / 10} s. Inspect: arbor events ${root}`)}\n`,
  );
  return task.status === "done" ? 0 : 1;
}

/** Whether a question waits anywhere in the tree. */
const asking = (node: TreeNode): boolean => node.pendingInteractions.length > 0 || node.children.some(asking);

/** The URNs directly below `urn`, every page. */
async function* children(remote: Remote, urn: string): AsyncGenerator<ChildPage["children"][number]> {
  let cursor: string | undefined;
  const seen = new Set<string>();
  do {
    const page = await remote.get<ChildPage>(
      `/v1/resources/${enc(urn)}/children?limit=500${cursor ? `&cursor=${enc(cursor)}` : ""}`,
      { children: "array" },
    );
    yield* page.children;
    cursor = page.cursor;
    if (cursor !== undefined) notAgain(remote, seen, cursor, `the children of ${urn}`);
  } while (cursor);
}

export async function remoteLs(
  remote: Remote,
  urn: string | undefined,
  all: boolean,
  write: Write,
): Promise<void> {
  const top = urn ?? (await remote.get<Me>("/v1/me", { tenantUrn: "string" })).tenantUrn;
  let listed = 0;
  const walk = async (at: string): Promise<void> => {
    for await (const child of children(remote, at)) {
      if (listed >= MAX_LISTED) return;
      listed++;
      write(
        `${printable(child.type).padEnd(20)} ${printable(child.name).padEnd(28)} ${note(printable(child.urn))}`,
      );
      if (all) await walk(child.urn);
    }
  };
  await walk(top);
  if (listed === 0) write(note(`Nothing below ${top} that this key may read.`));
  if (listed >= MAX_LISTED) write(note(`Stopped after ${MAX_LISTED} resources; list a narrower URN.`));
}

export async function remoteGet(remote: Remote, urn: string, write: Write): Promise<void> {
  const { resource } = await remote.get<{ resource: AnyResource }>(`/v1/resources/${enc(urn)}`, {
    resource: "object",
  });
  write(printable(JSON.stringify(resource, null, 2), true));
}

export async function remoteEvents(remote: Remote, urn: string, write: Write): Promise<void> {
  let from: number | undefined = 1;
  let count = 0;
  while (from !== undefined) {
    const page: { events: StoredEvent[]; nextFromSeq?: number } = await remote.get(
      `/v1/tasks/${enc(urn)}/events?fromSeq=${from}&limit=500`,
      { events: "array" },
    );
    if (page.nextFromSeq !== undefined && !(page.nextFromSeq > from))
      throw new RemoteError(
        `${remote.url} pages the events of ${printable(urn)} in a way that does not move on (fromSeq ${from}, then ${printable(String(page.nextFromSeq))}): stopped`,
        200,
      );
    for (const e of page.events)
      write(
        `${printable(`${String(e.seq).padStart(4)} ${e.at} ${e.type.padEnd(26)} ${e.actor.id}`)} ${note(printable(e.id))}`,
      );
    count += page.events.length;
    from = page.nextFromSeq;
  }
  if (count === 0) write(note(`No events in stream ${urn}`));
}
