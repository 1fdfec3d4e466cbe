/**
 * The portal's messages, as plain text: the verification and reset codes (with a link whose
 * page asks for a POST, so that a mail scanner that follows links spends nothing), and the
 * notices. An API key is never mailed.
 *
 * @module
 */
import type { NewMail } from "../../store/store.ts";

/** Where links point: the portal's public origin. */
export interface MailLinks {
  origin: string;
}

function link(links: MailLinks, page: string, email: string, code: string): string {
  const query = new URLSearchParams({ email, code });
  return `${links.origin}/portal/${page}?${query}`;
}

export function toVerifyMail(links: MailLinks, email: string, code: string): NewMail {
  return {
    recipient: email,
    subject: "Verify your e-mail address",
    text: `Your verification code is ${code}\n\n` +
      `Enter it on the portal, or open this page and confirm:\n${
        link(links, "verify", email, code)
      }\n\n` +
      "The code works for 24 hours. If you did not sign up, ignore this message.\n",
  };
}

export function toResetMail(links: MailLinks, email: string, code: string): NewMail {
  return {
    recipient: email,
    subject: "Reset your password",
    text: `Your password reset code is ${code}\n\n` +
      `Enter it on the portal with a new password, or open this page:\n${
        link(links, "reset", email, code)
      }\n\n` +
      "The code works for 1 hour. If you did not ask for it, ignore this message: your " +
      "password stays as it is.\n",
  };
}

export function toAlreadyRegisteredMail(links: MailLinks, email: string): NewMail {
  return {
    recipient: email,
    subject: "You already have an account",
    text: "Someone (perhaps you) tried to sign up with this address, which already has an " +
      `account. To sign in: ${links.origin}/portal/\n` +
      `Forgot your password? ${links.origin}/portal/#forgot\n`,
  };
}

export function toPasswordChangedMail(links: MailLinks, email: string): NewMail {
  return {
    recipient: email,
    subject: "Your password was changed",
    text: "The password of your account was changed, and every access token issued before " +
      `was ended. If this was not you, reset your password now: ${links.origin}/portal/#forgot\n`,
  };
}

export function toApprovedMail(links: MailLinks, email: string): NewMail {
  return {
    recipient: email,
    subject: "Your account was approved",
    text: `Your account is ready. Sign in: ${links.origin}/portal/\n`,
  };
}

export function toEmailChangeMail(links: MailLinks, email: string, code: string): NewMail {
  return {
    recipient: email,
    subject: "Confirm your new e-mail address",
    text: `Your confirmation code is ${code}\n\n` +
      "Someone signed in to the portal asked to make this address their account's. Enter the " +
      `code on the portal's account page, signed in, or open this page and confirm:\n${
        link(links, "email", email, code)
      }\n\n` +
      "The code works for 24 hours. If you did not ask for this, ignore this message: nothing " +
      "changes.\n",
  };
}

export function toEmailChangedMail(links: MailLinks, oldEmail: string, newEmail: string): NewMail {
  return {
    recipient: oldEmail,
    subject: "Your e-mail address was changed",
    text: `The e-mail address of your account was changed from ${oldEmail} to ${newEmail}; ` +
      "messages about it now go there. If this was not you, ask the operator of " +
      `${links.origin} to lock the account now.\n`,
  };
}
