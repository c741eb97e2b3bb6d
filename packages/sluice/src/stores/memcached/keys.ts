// Item keys: `prefix:policyId:subject`. memcached keys are at most 250 bytes of printable ASCII
// without spaces, so a subject (the caller's key: any string) that is not short printable ASCII is
// replaced by `#` + the SHA-256 of its UTF-16 code units. Policy ids are `[A-Za-z0-9_.-]{1,64}`
// and the prefix holds no `:`, so no two (policy, subject) pairs share an item.
import { createHash } from 'node:crypto'
import type { Step } from '../../store.js'

/** Longest memcached key (bytes). */
export const MAX_KEY_BYTES = 250
/** The prefix: 1-64 printable ASCII characters, no space and no `:`. */
export const PREFIX_PATTERN = /^[!-9;-~]{1,64}$/
/** A subject kept readable: printable ASCII without space, not starting with `#` (hashed ones do). */
const RAW_SUBJECT = /^[!-"$-~][!-~]*$/

/** The item key of one step. */
export function itemKey(prefix: string, step: Step): string {
  const head = `${prefix}:${step.policy.id}:`
  const subject = step.key
  // Every character of a raw subject is one byte, so length is the byte count.
  if (head.length + subject.length <= MAX_KEY_BYTES && RAW_SUBJECT.test(subject)) return head + subject
  // 64 + 1 + 64 + 1 + 1 + 43 = 174 bytes at most.
  return `${head}#${createHash('sha256').update(subject, 'utf16le').digest('base64url')}`
}
