import {
  DELIVERY_STATUSES,
  type DeliveryStatus,
  deliveryView,
  getDelivery,
  listDeliveries,
  redriveDelivery,
} from "../../shared/notify/deliveries.ts";
import type { StateStore } from "../../shared/ports/state-store.ts";
import { UsageError } from "../command.ts";
import { notAgain, type Remote } from "./remote.ts";
import { heading, note, printable } from "./render.ts";

/**
 * `arbor notify ls [--dead | --status <s>]` and `arbor notify redrive <id> | --all`: the webhook
 * deliveries of a local data folder (shared/notify/deliveries.ts). It opens the folder without its
 * lock, so it works beside a running `arbor serve`, whose worker sends a redriven delivery at its
 * next tick (within seconds). With ARBOR_URL and ARBOR_KEY (an admin's), the same through a
 * remote Arbor's admin routes (notifyRemote): GET /v1/admin/deliveries?status=dead,
 * POST /v1/admin/deliveries/<id>/redrive, POST /v1/admin/deliveries/redrive {"all":true}.
 */

export interface NotifyCliOptions {
  dead: boolean;
  status: string | undefined;
  all: boolean;
}

/** The exit code: 0, or 1 when a redrive found nothing to redrive. */
export async function notifyCommand(
  sub: string | undefined,
  arg: string | undefined,
  options: NotifyCliOptions,
  state: StateStore,
  clock: () => Date,
  write: (line: string) => void,
): Promise<number> {
  if (sub === "ls") {
    const status = statusOf(options);
    let cursor: string | undefined;
    let shown = 0;
    do {
      const page = await listDeliveries(state, status, { limit: 100, ...(cursor ? { cursor } : {}) });
      for (const r of page.items) {
        write(line(deliveryView(r)));
        shown++;
      }
      cursor = page.cursor;
    } while (cursor !== undefined);
    if (shown === 0) write(note(`No ${status} deliveries.`));
    return 0;
  }
  if (sub === "redrive") {
    const ids: string[] = [];
    if (options.all) {
      let cursor: string | undefined;
      do {
        const page = await listDeliveries(state, "dead", { limit: 100, ...(cursor ? { cursor } : {}) });
        ids.push(...page.items.map((r) => r.data.id));
        cursor = page.cursor;
      } while (cursor !== undefined);
    } else if (arg) ids.push(arg);
    else throw new UsageError(`Say which delivery: an id (see arbor notify ls --dead) or --all.`);
    let redriven = 0;
    for (const id of ids) {
      if (options.all && (await getDelivery(state, id))?.status !== "dead") continue; // the index lags
      await redriveDelivery(state, id, clock());
      write(`redriven ${id}`);
      redriven++;
    }
    if (redriven === 0) write(note("No dead deliveries to redrive."));
    return options.all || redriven > 0 ? 0 : 1;
  }
  throw new UsageError();
}

function statusOf(options: NotifyCliOptions): DeliveryStatus {
  const status = (options.dead ? "dead" : (options.status ?? "dead")) as DeliveryStatus;
  if (!DELIVERY_STATUSES.includes(status))
    throw new UsageError(`--status is one of ${DELIVERY_STATUSES.join(", ")}, not "${status}".`);
  return status;
}

/** The same commands against a remote Arbor's admin routes. */
export async function notifyRemote(
  sub: string | undefined,
  arg: string | undefined,
  options: NotifyCliOptions,
  remote: Remote,
  write: (line: string) => void,
): Promise<number> {
  if (sub === "ls") {
    const status = statusOf(options);
    let cursor: string | null = null;
    let shown = 0;
    const seen = new Set<string>();
    do {
      const path = `/v1/admin/deliveries?status=${status}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const page: { deliveries: DeliveryLine[]; cursor: string | null } = await remote.get(path, {
        deliveries: "array",
      });
      for (const d of page.deliveries) write(line(d));
      shown += page.deliveries.length;
      cursor = page.cursor;
      if (cursor) notAgain(remote, seen, cursor, "the deliveries");
    } while (cursor);
    if (shown === 0) write(note(`No ${status} deliveries.`));
    return 0;
  }
  if (sub === "redrive") {
    if (options.all) {
      const { redriven } = await remote.post<{ redriven: string[] }>(
        "/v1/admin/deliveries/redrive",
        { all: true },
        { shape: { redriven: "array" } },
      );
      for (const id of redriven) write(`redriven ${id}`);
      if (redriven.length === 0) write(note("No dead deliveries to redrive."));
      return 0;
    }
    if (!arg) throw new UsageError(`Say which delivery: an id (see arbor notify ls --dead) or --all.`);
    await remote.post(`/v1/admin/deliveries/${encodeURIComponent(arg)}/redrive`, {});
    write(`redriven ${arg}`);
    return 0;
  }
  throw new UsageError();
}

type DeliveryLine = ReturnType<typeof deliveryView>;

function line(d: DeliveryLine): string {
  const when = d.deadAt ?? d.deliveredAt ?? d.nextAttemptAt;
  return (
    `${heading(d.id)} ${String(d.status).padEnd(9)} ${d.channel.padEnd(8)} ${d.stateKey.split("#")[0]?.padEnd(14)} ` +
    `${String(d.attempts).padStart(3)} attempt${d.attempts === 1 ? " " : "s"} ${when} ${printable(d.url)}` +
    (d.lastError ? `\n    ${note(printable(d.lastError))}` : "")
  );
}
