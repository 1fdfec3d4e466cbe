/**
 * A real SMTP server for the portal's tests (npm `smtp-server`): STARTTLS with the test
 * certificate, optional login, and the messages it received, parsed enough to read a code.
 *
 * @module
 */
import { SMTPServer } from "smtp-server";

/** A message the server accepted. */
export interface ReceivedMail {
  from: string;
  to: string[];
  /** The raw message (headers and body). */
  raw: string;
  subject: string;
  messageId: string;
  body: string;
}

/** A running test SMTP server. */
export interface TestSmtp extends AsyncDisposable {
  port: number;
  /** `smtp://user:secret@localhost:PORT` */
  url: string;
  received: ReceivedMail[];
  /** Resolves to the first message to `to` whose subject includes `subject`, after `skip` such. */
  waitFor(
    to: string,
    subject: string,
    options?: { timeoutMs?: number; skip?: number },
  ): Promise<ReceivedMail>;
}

function parse(raw: string, from: string, to: string[]): ReceivedMail {
  const split = raw.indexOf("\r\n\r\n");
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, " ");
  const header = (name: string) =>
    new RegExp(`^${name}:\\s*(.*)$`, "im").exec(head)?.[1].trim() ?? "";
  let body = raw.slice(split + 4);
  if (/quoted-printable/i.test(header("Content-Transfer-Encoding"))) {
    body = body.replace(/=\r\n/g, "").replace(
      /=([0-9A-F]{2})/g,
      (_, hex) => String.fromCharCode(parseInt(hex, 16)),
    );
  }
  return { from, to, raw, subject: header("Subject"), messageId: header("Message-ID"), body };
}

/** Starts an SMTP server on a free port of 127.0.0.1, requiring STARTTLS and a login. */
export async function startTestSmtp(
  tls: { cert: string; key: string },
  options: { port?: number } = {},
): Promise<TestSmtp> {
  const received: ReceivedMail[] = [];
  const server = new SMTPServer({
    secure: false,
    key: tls.key,
    cert: tls.cert,
    authMethods: ["PLAIN", "LOGIN"],
    authOptional: false,
    disabledCommands: [],
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === "user" && auth.password === "secret") {
        return callback(null, { user: "user" });
      }
      callback(new Error("Invalid login"));
    },
    onData(stream, session, callback) {
      const chunks: Uint8Array[] = [];
      stream.on("data", (chunk: Uint8Array) => chunks.push(chunk));
      stream.on("end", () => {
        const raw = new TextDecoder().decode(Buffer.concat(chunks));
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : "";
        received.push(parse(raw, from, session.envelope.rcptTo.map((r) => r.address)));
        callback();
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      resolve((server.server.address() as { port: number }).port);
    });
  });
  return {
    port,
    url: `smtp://user:secret@localhost:${port}`,
    received,
    async waitFor(to, subject, { timeoutMs = 15_000, skip = 0 } = {}) {
      const until = Date.now() + timeoutMs;
      while (Date.now() < until) {
        const found = received.filter((m) => m.to.includes(to) && m.subject.includes(subject));
        if (found.length > skip) return found[skip];
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`No mail "${subject}" to ${to} within ${timeoutMs} ms`);
    },
    async [Symbol.asyncDispose]() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The code (`XXXXX-XXXXX`) in a mail. */
export function readCode(mail: ReceivedMail): string {
  const code = /\b([A-Z0-9]{5}-[A-Z0-9]{5})\b/.exec(mail.body)?.[1];
  if (code === undefined) throw new Error(`No code in mail "${mail.subject}"`);
  return code;
}
