import type { Task } from "@a2a-js/sdk";
import { V03PushNotificationSerializer } from "@a2a-js/sdk/compat/v0_3/server";
import { V1PushNotificationSerializer } from "@a2a-js/sdk/server";

export type { Artifact, Part, Task } from "@a2a-js/sdk";

/** The A2A versions a push subscription may be of. */
export type A2aPushProtocol = "0.3" | "1.0";

/** A push notification's body in the subscription's protocol version, by the SDK's serializers. */
export function serializePush(protocol: A2aPushProtocol, task: Task): { body: string; contentType: string } {
  const serializer =
    protocol === "0.3" ? new V03PushNotificationSerializer() : new V1PushNotificationSerializer();
  return serializer.serialize({ payload: { $case: "task", value: task } }, task);
}
