import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { generateSelfSigned } from "../../src/platform/tls.ts";
import { checkTlsPair } from "../../src/platform/tls_pair.ts";

const names = { certFile: "cert.pem", keyFile: "key.pem" };

Deno.test("checkTlsPair() accepts a matching pair and reports its expiry and subject", async () => {
  const pair = await generateSelfSigned(40);
  const checked = checkTlsPair(pair.cert, pair.key, names);
  assert.equal(checked.subject, "CN=localhost");
  assert.ok(Math.abs(checked.notAfter.getTime() - (Date.now() + 40 * 86_400_000)) < 120_000);
  assert.match(checked.fingerprint, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  // A chain: the serving certificate first, then another one.
  const other = await generateSelfSigned();
  assert.deepEqual(
    checkTlsPair(pair.cert + other.cert, pair.key, names).notAfter,
    checked.notAfter,
  );
});

Deno.test("checkTlsPair() refuses a key that is not the certificate's, of the same or another type", async () => {
  const [pair, other] = [await generateSelfSigned(), await generateSelfSigned()];
  const expected = /^Error: --key "key.pem" does not match the certificate in --cert "cert.pem"$/;
  assert.throws(() => checkTlsPair(pair.cert, other.key, names), expected);
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey
    .export({ type: "pkcs1", format: "pem" }) as string;
  assert.match(rsa, /BEGIN RSA PRIVATE KEY/);
  assert.throws(() => checkTlsPair(pair.cert, rsa, names), expected);
});

Deno.test("checkTlsPair() refuses half-written, empty, garbage and doubled files, naming the file", async () => {
  const pair = await generateSelfSigned();
  const cases: [string, string, RegExp][] = [
    [
      pair.cert.slice(0, 150),
      pair.key,
      /^Error: --cert "cert.pem" is incomplete: a PEM block has no END/,
    ],
    [
      pair.cert,
      pair.key.slice(0, 90),
      /^Error: --key "key.pem" is incomplete: a PEM block has no END/,
    ],
    ["", pair.key, /^Error: --cert "cert.pem" holds no PEM CERTIFICATE$/],
    [pair.cert, "garbage", /^Error: --key "key.pem" holds no PEM PRIVATE KEY$/],
    [pair.key, pair.cert, /^Error: --cert "cert.pem" holds no PEM CERTIFICATE$/],
    [
      pair.cert.replace(/\n[A-Za-z0-9+/]{20}/, "\n!!!!"),
      pair.key,
      /certificate 1 cannot be parsed/,
    ],
    [pair.cert, pair.key + pair.key, /^Error: --key "key.pem" holds 2 private keys, expected one$/],
  ];
  for (const [cert, key, expected] of cases) {
    assert.throws(() => checkTlsPair(cert, key, names), expected);
  }
});
