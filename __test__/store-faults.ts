/**
 * Faults made at the Store interface of a real store: the store does its work, and what
 * the caller sees of it is delayed or lost, as a network that holds or cuts a reply would
 * make it. Every store (and both Redis transports) meets the same case this way; the fault
 * proxy (stress/faults/) makes the same faults on the wire.
 */

type Store = import('../dist/core/store.js').Store;
type AcquireRequest = import('../dist/core/store.js').AcquireRequest;

/** `store` with some methods replaced; every other member is the store's own. */
function withMethods(store: Store, methods: Partial<Record<keyof Store, unknown>>): Store {
  return new Proxy(store, {
    get(target, property) {
      if (Object.hasOwn(methods, property)) return methods[property as keyof Store];
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

export interface Held {
  store: Store;
  /** Resolves when the held claim was made on the store (its reply not yet delivered). */
  claimed: Promise<void>;
  /** Delivers the held reply. */
  release: () => void;
}

/** `store`, except that the reply of the first acquire that `which` picks is held until released. */
export function holdingReply(store: Store, which: (req: AcquireRequest) => boolean = () => true): Held {
  let holding = true;
  let claimed!: () => void;
  let release!: () => void;
  const made = new Promise<void>((r) => (claimed = r));
  const released = new Promise<void>((r) => (release = r));
  const held = withMethods(store, {
    acquire: async (req: AcquireRequest) => {
      const reply = await store.acquire(req);
      if (holding && which(req)) {
        holding = false;
        claimed();
        await released;
      }
      return reply;
    },
  });
  return { store: held, claimed: made, release };
}

/** A reply lost to a dying connection: what the store did, it did; the caller gets an error. */
const lost = (what: string) => new Error(`${what}: the connection was reset before the reply (a fault of the test)`);

/** Which of a store's replies are lost (each asked at the time of the call). */
export interface LostReplies {
  /** `complete` is applied, then its reply lost. */
  complete: () => boolean;
  /** `get` fails (the read never reaches the store). */
  get: () => boolean;
  /** `renew` fails. */
  renew: () => boolean;
}

/** `store`, except that the replies `lose` picks are lost: a settle whose outcome nobody can see. */
export function repliesLost(store: Store, lose: LostReplies): Store {
  return withMethods(store, {
    complete: async (req: Parameters<Store['complete']>[0]) => {
      const done = await store.complete(req);
      if (lose.complete()) throw lost('complete');
      return done;
    },
    get: async (key: string) => {
      if (lose.get()) throw lost('get');
      return store.get(key);
    },
    renew: async (key: string, token: string, leaseMs: number) => {
      if (lose.renew()) throw lost('renew');
      return store.renew!(key, token, leaseMs);
    },
  });
}

/** Every complete's reply, read and renewal lost while `faulty()` is true. */
export function settleRepliesLost(store: Store, faulty: () => boolean): Store {
  return repliesLost(store, { complete: faulty, get: faulty, renew: faulty });
}
