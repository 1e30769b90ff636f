import { expiresAfter, RETENTION_MS } from "../domain/retention.ts";
import { isTerminal } from "../domain/task-state.ts";
import { rootTaskOf } from "../domain/urn.ts";
import { ConflictError } from "../kernel/errors.ts";
import { type EngineDeps, sendReady } from "./context.ts";

/**
 * At most `settings.leavesAtOnce` leaves of one request run at once: a plan of two hundred leaves
 * does not take every instance of the ready step (and the model's quota) from the other requests.
 *
 * Each request has one record of its slots: the leaves that hold one (`running`) and the leaves
 * waiting for one, in the order they were started (`parked`). A leaf's ready command is sent only
 * once it holds a slot; a leaf's end gives its slot to the first waiting leaf, whose ready command
 * the ending step sends. Every change is a put on the record's version (retried on a conflict),
 * and both sides are idempotent by URN: a start or an end handled twice takes or frees one slot.
 *
 * A step that dies between its change and its commands leaves work the watchdog finds: a leaf that
 * holds a slot without a command stays `open` (its stale start is driven again, and sent, since it
 * holds a slot), and a leaf that ended without freeing its slot is freed by `repairLeafSlots`
 * (the record is listed while some leaf waits). Parents hold no slot: they wait on their children.
 * A leaf that waits for a person (an approval, a question) keeps its slot: it is running.
 *
 * The bound gives way while the leaf steps have room (`settings.leavesWhenIdle`): a request may
 * run up to that many leaves at once while the leaf steps (a task's start, a leaf's next turns)
 * that are not its own, waiting or running (EngineDeps.leafSteps: on AWS the ready and turn
 * queues' counts, in one process the engine's step queue's, less the request's leaves holding a
 * slot), number fewer than the room above the bound (leavesWhenIdle - leavesAtOnce). So a wide
 * request on an otherwise quiet deployment is not held to half of what could run, and once other
 * requests' steps take the room, its freed slots are refilled only up to `leavesAtOnce` again:
 * they wait for one of its leaves to end at most. The count is read each time slots are taken
 * (beside the slots' record, LEAF_STEPS_WAIT_MS at most); one that cannot be read holds the bound.
 */
export const LEAF_SLOTS_KIND = "leaf-slots";
/**
 * No bound by default in one process: its step queue (settings.maxConcurrentSteps) already bounds
 * what runs at once, in priority order, and a bound of its own would only cut the batching of a
 * wide request's writes (W1: 1.16x CPU per task at 20). The engine stack sets one (half the steps'
 * concurrency: infra/constructs/command-queue.ts), where each leaf is a function instance.
 */
export const DEFAULT_LEAVES_AT_ONCE = 0;
const LEAF_SLOTS_PREFIX = "leaves#";
export const leafSlotsKey = (rootTaskId: string) => `${LEAF_SLOTS_PREFIX}${rootTaskId}`;
/** The record's status while some leaf waits for a slot (the watchdog lists those). */
export const LEAVES_WAITING = "waiting";

/** Leaves by their URN below the root: a short record. */
interface LeafSlots {
  running: string[];
  parked: string[];
}

const MAX_ATTEMPTS = 20;
/**
 * At most this many leaves wait in the record (a DynamoDB item holds 400 KB; a leaf below its
 * root is about 30 characters a level). One past it stays open, unrecorded: the watchdog's
 * re-drive of stale open tasks offers it again, and it waits in the record once there is room.
 */
export const MAX_PARKED = 1_000;

/**
 * Of `leafIds` (tasks with no children, about to start), those that may start now: they hold a
 * slot of their request (or held one already). The others wait for one. Send the ready commands
 * of those returned, and only those.
 */
export async function admitLeaves(deps: EngineDeps, leafIds: readonly string[]): Promise<string[]> {
  if (!deps.settings.leavesAtOnce || leafIds.length === 0) return [...leafIds];
  // A request that is one leaf (its root) is never held back, nor is what is no request's task.
  const admitted = leafIds.filter((id) => requestOf(id) === undefined);
  const groups = byRequest(leafIds);
  const steps = groups.size > 0 ? leafStepsNow(deps) : undefined;
  for (const [root, ids] of groups) {
    let now: string[] = [];
    await change(deps, root, steps, (slots, limitFor) => {
      now = [];
      let changed = false;
      const limit = limitFor(slots.running.length);
      const running = new Set(slots.running);
      const parked = new Set(slots.parked);
      for (const id of ids) {
        if (running.has(id)) now.push(id);
        else if (running.size < limit) {
          running.add(id);
          now.push(id);
          parked.delete(id);
          changed = true;
        } else if (!parked.has(id) && parked.size < MAX_PARKED) {
          parked.add(id);
          changed = true;
        }
      }
      return changed ? { running: [...running], parked: [...parked] } : undefined;
    });
    admitted.push(...now.map((id) => absolute(root, id)));
  }
  return admitted;
}

