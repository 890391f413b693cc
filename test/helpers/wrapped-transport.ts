import { IoredisTransport } from "../../src/node/ioredis-transport.js";
import { endpointOfUrl } from "../../src/node/resolve.js";
import type { NodeTransport, Subscription } from "../../src/node/transport.js";

/** What a test changes in a node's transport; the rest is the real one's. */
export interface TransportOverrides {
  send?(args: readonly string[], timeoutMs: number): Promise<unknown>;
  /** `null`: no pub/sub connection (waiters then poll). */
  subscribe?: ((onMessage: (channel: string, message: string) => void) => Subscription) | null;
}

/**
 * One real ioredis transport per URL, with what `overrides` returns for it
 * in place of its `send` or `subscribe`: how a test holds back, slows or
 * answers a node's commands while the rest stays real.
 */
export function wrappedTransports(
  urls: readonly string[],
  overrides: (real: NodeTransport, index: number) => TransportOverrides,
): NodeTransport[] {
  return urls.map((url, i) => {
    const real = IoredisTransport.fromUrl(url, endpointOfUrl(url, i));
    const { send, subscribe } = overrides(real, i);
    const subscribeWith = subscribe === undefined ? real.subscribe?.bind(real) : subscribe;
    return {
      endpoint: real.endpoint,
      get epoch() {
        return real.epoch;
      },
      send: send ?? ((args, timeoutMs) => real.send(args, timeoutMs)),
      close: () => real.close(),
      ...(subscribeWith ? { subscribe: subscribeWith } : {}),
    };
  });
}
