/**
 * What the nodes' wait queues (heir-queue.ts) tell a client: a refused
 * waiter's place on each node, the ticket and rank the client goes on
 * with, the fencing counter the refusals carried, and an heir notice.
 */
import { parseCounter } from "../decimal.js";

/** A refused waiter's place on one node: its ticket there and how many are ahead. */
export interface QueuePlace {
  readonly ticket: string;
  readonly rank: number;
  /** The resource's fencing counter on that node, with fencing on. */
  readonly fence?: bigint;
}

/**
 * The place a refusal reply reports ({refused, ticket, rank[, current
 * fence]}), if it is one; any other reply reports none.
 */
export function queuePlaceOf(reply: unknown): QueuePlace | undefined {
  if (!Array.isArray(reply) || reply.length < 3 || reply.length > 4 || reply[0] !== 0) {
    return undefined;
  }
  const [, ticket, rank, fence] = reply as [unknown, unknown, unknown, unknown];
  if (typeof ticket !== "string" || typeof rank !== "number") return undefined;
  if (fence === undefined) return { ticket, rank };
  try {
    return { ticket, rank, fence: parseCounter(fence) };
  } catch {
    return { ticket, rank }; // only a hint: a bad counter here is noticed where it matters
  }
}

/**
 * The ticket to send every node next: the highest any node gave (so all
 * agree from the next round on), compared as numbers.
 */
export function agreedTicket(places: readonly QueuePlace[]): string | undefined {
  let best: QueuePlace | undefined;
  for (const place of places) {
    if (!best || Number(place.ticket) > Number(best.ticket)) best = place;
  }
  return best?.ticket;
}

/** How many waiters are ahead: the median of what the nodes said (a majority agrees with it or better). */
export function waitersAhead(places: readonly QueuePlace[]): number {
  if (places.length === 0) return 0;
  const ranks = places.map((place) => place.rank).sort((a, b) => a - b);
  return ranks[Math.floor((ranks.length - 1) / 2)]!;
}

/** The highest fencing counter the places report, if any. */
export function highestFence(places: readonly QueuePlace[]): bigint | undefined {
  let highest: bigint | undefined;
  for (const { fence } of places) {
    if (fence !== undefined && (highest === undefined || fence > highest)) highest = fence;
  }
  return highest;
}

/** An heir notice: the waiter and, if the resource has one, its fencing counter. */
export function parseHeirNotice(message: string): { waiterId: string; fence?: bigint } {
  const [waiterId = "", fence] = message.split(" ");
  if (fence === undefined) return { waiterId };
  try {
    return { waiterId, fence: parseCounter(fence) };
  } catch {
    return { waiterId };
  }
}