/** Ready commands for parents, and for leaves as their request's slots allow. */
export async function sendReadyAsAllowed(deps: EngineDeps, taskIds: readonly string[]): Promise<void> {
  const counts = await Promise.all(taskIds.map((id) => deps.tasks.childCounts(id)));
  const parents = taskIds.filter((_, i) => (counts[i]?.created ?? 0) > 0);
  const leaves = await admitLeaves(
    deps,
    taskIds.filter((id) => !parents.includes(id)),
  );
  await sendReady(deps, [...parents, ...leaves]);
}

/**
 * Leaves that ended (or never will start: canceled while waiting) give up their slot or their
 * place; the request's first waiting leaves take the slots freed and are sent their ready
 * commands. Idempotent: a leaf that holds nothing changes nothing. With no leaf given, only fills
 * free slots (the watchdog's repair, a raised limit).
 */
export async function releaseLeaves(
  deps: EngineDeps,
  endedIds: readonly string[],
  request?: string,
): Promise<void> {
  if (!deps.settings.leavesAtOnce) return;
  const groups = byRequest(endedIds);
  if (request && !groups.has(request)) groups.set(request, []);
  for (const [root, ids] of groups) {
    const gone = new Set(ids);
    // Waiting leaves that ended meanwhile (canceled) are passed over: taking a slot, they would hold it for ever.
    for (let round = 0; round < MAX_ATTEMPTS; round++) {
      let taken: string[] = [];
      await change(deps, root, leafStepsNow(deps), (slots, limitFor) => {
        const running = slots.running.filter((r) => !gone.has(r));
        const parked = slots.parked.filter((p) => !gone.has(p));
        // Its own leaf steps: its running leaves', and those of the leaves ending (still at work).
        const limit = limitFor(slots.running.length);
        taken = parked.splice(0, Math.max(0, limit - running.length));
        running.push(...taken);
        const same = running.length === slots.running.length && parked.length === slots.parked.length;
        return same && taken.length === 0 ? undefined : { running, parked };
      });
      if (taken.length === 0) return;
      const views = await Promise.all(taken.map((id) => deps.tasks.view(absolute(root, id))));
      const ended = taken.filter((_, i) => {
        const status = views[i]?.status;
        return status === undefined || isTerminal(status);
      });
      const live = taken.filter((id) => !ended.includes(id));
      await sendReady(
        deps,
        live.map((id) => absolute(root, id)),
      );
      if (ended.length === 0) return;
      gone.clear();
      for (const id of ended) gone.add(id);
    }
  }
}

/**
 * The watchdog's part: in requests where leaves have waited longer than `before`, the slots of
 * leaves that ended without freeing them (their step died after recording the end) are freed.
 */
export async function repairLeafSlots(deps: EngineDeps, before: string): Promise<number> {
  if (!deps.settings.leavesAtOnce) return 0;
  let repaired = 0;
  const waiting = await deps.state.byStatus<LeafSlots>(LEAF_SLOTS_KIND, LEAVES_WAITING, {
    updatedBefore: before,
    limit: 100,
  });
  for (const listed of waiting.items) {
    const record = await deps.state.get<LeafSlots>(listed.key);
    if (record?.status !== LEAVES_WAITING || record.updatedAt >= before) continue;
    const root = listed.key.slice(LEAF_SLOTS_PREFIX.length);
    const views = await Promise.all(record.data.running.map((id) => deps.tasks.view(absolute(root, id))));
    const ended = record.data.running.filter((_, i) => {
      const status = views[i]?.status;
      return status === undefined || isTerminal(status);
    });
    repaired++;
    await releaseLeaves(
      deps,
      ended.map((id) => absolute(root, id)),
      root,
    );
  }
  return repaired;
}

/**
 * How long a change of the slots waits for the leaf steps' count (SQS answers in tens of
 * milliseconds): a count that does not come by then is one that cannot be read, and the bound
 * holds. Unbounded, a read that never answers (the SQS client has no request timeout) would hold
 * the step, and every later change of the request's slots in this process queued behind it, for ever.
 */
export const LEAF_STEPS_WAIT_MS = 500;

/**
 * How many leaf steps are waiting or running now (all requests'), read beside the slots' record,
 * not before it; undefined when the bound cannot give way (no count, or nothing above the bound).
 */
