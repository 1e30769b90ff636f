import type { RemoteConfig } from "../../shared/runtime/config.ts";
import { RemoteError } from "./remote.ts";
import { printable } from "./render.ts";

/**
 * `arbor events --prefix <urn>`: follows a running Arbor's resource writes at and below a URN
 * (`GET /v1/resource-events`, http-resource-events.ts) and prints one line each, until interrupted:
 *
 *   2026-06-01T09:00:00Z  PUT     plan.Task            cld:common.Tenant.acme/.../plan.Task.3f2a…
 *
 * It needs ARBOR_URL and ARBOR_KEY: the events are those of the process that writes (`arbor serve`);
 * a deployed stack answers 501 with the EventBridge rule to add instead.
 */
interface Frame {
  event: string;
  data: string;
}

/** Splits server-sent events out of a growing text; returns the frames and what is left over. */
export function parseFrames(text: string): { frames: Frame[]; rest: string } {
  const frames: Frame[] = [];
  const blocks = text.split(/\r?\n\r?\n/);
  const rest = blocks.pop() ?? "";
  for (const block of blocks) {
    let event = "message";
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
    }
    if (data.length > 0) frames.push({ event, data: data.join("\n") });
  }
  return { frames, rest };
}

/** One printed line for a resource event's data. */
export function eventLine(event: string, data: string): string {
  // A remote Arbor's answer: printable, whatever it holds.
  if (event === "overflow")
    return printable(`! ${(JSON.parse(data) as { message?: string }).message ?? "events were dropped"}`);
  const d = JSON.parse(data) as { time?: string; urn?: string; resourceType?: string };
  const verb = event === "RESOURCE_DELETE" ? "DELETE" : "PUT";
  return printable(
    `${d.time ?? ""}  ${verb.padEnd(6)}  ${(d.resourceType ?? "").padEnd(20)}  ${d.urn ?? ""}`,
  );
}

export async function followResourceEvents(
  remote: RemoteConfig,
  prefix: string,
  write: (line: string) => void,
  options: { signal?: AbortSignal; types?: string } = {},
): Promise<void> {
  // Below ARBOR_URL's own path (an Arbor behind a prefix), as the other remote commands ask.
  const url = new URL(`${remote.url}/v1/resource-events`);
  url.searchParams.set("prefix", prefix);
  if (options.types) url.searchParams.set("types", options.types);
  const res = await fetch(url, {
    headers: { authorization: `Bearer ${remote.key}`, accept: "text/event-stream" },
    redirect: "manual", // the key goes nowhere but ARBOR_URL
    ...(options.signal ? { signal: options.signal } : {}),
  }).catch((cause: unknown) => {
    if (options.signal?.aborted) throw cause;
    const why = (cause as { cause?: { code?: string } }).cause?.code ?? (cause as Error).message;
    throw new RemoteError(
      `Cannot reach Arbor at ${remote.url} (${why}). Is ARBOR_URL right, and the server running?`,
      0,
    );
  });
  if (res.status >= 300 && res.status < 400)
    throw new RemoteError(
      `${remote.url} redirects to ${printable(res.headers.get("location") ?? "elsewhere")}: set ARBOR_URL to where the Arbor API is (no redirect is followed, so the key goes nowhere else)`,
      res.status,
    );
  if (!res.ok || !res.body) {
    const body = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
    throw new RemoteError(
      printable(
        `Arbor at ${remote.url} did not follow ${prefix} (${res.status}): ${body.error?.message ?? res.statusText}`,
      ),
      res.status,
      body.error?.code,
    );
  }
  if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    await res.body.cancel();
    throw new RemoteError(
      `${remote.url} answered GET /v1/resource-events with something that is not an event stream: is ARBOR_URL the address of an Arbor API?`,
      res.status,
    );
  }
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      const { frames, rest } = parseFrames(buffer + decoder.decode(chunk, { stream: true }));
      buffer = rest;
      for (const f of frames) write(eventLine(f.event, f.data));
    }
  } catch (error) {
    if (!options.signal?.aborted) throw error;
  }
}
