import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { configValue, evictsKeysWithTtl, nodeInfoFrom, parseInfo } from "./inspect.js";

const sample = [
  "# Server",
  "redis_version:7.0.15",
  "run_id:abc123",
  "",
  "# Memory",
  "maxmemory:0",
  "maxmemory_policy:noeviction",
  "# Persistence",
  "aof_enabled:1",
  "# Replication",
  "role:master",
  "",
].join("\r\n");

describe("INFO parsing", () => {
  it("reads fields and skips headers and blank lines", () => {
    const fields = parseInfo(sample);
    assert.equal(fields.get("run_id"), "abc123");
    assert.equal(fields.has("# Server"), false);
    assert.equal(fields.size, 6);
  });

  it("keeps colons inside values", () => {
    assert.equal(
      parseInfo("executable:/usr/bin/redis-server:x\r\n").get("executable"),
      "/usr/bin/redis-server:x",
    );
  });

  it("builds the node facts the guard rails need", () => {
    const info = nodeInfoFrom("n1", sample);
    assert.deepEqual(info, {
      endpoint: "n1",
      runId: "abc123",
      role: "master",
      redisVersion: "7.0.15",
      maxmemoryBytes: 0,
      maxmemoryPolicy: "noeviction",
      aofEnabled: true,
    });
    assert.equal(evictsKeysWithTtl(info), false);
  });

  it("flags eviction only when maxmemory is set and the policy may evict", () => {
    const base = nodeInfoFrom("n1", sample);
    assert.equal(
      evictsKeysWithTtl({ ...base, maxmemoryBytes: 1e6, maxmemoryPolicy: "volatile-lru" }),
      true,
    );
    assert.equal(
      evictsKeysWithTtl({ ...base, maxmemoryBytes: 1e6, maxmemoryPolicy: "noeviction" }),
      false,
    );
    assert.equal(
      evictsKeysWithTtl({ ...base, maxmemoryBytes: 0, maxmemoryPolicy: "allkeys-lru" }),
      false,
    );
  });
});

describe("configValue", () => {
  it("reads CONFIG GET replies over RESP2 (array) and RESP3 (Map or object)", () => {
    assert.equal(configValue(["appendfsync", "always"], "appendfsync"), "always");
    assert.equal(configValue(["a", "1", "appendfsync", "no"], "appendfsync"), "no");
    assert.equal(configValue(new Map([["appendfsync", "everysec"]]), "appendfsync"), "everysec");
    assert.equal(configValue({ appendonly: "yes" }, "appendonly"), "yes");
    assert.equal(configValue([], "appendonly"), "");
    assert.equal(configValue(null, "appendonly"), "");
  });
});
