// Physical key names: `prefix:{subject}:policy` with the subject (the caller's key) as the Redis
// Cluster hash tag, so every policy of one subject lands in one slot and a layered decision on one
// subject is one script call. Subjects that could break the tag or collide are hashed.
import { createHash } from 'node:crypto'
import type { Step } from '../../store.js'

/** Longest subject (UTF-16 units) kept readable in the key; longer ones are hashed. */
const MAX_RAW_SUBJECT = 64
// Raw only when it cannot end or open a hash tag, is well-formed text (lone surrogates would be
// encoded lossily as UTF-8 and collide) and does not start with `#`, which marks a hashed subject.
const UNSAFE_SUBJECT = /[{}\uD800-\uDFFF]|^#/

/** The hash tag of a subject: the subject itself when safe, else `#` + SHA-1 of its UTF-16 code units. */
export function subjectTag(key: string): string {
  if (key.length > 0 && key.length <= MAX_RAW_SUBJECT && !UNSAFE_SUBJECT.test(key)) return key
  return `#${createHash('sha1').update(key, 'utf16le').digest('base64url')}`
}

export interface StepKeys {
  /** The hash tag content; steps with equal tags share a Cluster slot. */
  tag: string
  /** Holds the algorithm's state. */
  state: string
  /** Holds a block (penalty) until a time. */
  block: string
}

/**
 * Keys of one step. The prefix holds no `{` or `}` (validated) and policy ids are
 * `[A-Za-z0-9_.-]`, so (prefix, subject, policy) is recovered unambiguously from a key: no two
 * steps of different policies or subjects can share a key.
 */
export function stepKeys(prefix: string, step: Step): StepKeys {
  const tag = subjectTag(step.key)
  const state = `${prefix}:{${tag}}:${step.policy.id}`
  return { tag, state, block: `${state}:block` }
}
