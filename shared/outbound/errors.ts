import { ArborError } from "../kernel/errors.ts";

/**
 * The outbound guard's refusals (members of the ArborError family): a URL, an address, a port or
 * a redirect the guard does not let through. Nothing was sent to the refused address.
 */
export class OutboundRefusedError extends ArborError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("FORBIDDEN", message, { details });
  }
}

/** A response body longer than the bound: reading stopped there and the connection was closed. */
export class ResponseTooLargeError extends ArborError {
  readonly limit: number;
  constructor(url: string, limit: number) {
    super(
      "TOO_LARGE",
      `${url}: response larger than ${limit} bytes; reading stopped there and the connection was closed ` +
        "(the bound is ARBOR_OUTBOUND_MAX_RESPONSE_BYTES)",
      { details: { url, limit } },
    );
    this.limit = limit;
  }
}
