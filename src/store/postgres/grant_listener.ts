/**
 * The grant change record's listener (grant_epoch.ts describes the protocol): `LISTEN` on its own
 * connection, where a notification, whatever its payload says, only prompts a poll.
 *
 * @module
 */
import type postgres from "postgres";

/** The notification channel. */
export const GRANT_CHANNEL = "keygate_grants";

/**
 * The callbacks a listener client must be created with: they route
 * notifications and connection loss into a watcher made with
 * `createGrantEpochWatcher`. postgres.js takes `onnotify` and
 * `onclose` only at creation, so they are bound late.
 */
export interface ListenerHooks {
  onnotify(channel: string, payload: string): void;
  onclose(): void;
}

/** Options for {@link createGrantListener}. */
export interface GrantListenerOptions {
  /** Opens the listener's own client, or `undefined` to poll only (an engine without LISTEN). */
  openListener?: (hooks: ListenerHooks) => postgres.Sql;
  /** Told when the listener connects or is lost, once per change. */
  onListenerChange?: (listening: boolean, error?: unknown) => void;
  /** Polls the record now: after every (re)connection (and on notifications without pollSoon). */
  pollNow(): Promise<void>;
  /** Polls the record soon (poll_loop.ts): on every notification. */
  pollSoon?(): void;
  /** Told of every notification's payload before its poll (for the delay metric only). */
  onPayload?(payload: string): void;
}

/** The listener's connection and state. */
export interface GrantListener {
  /** Its own client (the poll uses it too), or `undefined` without a listener. */
  readonly sql: postgres.Sql | undefined;
  readonly listening: boolean;
  /** Notifications received. */
  readonly notifications: number;
  /** Times it (re)connected. */
  readonly listens: number;
  /** Listens, if it is not already trying; after it does, polls (nothing was heard meanwhile). */
  start(): Promise<void>;
  /** Waits for an attempt under way, then closes the connection. */
  close(): Promise<void>;
}

/** Opens the listener's client (it starts listening on {@link GrantListener.start}). */
export function createGrantListener(options: GrantListenerOptions): GrantListener {
  const { pollNow } = options;
  let listening = false;
  let notifications = 0;
  let listens = 0;
  let attempt: Promise<void> | undefined;
  /** What {@link GrantListenerOptions.onListenerChange} was last told. */
  let reported: boolean | undefined;

  function report(up: boolean, error?: unknown): void {
    if (reported === up) return;
    reported = up;
    options.onListenerChange?.(up, error);
  }

  const sql = options.openListener?.({
    onnotify(channel, payload) {
      if (channel !== GRANT_CHANNEL) return;
      notifications++;
      options.onPayload?.(payload);
      // A prompt, never a fact: whatever the payload says, only the record is believed.
      if (options.pollSoon !== undefined) options.pollSoon();
      else void pollNow();
    },
    onclose() {
      if (!listening) return;
      listening = false;
      report(false);
    },
  });

  return {
    sql,
    get listening() {
      return listening;
    },
    get notifications() {
      return notifications;
    },
    get listens() {
      return listens;
    },
    start() {
      if (sql === undefined) return Promise.resolve();
      attempt ??= (async () => {
        try {
          await sql.unsafe(`LISTEN ${GRANT_CHANNEL}`);
          listening = true;
          listens++;
          report(true);
          // Notifications sent while we were not listening are lost: the record has them.
          await pollNow();
        } catch (error) {
          listening = false;
          report(false, error);
        } finally {
          attempt = undefined;
        }
      })();
      return attempt;
    },
    async close() {
      await attempt;
      listening = false;
      await sql?.end({ timeout: 0 });
    },
  };
}
