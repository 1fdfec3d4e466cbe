/**
 * TLS credentials: the operator's certificate and key, or a self-signed pair
 * for `localhost` and `127.0.0.1`, generated once and kept beside the database.
 *
 * @module
 */
import "reflect-metadata"; // @peculiar/x509's dependency injection needs it, and first.
import * as x509 from "@peculiar/x509";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

/** A certificate chain and private key, PEM-encoded. */
export interface TlsCredentials {
  cert: string;
  key: string;
  /** Set when keygate generated (or reused) its own self-signed certificate. */
  selfSignedPath?: string;
}

/** Options for {@link loadTlsCredentials}. */
export interface TlsOptions {
  certFile?: string;
  keyFile?: string;
  /** The database path; a self-signed pair is kept in its directory. */
  dbPath: string;
}

const SELF_SIGNED_DAYS = 365;

/**
 * Reads the configured certificate and key, or reuses or generates the
 * self-signed pair beside the database (regenerated once expired).
 */
export async function loadTlsCredentials(options: TlsOptions): Promise<TlsCredentials> {
  if (options.certFile !== undefined && options.keyFile !== undefined) {
    return {
      cert: await Deno.readTextFile(options.certFile),
      key: await Deno.readTextFile(options.keyFile),
    };
  }
  const dir = dirname(options.dbPath);
  const certPath = join(dir, "keygate-cert.pem");
  const keyPath = join(dir, "keygate-key.pem");
  if (existsSync(certPath) && existsSync(keyPath)) {
    const cert = await Deno.readTextFile(certPath);
    if (new x509.X509Certificate(cert).notAfter.getTime() > Date.now() + 86_400_000) {
      return { cert, key: await Deno.readTextFile(keyPath), selfSignedPath: certPath };
    }
  }
  const generated = await generateSelfSigned();
  await Deno.writeTextFile(keyPath, generated.key, { mode: 0o600 });
  await Deno.writeTextFile(certPath, generated.cert);
  return { ...generated, selfSignedPath: certPath };
}

/** Generates an ECDSA P-256 certificate for `localhost` and `127.0.0.1`, valid `days`. */
export async function generateSelfSigned(
  days = SELF_SIGNED_DAYS,
): Promise<{ cert: string; key: string }> {
  const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Array.from(
      crypto.getRandomValues(new Uint8Array(8)),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("").replace(/^[89a-f]/, "1"),
    name: "CN=localhost",
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + days * 86_400_000),
    signingAlgorithm: algorithm,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.SubjectAlternativeNameExtension([
        { type: "dns", value: "localhost" },
        { type: "ip", value: "127.0.0.1" },
        { type: "ip", value: "::1" },
      ]),
    ],
  }, crypto);
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { cert: certificate.toString("pem"), key: toPem("PRIVATE KEY", pkcs8) };
}

function toPem(label: string, der: Uint8Array): string {
  const base64 = btoa(String.fromCharCode(...der)).replace(/(.{64})/g, "$1\n").trimEnd();
  return `-----BEGIN ${label}-----\n${base64}\n-----END ${label}-----\n`;
}
