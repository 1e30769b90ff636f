import type { Usage } from "../domain/budgets.ts";
import type { TaskStatus } from "../domain/task-state.ts";
import { lastElement } from "../domain/urn.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { GLYPH, note } from "./render.ts";

/**
 * The task tree of a running request, drawn as it changes: status, assistant with its election
 * score, and tokens used. On a terminal it redraws in place; in a pipe or a log it prints one line
 * per status change, and the whole tree at the end.
 */
interface Row {
  taskId: string;
  line: string;
  status: TaskStatus;
  title: string;
}

export class LiveTree {
  #timer: NodeJS.Timeout | undefined;
  #drawn = 0;
  readonly #seen = new Map<string, TaskStatus>();
  readonly #tty: boolean;

  constructor(
    readonly rt: Runtime,
    readonly rootId: string,
    readonly out: NodeJS.WriteStream,
  ) {
    this.#tty = out.isTTY === true;
  }

  /** Draws soon (at most ten times a second). */
  schedule(): void {
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.draw();
    }, 100);
  }

  /** No more drawing (call before the runtime closes). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Keeps what is on screen (a question follows); the next draw starts below it. */
  release(): void {
    this.#drawn = 0;
  }

  async draw(final = false): Promise<void> {
    const rows = await this.#rows();
    if (this.#tty) {
      if (this.#drawn > 0) this.out.write(`\u001b[${this.#drawn}A\u001b[J`);
      this.out.write(`${rows.map((r) => r.line).join("\n")}\n`);
      this.#drawn = rows.length;
      return;
    }
    for (const r of rows) {
      if (this.#seen.get(r.taskId) !== r.status)
        this.out.write(`${GLYPH[r.status]} ${r.title}: ${r.status}\n`);
      this.#seen.set(r.taskId, r.status);
    }
    if (final) this.out.write(`\n${rows.map((r) => r.line).join("\n")}\n`);
  }

  async #rows(): Promise<Row[]> {
    const rows: Row[] = [];
    const walk = async (taskId: string, prefix: string, last: boolean, top: boolean) => {
      const view = await this.rt.tasks.view(taskId);
      if (!view) return;
      const task = await this.rt.resources.getAs("plan.Task", taskId);
      const usage = (await this.rt.state.get<Usage>(`usage#${taskId}`))?.data;
      const who = task?.election
        ? `${lastElement(task.election.assistant).id} ${task.election.score.toFixed(2)}`
        : "unassigned";
      const tokens = usage ? `, ${usage.inputTokens + usage.outputTokens} tok` : "";
      const branch = top ? "" : last ? "└─ " : "├─ ";
      rows.push({
        taskId,
        status: view.status,
        title: view.title,
        line: `${prefix}${branch}${GLYPH[view.status]} ${view.title} ${note(`[${view.status}] ${who}${tokens}`)}`,
      });
      const children = await this.rt.tasks.children(taskId);
      const next = top ? "" : `${prefix}${last ? "   " : "│  "}`;
      for (const [i, c] of children.entries()) await walk(c.taskId, next, i === children.length - 1, false);
    };
    await walk(this.rootId, "", true, true);
    return rows;
  }
}
