import { createHash } from "node:crypto";
import * as z from "zod";

/**
 * The part of a Bot Framework activity Arbor reads (the rest is passed over). How to drive it:
 *
 *   const activity = parseActivity(JSON.parse(raw));        // undefined: not an activity we can read
 *   aadTenantOf(activity);                                   // conversation.tenantId ?? channelData.tenant.id
 *   messageText(activity);                                   // the text with the bot's <at>..</at> mention cut
 *   teamsThreadId(activity.serviceUrl, conversationId);      // one notify subscription id per conversation
 *   teamsConversationName(aadTenantId, conversationId);      // one Arbor conversation per Teams thread / chat
 *
 * In a channel, `conversation.id` is `19:...@thread.tacv2;messageid=<root>`: one id per channel
 * thread, so a thread is one conversation; a personal or group chat has one id for the whole chat.
 */
const Account = z.object({
  id: z.string().min(1).max(1000),
  name: z.string().max(500).optional(),
  aadObjectId: z.string().max(200).optional(),
});

export const ActivitySchema = z.object({
  type: z.string().min(1).max(100),
  id: z.string().min(1).max(1000).optional(),
  name: z.string().max(200).optional(),
  channelId: z.string().max(100).optional(),
  serviceUrl: z.string().min(1).max(2048),
  from: Account,
  recipient: Account.optional(),
  conversation: z.object({
    id: z.string().min(1).max(1000),
    tenantId: z.string().max(200).optional(),
    conversationType: z.string().max(100).optional(),
    isGroup: z.boolean().optional(),
  }),
  text: z.string().max(100_000).optional(),
  textFormat: z.string().max(50).optional(),
  replyToId: z.string().max(1000).optional(),
  value: z.unknown().optional(),
  channelData: z
    .object({ tenant: z.object({ id: z.string().max(200) }).optional() })
    .loose()
    .optional(),
  membersAdded: z.array(Account).max(1000).optional(),
  /** A personal chat's shared files come as `file.download.info` attachments (teamsFiles). */
  attachments: z
    .array(
      z
        .object({
          contentType: z.string().max(200),
          name: z.string().max(500).optional(),
          content: z.unknown(),
        })
        .loose(),
    )
    .max(20)
    .optional(),
});

export type Activity = z.output<typeof ActivitySchema>;

export function parseActivity(raw: unknown): Activity | undefined {
  const parsed = ActivitySchema.safeParse(raw);
  return parsed.success ? parsed.data : undefined;
}

const FILE_INFO = "application/vnd.microsoft.teams.file.download.info";
const FileInfo = z
  .object({ downloadUrl: z.string().min(1).max(4000), fileType: z.string().max(50).optional() })
  .loose();

/**
 * The files a person shared with the bot in a personal chat: Teams hands each as a
 * `file.download.info` attachment with a pre-authenticated download URL (no token goes with it).
 * Only http(s) URLs are taken, and the outbound guard checks where they lead (public addresses
 * only, https only when the operator says so).
 */
export function teamsFiles(a: Activity): { name: string; url?: string }[] {
  return (a.attachments ?? []).flatMap((attachment) => {
    if (attachment.contentType !== FILE_INFO) return [];
    const info = FileInfo.safeParse(attachment.content);
    const name = attachment.name ?? "shared file";
    const url = info.success ? info.data.downloadUrl : undefined;
    return [{ name, ...(url && /^https?:\/\//i.test(url) ? { url } : {}) }];
  });
}

/**
 * Whether a message outside a personal chat carries files: Teams gives a bot no download link for
 * those (they lie in the team's SharePoint or the sender's OneDrive, readable only through
 * Microsoft Graph), only a reference to each: a `reference` attachment, or an `<attachment>` in the
 * message's HTML.
 */
export function unreadableFiles(a: Activity): boolean {
  if (a.conversation.conversationType === "personal") return false;
  return (a.attachments ?? []).some(
    (x) =>
      x.contentType === "reference" ||
      (x.contentType === "text/html" && typeof x.content === "string" && /<attachment\s/i.test(x.content)),
  );
}

/** The Entra tenant the activity comes from. */
export const aadTenantOf = (a: Activity): string | undefined =>
  a.conversation.tenantId || a.channelData?.tenant?.id || undefined;

/**
 * The message's text as a person wrote it: the bot's mention (`<at>Arbor</at>`) cut, the little
 * HTML Teams puts around text (`<p>`, `<br>`, entities) turned back into plain text.
 */
export function messageText(a: Activity): string {
  const text = (a.text ?? "")
    .replace(/<at>[^<]*<\/at>/gi, " ")
    .replace(/<br\s*\/?>/gi, "\n")
    .replace(/<\/p>\s*<p>/gi, "\n")
    .replace(/<[^>]+>/g, "")
    .replace(/&nbsp;/g, " ")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
  return text
    .split("\n")
    .map((line) => line.replace(/[ \t]+/g, " ").trim())
    .join("\n")
    .trim();
}

const hash = (...parts: string[]) =>
  createHash("sha256").update(parts.join("\u0000")).digest("base64url").slice(0, 24);

/** The notify subscription id of a Teams conversation (one thread per conversation). */
export const teamsThreadId = (serviceUrl: string, conversationId: string) =>
  `teams_${hash(serviceUrl, conversationId)}`;

/** The Arbor conversation's name for a Teams conversation: a follow-up in it continues it. */
export const teamsConversationName = (aadTenantId: string, conversationId: string) =>
  `teams_${hash(aadTenantId, conversationId)}`;

/** The submit's idempotency key for a Teams activity (activity ids are unique per conversation). */
export const teamsIdempotencyKey = (conversationId: string, activityId: string) =>
  `teams:${hash(conversationId, activityId)}`;

/** Whether the URL is under one of the allowed service URL prefixes (compared as parsed URLs). */
export function serviceUrlAllowed(serviceUrl: string, allowed: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(serviceUrl);
  } catch {
    return false;
  }
  if (url.username || url.password || url.search || url.hash) return false;
  const normalized = url.href;
  return allowed.some((prefix) => {
    let base: URL;
    try {
      base = new URL(prefix);
    } catch {
      return false;
    }
    if (base.origin !== url.origin) return false;
    const path = base.pathname.endsWith("/") ? base.pathname : `${base.pathname}/`;
    return `${url.pathname}/`.startsWith(path) || normalized === base.href;
  });
}

/** The same service URL spelled one way (Teams sends it with and without the trailing slash). */
export const sameServiceUrl = (a: string, b: string) => a.replace(/\/+$/, "") === b.replace(/\/+$/, "");
