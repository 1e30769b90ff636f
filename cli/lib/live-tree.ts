import { costText } from "../../shared/domain/budgets.ts";
import type { TaskStatus } from "../../shared/domain/task-state.ts";
import { type TreeDeps, type TreeNode, taskTree } from "../../shared/engine/task-tree.ts";
import { GLYPH, note, printable } from "./render.ts";

/**
 * The task tree of a running request, drawn as it changes: status, assistant with its election
 * score, and tokens used. On a terminal it redraws in place; in a pipe or a log it prints one line
 * per status change, and the whole tree at the end. The tree comes from a source: the local
 * runtime (localTree) or a remote Arbor's `GET /v1/tasks/:urn/tree` (remote.ts), the same walk.
 */
export type TreeSource = () => Promise<TreeNode | undefined>;

/** The tree of a request on the local runtime (no bound: the CLI draws the tree of its own request). */
export const localTree =
  (rt: TreeDeps, rootId: string): TreeSource =>
  async () => {
    const root = await rt.tasks.view(rootId);
    return root ? (await taskTree(rt, root, [], Number.POSITIVE_INFINITY)).root : undefined;
  };

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
  readonly source: TreeSource;
  readonly out: NodeJS.WriteStream;

  constructor(source: TreeSource, out: NodeJS.WriteStream) {
    this.source = source;
    this.out = out;
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
    const top = await this.source();
    if (!top) return [];
    const rows: Row[] = [];
    const walk = (node: TreeNode, prefix: string, last: boolean, isTop: boolean) => {
      const who = node.assistant
        ? `${printable(node.assistant.name)} ${node.assistant.score.toFixed(2)}`
        : "unassigned";
      const tokens = node.usage.tokens > 0 ? `, ${node.usage.tokens} tok, ${costText(node.usage)}` : "";
      const branch = isTop ? "" : last ? "└─ " : "├─ ";
      rows.push({
        taskId: node.taskId,
        status: node.status,
        title: printable(node.title),
        line: `${prefix}${branch}${GLYPH[node.status]} ${printable(node.title)} ${note(`[${node.status}] ${who}${tokens}`)}`,
      });
      const next = isTop ? "" : `${prefix}${last ? "   " : "│  "}`;
      for (const [i, c] of node.children.entries()) walk(c, next, i === node.children.length - 1, false);
    };
    walk(top, "", true, true);
    return rows;
  }
}
