import { type Command, REMOTE_NOTE, TENANT_LOCAL_OR_REMOTE, UsageError } from "../command.ts";

export const docs: Command = {
  name: "docs",
  usage: [
    "docs add <file|folder|url>... [--name <name>] [--tenant <tenant>]",
    "docs ls [--tenant <tenant>]",
    "docs rm <urn|name> [--tenant <tenant>]",
  ],
  summary: "the tenant's documents: add Markdown, text, HTML and PDF for the assistants to find and cite",
  description:
    "add reads each file (a folder: its .md, .txt, .html and .pdf files, recursively) or URL into the tenant's documents, cut into chunks and embedded; adding a name again replaces it, unchanged it is skipped. ls lists them with their state; rm removes one with its chunks.",
  options: [
    ["--name <name>", "the document's name (one file or URL only; default its file name or URL)"],
    TENANT_LOCAL_OR_REMOTE,
  ],
  examples: [
    "arbor docs add handbook.md policies/",
    "arbor docs add https://example.com/faq.html",
    "arbor docs ls",
  ],
  notes: [
    `${REMOTE_NOTE} It needs an admin's key there. Locally it holds the data folder (stop arbor serve, or point ARBOR_URL at it).`,
  ],

  async local({ args, options, write }) {
    const { docsLocal } = await import("../lib/docs.ts");
    if (!["add", "ls", "rm"].includes(args[0] ?? "")) throw new UsageError();
    return docsLocal(docs, args[0] as "add" | "ls" | "rm", args.slice(1), options, write);
  },

  async remote({ args, options, write }, remote) {
    const { docsRemote } = await import("../lib/docs.ts");
    if (!["add", "ls", "rm"].includes(args[0] ?? "")) throw new UsageError();
    return docsRemote(remote, args[0] as "add" | "ls" | "rm", args.slice(1), options, write);
  },
};
