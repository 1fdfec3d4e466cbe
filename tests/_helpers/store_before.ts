/**
 * A race held open deterministically: a store whose `method`, the first time it is called while
 * `when()` holds, first awaits `before` (a change that commits just then, between the caller's
 * read and its write). Every other call goes straight to the store.
 *
 * @module
 */
import type { Store } from "../../src/store/store.ts";

/** `store`, but `method` first runs `before` once (see the module doc). */
export function changingBefore<M extends keyof Store>(
  store: Store,
  method: M,
  before: (store: Store, args: unknown[]) => Promise<unknown>,
  when: () => boolean = () => true,
): Store {
  let done = false;
  return new Proxy(store, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if (typeof value !== "function") return value;
      if (name !== method) return value.bind(target);
      return async (...args: unknown[]) => {
        if (!done && when()) {
          done = true;
          await before(target, args);
        }
        return await value.apply(target, args);
      };
    },
  });
}
