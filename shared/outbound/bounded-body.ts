import { ResponseTooLargeError } from "./errors.ts";

/**
 * A response body read with a bound: the bytes pass through as they come (nothing is buffered
 * here), counted; past `limit` the stream errors with ResponseTooLargeError and `abort` is called
 * so the connection closes instead of draining the rest. A declared Content-Length over the
 * bound fails at once, before a byte is read.
 */
export function boundedBody(
  body: ReadableStream<Uint8Array>,
  options: { limit: number; url: string; contentLength: string | null; abort: (reason: Error) => void },
): ReadableStream<Uint8Array> {
  const { limit, url } = options;
  const reader = body.getReader();
  let seen = 0;
  const tooLarge = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    const error = new ResponseTooLargeError(url, limit);
    options.abort(error);
    reader.cancel(error).catch(() => undefined);
    controller.error(error);
  };
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        const declared = Number(options.contentLength ?? Number.NaN);
        if (Number.isFinite(declared) && declared > limit) tooLarge(controller);
      },
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        seen += value.byteLength;
        if (seen > limit) tooLarge(controller);
        else controller.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    // Pull one chunk at a time: what is buffered here stays one socket read.
    { highWaterMark: 0 },
  );
}
