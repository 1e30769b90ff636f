import { describe, expect, it } from "vitest";
import { createNotifyHandler } from "../../../../functions/notify.ts";
import { ConfigError, ValidationError } from "../../../../shared/kernel/errors.ts";
import { loadConfig } from "../../../../shared/runtime/config.ts";

/** The notify function's edges, before anything reaches AWS: what it takes, and what it needs. */
const aws = {
  ARBOR_MODE: "aws",
  AWS_REGION: "eu-west-1",
  ARBOR_RESOURCES_BUCKET: "b",
  ARBOR_TABLE_NAME: "t",
  ARBOR_EVENT_BUS_NAME: "arbor-dev",
  ARBOR_POLICY_ENGINE: "cedar",
};

describe("the notify function", () => {
  it("refuses input that is neither an SQS batch nor the sweep, saying what it takes, before it starts", async () => {
    let started = false;
    const handler = createNotifyHandler({
      config: () => {
        started = true;
        return loadConfig(aws);
      },
    });
    for (const input of [{}, { Records: [] }, { notify: "send" }, { Records: [{ body: "x" }] }, "sweep"]) {
      const error = await handler(input).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as Error).message).toMatch(/SQS batch .* "notify": "sweep"/);
    }
    expect(started).toBe(false);
    await handler.close();
  });

  it("will not start without its delivery queue (ARBOR_NOTIFY_QUEUE_URL), and says who sets it", async () => {
    const handler = createNotifyHandler({ config: () => loadConfig(aws) });
    await expect(handler({ notify: "sweep" })).rejects.toThrow(ConfigError);
    await expect(handler({ notify: "sweep" })).rejects.toThrow(/ARBOR_NOTIFY_QUEUE_URL.*engine stack/);
    await handler.close();
  });
});
