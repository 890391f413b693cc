import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Redis } from "ioredis";
import { InvalidArgumentError, NodeConfigurationError } from "../errors.js";
import { createNodes, endpointOfUrl, withoutPassword } from "./resolve.js";

describe("endpointOfUrl", () => {
  it("names a node host:port, lower-cased, without credentials", () => {
    assert.equal(endpointOfUrl("redis://user:secret@LocalHost:7001", 0), "localhost:7001");
    assert.equal(endpointOfUrl("redis://10.0.0.1", 0), "10.0.0.1:6379");
    assert.equal(endpointOfUrl("rediss://h:7000/0", 0), "h:7000");
    assert.equal(endpointOfUrl("redis://h:7000/3", 0), "h:7000/3");
  });

  it("names the database from the path or a db parameter, and refuses one that is not a number", () => {
    assert.equal(endpointOfUrl("redis://h:7000?db=4", 0), "h:7000/4");
    assert.equal(endpointOfUrl("redis://h:7000/", 0), "h:7000");
    for (const url of [
      "redis://h:7000/x",
      "redis://h:7000/1x",
      "redis://h:7000/-1",
      "redis://h:7000?db=two",
    ]) {
      assert.throws(
        () => endpointOfUrl(url, 1),
        (error: unknown) =>
          error instanceof InvalidArgumentError &&
          /nodes\[1\]/.test(error.message) &&
          /the database must be a number/.test(error.message),
        url,
      );
    }
    // createNodes refuses it before any connection is made.
    assert.throws(() => createNodes(["redis://127.0.0.1:1/x"]), InvalidArgumentError);
  });

  it("refuses what is not a redis URL", () => {
    assert.throws(() => endpointOfUrl("127.0.0.1:7001", 2), InvalidArgumentError);
    assert.throws(() => endpointOfUrl("http://h:1", 0), /use redis:\/\/ or rediss:\/\//);
    assert.throws(() => endpointOfUrl("not a url", 0), /nodes\[0\]/);
  });

  it("refuses whitespace around a URL and control characters in it, which ioredis reads otherwise", () => {
    // The URL parser drops them; ioredis threw a TypeError for a leading space.
    for (const url of [
      " redis://127.0.0.1:7701",
      "\tredis://127.0.0.1:7701",
      "redis://127.0.0.1:7701 ",
      "redis://127.0.0.1:7701\n",
      "redis://127.0.0.1:77\t01",
    ]) {
      assert.throws(
        () => createNodes(["redis://127.0.0.1:7700", url]),
        (error: unknown) =>
          error instanceof InvalidArgumentError &&
          error.argument === "nodes[1]" &&
          /leading or trailing whitespace or a control character/.test(error.message),
        JSON.stringify(url),
      );
    }
    // A space inside (a password's) is the URL's to encode, and ioredis reads it the same.
    assert.equal(endpointOfUrl("redis://:pa ss@127.0.0.1:7701", 0), "127.0.0.1:7701");
  });

  it("a URL that does not parse is refused without its password in the message", () => {
    for (const url of ["redis://:s3cret@ho st:1", "redis://:s3/cret@host:1"]) {
      assert.throws(
        () => endpointOfUrl(url, 0),
        (error: unknown) =>
          error instanceof InvalidArgumentError &&
          !error.message.includes("s3") &&
          error.message.includes("is not a URL"),
        url,
      );
    }
  });
});

describe("withoutPassword (URLs in error messages)", () => {
  it("hides the password, keeps the rest", () => {
    assert.equal(withoutPassword("redis://:s3cret@host:1"), "redis://***@host:1");
    assert.equal(withoutPassword("rediss://user:s3cret@host:1/2"), "rediss://***@host:1/2");
    // What makes a URL fail to parse may be in the password itself.
    assert.equal(withoutPassword("redis://:pa/ss@host:1"), "redis://***@host:1");
    assert.equal(withoutPassword("redis://:p@ss@host:1"), "redis://***@host:1");
    assert.equal(withoutPassword("redis://host:6379"), "redis://host:6379");
  });
});

describe("createNodes", () => {
  it("refuses no nodes", () => {
    assert.throws(() => createNodes([]), InvalidArgumentError);
    assert.throws(() => createNodes(undefined as never), InvalidArgumentError);
  });

  it("refuses the same endpoint twice, however it is spelt", () => {
    assert.throws(
      () =>
        createNodes([
          "redis://127.0.0.1:7001",
          "redis://127.0.0.1:7002",
          "redis://:pw@127.0.0.1:7001/0",
        ]),
      (error: unknown) =>
        error instanceof NodeConfigurationError && /nodes\[0\] and nodes\[2\]/.test(error.message),
    );
  });

  it("refuses an ioredis client with a keyPrefix of its own", () => {
    const prefixed = new Redis({ lazyConnect: true, keyPrefix: "app:" });
    const plain = new Redis({ lazyConnect: true, port: 7002 });
    try {
      assert.throws(
        () => createNodes([plain, prefixed]),
        (error: unknown) =>
          error instanceof InvalidArgumentError &&
          error.argument === "nodes[1]" &&
          /keyPrefix "app:" is not supported/.test(error.message),
      );
    } finally {
      prefixed.disconnect();
      plain.disconnect();
    }
  });

  it("refuses something that is neither URL nor client", () => {
    assert.throws(() => createNodes([42 as never]), /nodes\[0\]/);
  });

  it("refuses an ioredis look-alike without on/removeListener when the nodes are made", () => {
    // Before, it passed as an ioredis client and failed "client.on is not a function".
    const lookAlike = { status: "ready", call() {}, connect() {}, disconnect() {}, options: {} };
    assert.throws(
      () => createNodes([lookAlike as never]),
      (error: unknown) => error instanceof InvalidArgumentError && error.argument === "nodes[0]",
    );
  });

  it("refuses a NodeTransport without an endpoint to name it by", () => {
    const transport = { endpoint: " ", send: async () => "OK", close: async () => {} };
    assert.throws(
      () => createNodes([transport]),
      (error: unknown) =>
        error instanceof InvalidArgumentError &&
        /nodes\[0\].*non-empty endpoint/.test(error.message),
    );
  });

  it("refuses more nodes than the limit", () => {
    const urls = Array.from({ length: 16 }, (_, i) => `redis://127.0.0.1:${7000 + i}`);
    assert.throws(() => createNodes(urls), /at most 15/);
  });
});