function leafStepsNow(deps: EngineDeps): Promise<number | undefined> {
  const { leavesAtOnce, leavesWhenIdle } = deps.settings;
  const { leafSteps } = deps;
  if (!leafSteps || leavesWhenIdle <= leavesAtOnce) return Promise.resolve(undefined);
  const uncounted = (error: unknown) => {
    deps.log.warn("the leaf steps could not be counted; the leaves' bound holds", {
      error: error instanceof Error ? error : String(error),
    });
    return undefined;
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(
      () => resolve(uncounted(`no count within ${LEAF_STEPS_WAIT_MS} ms`)),
      LEAF_STEPS_WAIT_MS,
    );
  });
  // A count below zero, or no number, is no count: taken for one, it would let the bound give way.
  // One that throws before it has a promise to reject fails no step: it is a count not read either.
  const counted = new Promise<number>((resolve) => resolve(leafSteps())).then(
    (n) => (Number.isFinite(n) && n >= 0 ? n : uncounted(`the count was ${n}`)),
    uncounted,
  );
  return Promise.race([counted, late]).finally(() => clearTimeout(timer));
}

/**
 * The most leaves of one request that may run, `ours` of the leaf steps counted being its own (its
 * leaves holding a slot, each with its start or its next turn waiting or at work): `leavesWhenIdle`
 * while the others' number fewer than the room above the bound (leavesWhenIdle - leavesAtOnce),
 * else `leavesAtOnce`. The others' steps then wait for one of its leaves to end at most. A leaf
 * that waits for a person or a remote agent holds a slot with no step: taken off the count all the
 * same, it makes the others look fewer than they are, by as many such leaves as the request has.
 */
function limitOf(settings: EngineDeps["settings"], steps: number | undefined, ours: number): number {
  const { leavesAtOnce, leavesWhenIdle } = settings;
  if (steps === undefined) return leavesAtOnce;
  return steps - ours < leavesWhenIdle - leavesAtOnce ? leavesWhenIdle : leavesAtOnce;
}

/**
 * The changes of this process to a request's slots, one after another: the steps of one process
 * (all of them, locally) never conflict with each other; steps in other processes (other Lambda
 * instances) do, and try again.
 */
const inProcess = new Map<string, Promise<void>>();

/** How many leaves of the request may run, given how many of the leaf steps counted are its own. */
type LimitFor = (ours: number) => number;

/**
 * Reads the request's slots (and the leaf steps counted, `steps`), applies `next` (undefined:
 * nothing to change), writes them on their version.
 */
function change(
  deps: EngineDeps,
  root: string,
  steps: Promise<number | undefined> | undefined,
  next: (slots: LeafSlots, limitFor: LimitFor) => LeafSlots | undefined,
): Promise<void> {
  const key = leafSlotsKey(root);
  const done = (inProcess.get(key) ?? Promise.resolve()).then(() => changeNow(deps, key, steps, next));
  const settled = done.then(
    () => undefined,
    () => undefined,
  );
  inProcess.set(key, settled);
  void settled.then(() => {
    if (inProcess.get(key) === settled) inProcess.delete(key);
  });
  return done;
}

async function changeNow(
  deps: EngineDeps,
  key: string,
  steps: Promise<number | undefined> | undefined,
  next: (slots: LeafSlots, limitFor: LimitFor) => LeafSlots | undefined,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const [record, counted] = await Promise.all([deps.state.get<LeafSlots>(key), steps]);
    const slots = next(record?.data ?? { running: [], parked: [] }, (ours) =>
      limitOf(deps.settings, counted, ours),
    );
    if (!slots) return;
    const now = deps.clock();
    const idle = slots.running.length === 0 && slots.parked.length === 0;
    try {
      await deps.state.transact([
        {
          op: "put",
          record: {
            key,
            kind: LEAF_SLOTS_KIND,
            updatedAt: now.toISOString(),
            data: slots,
            ...(slots.parked.length > 0 ? { status: LEAVES_WAITING } : {}),
            ...(idle ? { expiresAt: expiresAfter(now, RETENTION_MS.idleLeafSlots) } : {}),
          },
          expectedVersion: record?.version ?? 0,
        },
      ]);
      return;
    } catch (e) {
      // Another step changed the slots meanwhile (siblings ending at once): read them again.
      if (!(e instanceof ConflictError) || attempt >= MAX_ATTEMPTS) throw e;
      await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
    }
  }
}

/**
 * Tasks below a request's root, grouped by it, each by its URN below the root. The root itself is
 * left out: a root that is a leaf is the request's only leaf, and holds no slot.
 */
function byRequest(taskIds: readonly string[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const id of taskIds) {
    const root = requestOf(id);
    if (!root) continue;
    const ids = groups.get(root) ?? [];
    ids.push(id.slice(root.length));
    groups.set(root, ids);
  }
  return groups;
}

const absolute = (root: string, id: string) => `${root}${id}`;

/** The root of the request a task below it belongs to; undefined for a root, or what is no task. */
function requestOf(taskId: string): string | undefined {
  const root = rootTaskOf(taskId);
  return root === taskId ? undefined : root;
}
