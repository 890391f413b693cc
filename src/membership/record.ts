/**
 * The membership record each node keeps (docs/membership.md): which cluster
 * it belongs to, at which epoch, with which members. Pure: formatting,
 * parsing, and comparing a client's node list with a record. The scripts
 * that write it are membership/scripts.ts; what a client does with it,
 * membership/view.ts.
 */
import { createHash, randomBytes } from "node:crypto";

/** The node's member id: 64 random bits, written when it joins. Its memory, not its address, is the member. */
export const nodeIdKey = "redquorum:node";
/** "<cluster id>:<epoch>": what every vote script compares with the client's (membership/scripts.ts). */
export const stampKey = "redquorum:cluster";
/** The whole record as JSON (`MembershipRecord`). */
export const recordKey = "redquorum:members";
/**
 * A change under way (membership/choose.ts): "<epoch>\n<ballot promised>\n<ballot
 * accepted>\n<record accepted>", the last two empty until one is accepted.
 */
export const proposalKey = "redquorum:members-next";
/**
 * What `stampKey` holds on a node that accepted a change not yet written
 * as its record: this prefix, then its record's stamp. No client's stamp
 * starts so, so the node refuses every vote until the change is written.
 */
export const changingPrefix = "changing:";

export interface Member {
  /** The member id the node holds (`nodeIdKey`). */
  readonly id: string;
  /**
   * The host:port it was reached by when it joined: only lets a node that
   * lost its memory at that very address rejoin by itself (view.ts).
   */
  readonly address: string;
}

export interface MembershipRecord {
  readonly clusterId: string;
  /** Grows by one at each change of members; a node's only grows. */
  readonly epoch: number;
  readonly members: readonly Member[];
}

/** A new random id (cluster or member). */
export function newId(): string {
  return randomBytes(8).toString("hex");
}

/**
 * What vote scripts compare: "<cluster id>:<epoch>:<digest of the member
 * ids>"; "" for a node (or a view) without a record. The digest tells apart
 * two changes that raced to the same epoch with different members (each
 * lost on a majority, but one may have landed on some nodes).
 */
export function stampOf(record: MembershipRecord | undefined): string {
  if (!record) return "";
  const ids = record.members.map((member) => member.id).sort();
  const digest = createHash("sha256").update(ids.join(",")).digest("hex").slice(0, 8);
  return `${record.clusterId}:${record.epoch}:${digest}`;
}

export function formatRecord(record: MembershipRecord): string {
  return JSON.stringify({
    v: 1,
    cluster: record.clusterId,
    epoch: record.epoch,
    members: record.members.map(({ id, address }) => ({ id, address })),
  });
}

/** The record a node holds, or undefined for none; throws on a value this version cannot read. */
export function parseRecord(text: string | null | undefined): MembershipRecord | undefined {
  if (text === null || text === undefined || text === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`its membership record is not JSON: ${text.slice(0, 80)}`);
  }
  const object = value as { v?: unknown; cluster?: unknown; epoch?: unknown; members?: unknown };
  if (
    typeof object !== "object" ||
    object === null ||
    object.v !== 1 ||
    typeof object.cluster !== "string" ||
    !Number.isSafeInteger(object.epoch) ||
    !Array.isArray(object.members) ||
    !object.members.every(
      (member: unknown) =>
        typeof member === "object" &&
        member !== null &&
        typeof (member as Member).id === "string" &&
        typeof (member as Member).address === "string",
    )
  ) {
    throw new Error(
      `its membership record has a form this version cannot read (written by a newer redquorum?): ${text.slice(0, 80)}`,
    );
  }
  return {
    clusterId: object.cluster,
    epoch: object.epoch as number,
    members: (object.members as Member[]).map(({ id, address }) => ({ id, address })),
  };
}

/** The member whose id is `id`, if any. */
export function memberById(record: MembershipRecord, id: string): Member | undefined {
  return record.members.find((member) => member.id === id);
}

/** The member recorded at `address`, if any. */
export function memberAt(record: MembershipRecord, address: string): Member | undefined {
  return record.members.find((member) => member.address === address);
}

/** The members as the status line and errors show them: "id@address, …". */
export function describeMembers(record: MembershipRecord): string {
  return record.members.map((member) => `${member.id}@${member.address}`).join(", ");
}
