/**
 * A server-sent events client for tests: undici's fetch, and a parser of the stream as the
 * EventSource spec reads it (fields `id`, `event`, `data`, `retry`, comments). Reads until `until`
 * says stop (then it disconnects) or the server ends the stream.
 */
export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}
export interface SseRead {
  status: number;
  contentType: string | null;
  events: SseEvent[];
  comments: string[];
  retry: number | undefined;
  /** The server closed the stream (rather than the client going away). */
  ended: boolean;
  body: string;
}

export async function readSse(
  url: string,
  options: {
    headers?: Record<string, string>;
    method?: string;
    body?: string;
    /** Stop (disconnect) once this holds for the events so far. */
    until?: (events: SseEvent[], comments: string[]) => boolean;
  } = {},
): Promise<SseRead> {
  const controller = new AbortController();
  const res = await fetch(url, {
    headers: { accept: "text/event-stream", ...options.headers },
    signal: controller.signal,
    ...(options.method ? { method: options.method } : {}),
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  const out: SseRead = {
    status: res.status,
    contentType: res.headers.get("content-type"),
    events: [],
    comments: [],
    retry: undefined,
    ended: false,
    body: "",
  };
  if (!res.body || !out.contentType?.startsWith("text/event-stream")) {
    out.body = await res.text();
    out.ended = true;
    return out;
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        out.ended = true;
        return out;
      }
      buffer += value;
      let cut = buffer.search(/\r?\n\r?\n/);
      while (cut >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        parseBlock(block, out);
        if (options.until?.(out.events, out.comments)) return out;
        cut = buffer.search(/\r?\n\r?\n/);
      }
    }
  } finally {
    controller.abort(); // the client goes away (or has already seen the end)
    await reader.cancel().catch(() => {});
  }
}

function parseBlock(block: string, out: SseRead): void {
  let id: string | undefined;
  let event = "message";
  const data: string[] = [];
  let any = false;
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith(":")) {
      out.comments.push(line.slice(1).trim());
      continue;
    }
    const at = line.indexOf(":");
    const field = at < 0 ? line : line.slice(0, at);
    const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
    if (field === "id") id = value;
    else if (field === "event") event = value;
    else if (field === "data") {
      data.push(value);
      any = true;
    } else if (field === "retry") out.retry = Number(value);
  }
  if (any) out.events.push({ id, event, data: data.join("\n") });
}
