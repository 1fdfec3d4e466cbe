/**
 * The portal's mailer, a part of the server's lifecycle: it sends the outbox (written by each
 * change in its own transaction, src/store/store_portal.ts) through SMTP with npm `nodemailer`.
 *
 * Delivery is at least once and never a different message: a message is claimed (its attempt
 * counted, held for {@link MAIL_LEASE_MS}, longer than a send may take), sent, then marked sent; a failed send is retried
 * with a doubling delay (1 s, 2 s, … up to 10 min, {@link MAX_MAIL_ATTEMPTS} in all), and a
 * crash between the commit and the send leaves the message queued for the next start. A
 * retry sends the stored message (the same code) with the same Message-ID. A crash after the
 * server accepted a message and before it was marked sent sends it again: the same message.
 *
 * `smtp://` requires STARTTLS; `smtps://` is TLS from the start. Errors are logged without the
 * URL's credentials.
 *
 * @module
 */
import nodemailer from "nodemailer";
import { isMailboxAddress } from "../auth/portal/mail_address.ts";
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import { toErrorText } from "../platform/logger.ts";
import type { MailState } from "../platform/metrics.ts";
import type { OutboxMail, Store } from "../store/store.ts";
import { redactCredentials } from "../store/store_url.ts";

/** How often the outbox is read. */
export const MAIL_POLL_MS = 1000;
/** How long a claimed message is held before another attempt may claim it. */
export const MAIL_LEASE_MS = 20_000;
/** Sends tried before a message is given up. */
export const MAX_MAIL_ATTEMPTS = 12;
/** The longest delay between two attempts. */
export const MAX_MAIL_BACKOFF_MS = 10 * 60_000;

/** What the mailer needs. */
export interface MailerOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  smtpUrl: string;
  from: string;
  pollMs?: number;
  /** Extra trusted CA certificates in PEM (tests; processes take `DENO_CERT`). */
  ca?: string;
}

/** The running mailer. */
export interface Mailer extends AsyncDisposable {
  /** Reads the outbox now (after a change in this process queued a message). */
  wake(): void;
}

/** The outbox's messages by state, for the `keygate_mail_outbox_messages` gauge. */
export async function readMailStates(store: Pick<Store, "countMail">): Promise<
  Record<MailState, number>
> {
  const counts = await store.countMail();
  return { queued: counts.pending, sent: counts.sent, given_up: counts.givenUp };
}

/** The delay before attempt `attempts + 1`, after `attempts` failed. */
export function toMailBackoffMs(attempts: number): number {
  return Math.min(MAX_MAIL_BACKOFF_MS, 1000 * 2 ** Math.max(0, attempts - 1));
}

/** Starts sending the outbox; disposing it waits for the send under way. */
export function startMailer(options: MailerOptions): Mailer {
  const { store, clock, logger } = options;
  const secure = options.smtpUrl.startsWith("smtps:");
  const url = new URL(options.smtpUrl);
  const transport = nodemailer.createTransport({
    host: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port === "" ? (secure ? 465 : 587) : Number(url.port),
    secure,
    requireTLS: !secure,
    auth: url.username === ""
      ? undefined
      : { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) },
    tls: options.ca === undefined ? undefined : { ca: options.ca },
    // Within the lease together: a send that outlives it could be sent twice.
    connectionTimeout: 5_000,
    greetingTimeout: 5_000,
    socketTimeout: 8_000,
  });
  const domain = options.from.slice(options.from.lastIndexOf("@") + 1);
  let stopped = false;
  let running: Promise<void> | undefined;
  let again = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  async function send(mail: OutboxMail): Promise<void> {
    if (!isMailboxAddress(mail.recipient)) {
      // An operator's user with an address no mail library reads as one mailbox: never sent.
      const error = "the recipient is not one plain address";
      await store.markMailFailed(mail.id, { now: clock.now(), nextAttemptAt: null, error });
      logger.error("mail given up", { outbox_id: mail.id, attempts: mail.attempts, error });
      return;
    }
    try {
      await transport.sendMail({
        from: options.from,
        // One mailbox, never parsed as a list (`a@x,b@y`) or a name (`<a@x>`): the envelope
        // names the only recipient.
        to: { name: "", address: mail.recipient },
        envelope: { from: options.from, to: [mail.recipient] },
        subject: mail.subject,
        text: mail.text,
        messageId: `<outbox-${mail.id}-${mail.createdAt}@${domain}>`,
        date: new Date(mail.createdAt),
      });
      await store.markMailSent(mail.id, clock.now());
      logger.info("mail sent", { outbox_id: mail.id, attempts: mail.attempts });
    } catch (error) {
      const message = redactCredentials(toErrorText(error));
      const givenUp = mail.attempts >= MAX_MAIL_ATTEMPTS;
      const now = clock.now();
      await store.markMailFailed(mail.id, {
        now,
        nextAttemptAt: givenUp ? null : now + toMailBackoffMs(mail.attempts),
        error: message,
      });
      (givenUp ? logger.error : logger.warn)(givenUp ? "mail given up" : "mail failed", {
        outbox_id: mail.id,
        attempts: mail.attempts,
        error: message.slice(0, 200),
      });
    }
  }

  async function drain(): Promise<void> {
    do {
      again = false;
      const claimed = await store.claimMail(clock.now(), { limit: 10, leaseMs: MAIL_LEASE_MS });
      for (const mail of claimed) {
        if (stopped) return;
        await send(mail);
      }
      if (claimed.length === 10) again = true;
    } while (again && !stopped);
  }

  function tick(): void {
    if (stopped) return;
    if (running !== undefined) {
      again = true;
      return;
    }
    running = drain().catch((error) => {
      logger.warn("mail outbox unreadable", {
        error: redactCredentials(toErrorText(error)).slice(
          0,
          200,
        ),
      });
    }).finally(() => {
      running = undefined;
      if (!stopped) timer = setTimeout(tick, again ? 0 : options.pollMs ?? MAIL_POLL_MS);
    });
  }

  tick();
  return {
    wake() {
      if (timer !== undefined && running === undefined) {
        clearTimeout(timer);
        timer = undefined;
        tick();
      } else {
        again = true;
      }
    },
    async [Symbol.asyncDispose]() {
      stopped = true;
      clearTimeout(timer);
      await running;
      transport.close();
    },
  };
}
