/**
 * Settings of authentication: token lifetime and the login queue.
 * Each row is placed in the `--help` order by `SETTINGS` in ../settings.ts.
 *
 * @module
 */
import { type Setting, setting } from "../setting.ts";
import { parseDurationSetting, parseLoginQueueWait } from "../parsers.ts";

/** The auth settings. */
export const AUTH_SETTINGS: readonly Setting[] = [
  setting({
    key: "defaultTimeoutSeconds",
    flag: "default-timeout",
    env: "KEYGATE_DEFAULT_TIMEOUT",
    default: "10h",
    parse: parseDurationSetting,
    placeholder: "DURATION",
    description: "Token lifetime for users without their own timeout",
  }),
  setting({
    key: "loginQueueWaitSeconds",
    flag: "login-queue-wait",
    env: "KEYGATE_LOGIN_QUEUE_WAIT",
    default: "5s",
    parse: parseLoginQueueWait,
    placeholder: "DURATION",
    description: "Queue logins while their expected wait for a hash is within this",
  }),
];
