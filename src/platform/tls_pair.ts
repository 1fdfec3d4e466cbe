/**
 * A certificate chain and private key read for a reload, checked before any
 * listener serves them: every PEM block complete (a half-written file is
 * refused, not served), every certificate of the chain parseable, the key
 * parseable, and the key the private half of the first certificate's public
 * key. A pair that fails any check throws one line saying which.
 *
 * @module
 */
import { createPrivateKey, X509Certificate } from "node:crypto";

/** A checked pair, PEM-encoded, with what the logs and the expiry metric show. */
export interface TlsPair {
  cert: string;
  key: string;
  /** When the serving (first) certificate expires. */
  notAfter: Date;
  /** Its subject, as `CN=example.org`. */
  subject: string;
  /** SHA-256 fingerprint of the serving certificate, hex with colons. */
  fingerprint: string;
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;

/**
 * Checks PEM text as a pair (see the module).
 *
 * @throws {Error} with a one-line message saying what is wrong.
 */
export function checkTlsPair(
  cert: string,
  key: string,
  names: { certFile: string; keyFile: string } = { certFile: "cert", keyFile: "key" },
): TlsPair {
  const certs = readBlocks(cert, "CERTIFICATE", `--cert "${names.certFile}"`);
  const keys = readBlocks(key, "PRIVATE KEY", `--key "${names.keyFile}"`);
  if (keys.length !== 1) {
    throw new Error(`--key "${names.keyFile}" holds ${keys.length} private keys, expected one`);
  }
  const chain = certs.map((pem, index) => {
    try {
      return new X509Certificate(pem);
    } catch {
      throw new Error(`--cert "${names.certFile}": certificate ${index + 1} cannot be parsed`);
    }
  });
  let privateKey;
  try {
    privateKey = createPrivateKey(keys[0]);
  } catch {
    throw new Error(`--key "${names.keyFile}": the private key cannot be parsed`);
  }
  const leaf = chain[0];
  let matches = false;
  try {
    matches = leaf.checkPrivateKey(privateKey);
  } catch {
    // A key of another type than the certificate's: no match.
  }
  if (!matches) {
    throw new Error(
      `--key "${names.keyFile}" does not match the certificate in --cert "${names.certFile}"`,
    );
  }
  return {
    cert,
    key,
    notAfter: new Date(leaf.validTo),
    subject: leaf.subject.replaceAll("\n", ", "),
    fingerprint: leaf.fingerprint256,
  };
}

/**
 * The complete PEM blocks whose label ends with `kind` (`PRIVATE KEY` takes `EC PRIVATE KEY`
 * and `RSA PRIVATE KEY` too); a BEGIN line without its END means a file still being written.
 */
function readBlocks(text: string, kind: string, where: string): string[] {
  const blocks = [...text.matchAll(BLOCK)].filter((match) => match[1].endsWith(kind));
  const begun = text.split("-----BEGIN ").length - 1;
  const complete = [...text.matchAll(BLOCK)].length;
  if (begun !== complete) throw new Error(`${where} is incomplete: a PEM block has no END line`);
  if (blocks.length === 0) throw new Error(`${where} holds no PEM ${kind}`);
  return blocks.map((match) => match[0]);
}
