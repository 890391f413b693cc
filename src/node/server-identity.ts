/**
 * What names a node's memory: the server (its run_id, new at every start)
 * and how many times that server's data was replaced in place since it
 * started. Scripts record it beside the state a loss can take back in time
 * (the lock node's run key, each ID counter's run key), so that a copy of
 * the node restored later carries the identity it was taken under, which
 * no longer matches.
 *
 * A restart changes the run_id. A restore in place (FLUSHALL, then an old
 * AOF or a converted snapshot replayed into the running server) keeps the
 * run_id and brings back the recorded identity with the data, so the
 * run_id alone cannot see it; but it needs a command that empties or swaps
 * the data set, and Redis counts each such call in INFO commandstats for as
 * long as the server runs. Those counts are the second part.
 *
 * The third, once a node has joined a cluster or been taken back by its
 * address (membership/scripts.ts, writeRecordScript): how many times it
 * did. What the node held before it joined is not the cluster's: an ID
 * counter left there with its marker and the identity of this very memory
 * (another deployment's, or one from before the membership was recorded)
 * would otherwise pass as the node's own and vote unrepaired. The join
 * moves the identity, so every state recorded under the old one is met as
 * a memory replaced in place: quarantined, its counters repaired.
 *
 * What this cannot see: a key edited or replayed over live data without
 * any of these commands (SET, RESTORE, a replay without a flush), a CONFIG
 * RESETSTAT that brings the counts back to what was recorded before the
 * next check, DEBUG RELOAD (Redis counts every DEBUG subcommand as one), and
 * a proxy that hands the connection to another server (seen at the next
 * recheck, which compares the run_id the client reads itself).
 */

/** Commands that empty or swap a server's data set in place (counted in INFO commandstats). */
export const replacingCommands = ["flushall", "flushdb", "swapdb", "replicaof", "slaveof"] as const;

/** How many times the node joined a cluster, or was taken back (the identity's third part). */
export const joinsKey = "redquorum:joins";

/**
 * Lua expression: the server's memory identity now, "<run_id>/<count>",
 * and "/<joins>" once the node joined.
 * Costs an INFO server and an INFO commandstats (tens of µs: commandstats
 * walks the whole command table), so the vote scripts read it from the
 * cache below instead (memory-check.ts).
 */
export const serverIdentityLua = `(function()
  local stats = redis.call('info', 'commandstats')
  local count = 0
  for _, name in ipairs({'${replacingCommands.join("', '")}'}) do
    count = count + (tonumber(string.match(stats, 'cmdstat_' .. name .. ':calls=(%d+)')) or 0)
  end
  local joins = redis.call('get', '${joinsKey}')
  return (string.match(redis.call('info', 'server'), 'run_id:(%w+)') or '') .. '/' .. count ..
    (joins and '/' .. joins or '')
end)()`;

/**
 * Lua expression: whether the memory `identity` (a Lua string) was emptied
 * or swapped in place since its server started: its count is not 0.
 */
export function replacedSinceStartLua(identity: string): string {
  return `(string.match(${identity}, '^[^/]*/(%d+)') ~= '0')`;
}

/**
 * Lua expression: whether `recorded` (a recorded identity, or a run_id as
 * versions before the count recorded it) names the same server as the
 * identity `identity`. A bare run_id is compared with the run_id alone.
 */
export function sameServerLua(recorded: string, identity: string): string {
  return `(string.match(${recorded}, '^[^/]*') == string.match(${identity}, '^[^/]*'))`;
}

/**
 * Lua expression: whether `recorded` (as above) names the memory `identity`:
 * the same server, and for a recorded count the same count. A bare run_id
 * (recorded before the count was) matches its server's every identity.
 */
export function sameMemoryLua(recorded: string, identity: string): string {
  return `(${recorded} == ${identity} or (not string.find(${recorded}, '/', 1, true) and ${sameServerLua(recorded, identity)}))`;
}
