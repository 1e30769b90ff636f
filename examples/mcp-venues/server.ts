import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

/**
 * A small MCP server, the one the README's tool registry starts (`"command": "node", "args":
 * ["examples/mcp-venues/server.ts"]`, from the checkout): venues for team events, from a list kept
 * here. Written with the MCP TypeScript SDK; Node runs it as it is, over stdio, so Arbor starts it
 * as a child process and stops it with itself. Try it:
 *
 *   ARBOR_TOOLS_FILE=examples/mcp-venues/tools.json npx arbor tools ls --namespace venues
 */
export interface Venue {
  id: string;
  name: string;
  city: string;
  seats: number;
  eurPerPersonPerDay: number;
  rooms: string;
}

export const VENUES: readonly Venue[] = [
  {
    id: "lis-casa-do-rio",
    name: "Casa do Rio",
    city: "Lisbon",
    seats: 40,
    eurPerPersonPerDay: 95,
    rooms: "a plenary room for 40, two breakout rooms, a terrace on the river",
  },
  {
    id: "lis-lx-factory-loft",
    name: "LX Factory Loft",
    city: "Lisbon",
    seats: 16,
    eurPerPersonPerDay: 70,
    rooms: "one loft for 16 with a projector, a kitchen",
  },
  {
    id: "por-armazem",
    name: "Armazém do Douro",
    city: "Porto",
    seats: 25,
    eurPerPersonPerDay: 80,
    rooms: "a warehouse hall for 25, one breakout room",
  },
];

const line = (v: Venue) =>
  `${v.name} (${v.id}): ${v.city}, seats ${v.seats}, ${v.eurPerPersonPerDay} EUR per person per day`;
const text = (t: string) => ({ content: [{ type: "text" as const, text: t }] });

export function venuesServer(): McpServer {
  const server = new McpServer({ name: "arbor-example-venues", version: "1.0.0" });
  server.registerTool(
    "lookup_venue",
    {
      description:
        "Finds venues in a city that seat a team, cheapest first, with their price per person per day.",
      inputSchema: {
        city: z.string().min(1).describe("the city, e.g. Lisbon"),
        people: z.number().int().min(1).max(500).describe("how many people the venue must seat"),
      },
    },
    async ({ city, people }) => {
      const fits = VENUES.filter(
        (v) => v.city.toLowerCase() === city.trim().toLowerCase() && v.seats >= people,
      )
        .slice()
        .sort((a, b) => a.eurPerPersonPerDay - b.eurPerPersonPerDay);
      return text(
        fits.length
          ? fits.map(line).join("\n")
          : `No venue in ${city} seats ${people}. Cities with venues: ${[...new Set(VENUES.map((v) => v.city))].join(", ")}.`,
      );
    },
  );
  server.registerTool(
    "venue_details",
    {
      description: "The rooms and price of one venue, by the id lookup_venue gives.",
      inputSchema: { id: z.string().min(1).describe("a venue id, e.g. lis-casa-do-rio") },
    },
    async ({ id }) => {
      const venue = VENUES.find((v) => v.id === id);
      if (!venue) return { ...text(`No venue has the id ${id}.`), isError: true };
      return text(`${line(venue)}. Rooms: ${venue.rooms}.`);
    },
  );
  return server;
}

// Started as a program (node examples/mcp-venues/server.ts): serve over stdio until stdin ends.
if (import.meta.main) await venuesServer().connect(new StdioServerTransport());
