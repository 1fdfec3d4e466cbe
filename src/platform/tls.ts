/**
 * TLS credentials without `--cert` and `--key`: a self-signed pair for
 * `localhost` and `127.0.0.1`, kept in a directory (beside the SQLite
 * database, or `--self-signed-dir`) and reused until it expires, or, with no
 * directory (a PostgreSQL store), generated in memory for this process alone:
 * nothing is written unless the operator named a place for it.
 *
 * @module
 */
import "reflect-metadata"; // @peculiar/x509's dependency injection needs it, and first.
import * as x509 from "@peculiar/x509";
import { existsSync } from "node:fs";
import { join } from "node:path";

/** A certificate chain and private key, PEM-encoded. */
export interface TlsCredentials {
  cert: string;
  key: string;
  /** The file of the self-signed certificate; absent when it lives in memory only. */
  selfSignedPath?: string;
  /** The self-signed certificate's SHA-256 fingerprint (colon-separated hex), to pin it. */
  fingerprint: string;
}

const SELF_SIGNED_DAYS = 365;

/**
 * The self-signed pair: reused from `dir` (`keygate-cert.pem`, `keygate-key.pem`, mode 0600)
 * while it has more than a day left, else generated and written there; with no `dir`, generated
 * in memory. `dir` must exist; errors of reading and writing pass through.
 */
export async function loadSelfSigned(dir: string | undefined): Promise<TlsCredentials> {
  if (dir === undefined) {
    const generated = await generateSelfSigned();
    return { ...generated, fingerprint: await fingerprintOf(generated.cert) };
  }
  const certPath = join(dir, "keygate-cert.pem");
  const keyPath = join(dir, "keygate-key.pem");
  if (existsSync(certPath) && existsSync(keyPath)) {
    const cert = await Deno.readTextFile(certPath);
    if (new x509.X509Certificate(cert).notAfter.getTime() > Date.now() + 86_400_000) {
      return {
        cert,
        key: await Deno.readTextFile(keyPath),
        selfSignedPath: certPath,
        fingerprint: await fingerprintOf(cert),
      };
    }
  }
  const generated = await generateSelfSigned();
  await Deno.writeTextFile(keyPath, generated.key, { mode: 0o600 });
  await Deno.writeTextFile(certPath, generated.cert);
  return {
    ...generated,
    selfSignedPath: certPath,
    fingerprint: await fingerprintOf(generated.cert),
  };
}

/** A PEM certificate's SHA-256 fingerprint, as `openssl x509 -fingerprint -sha256` shows it. */
export async function fingerprintOf(pem: string): Promise<string> {
  const der = new x509.X509Certificate(pem).rawData;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", der));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0").toUpperCase()).join(":");
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
