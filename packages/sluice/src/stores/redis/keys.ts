// Physical key names. Every key of one subject (the caller's key) carries one Redis Cluster hash tag,
// so every policy of that subject lands in one slot and a layered decision on it is one script call.
// Two layouts: the subject itself as the tag (`prefix:{subject}:policy`), or a tag derived from the
// subject with a per-deployment secret (`prefix:{tag}:{subject}:policy`), so that a caller who picks
// its keys cannot pick the slot, and so the Cluster master, they land on.
import { createHash, randomBytes } from 'node:crypto'
import type { Step } from '../../store.js'
import { sipHash24, sipKey } from './siphash.js'

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

/** The physical keys of a step under one layout. */
export type KeyLayout = (step: Step) => StepKeys

/**
 * Keys of one step with the subject as the hash tag: `prefix:{subject}:policy`. The prefix holds no
 * `{` or `}` (validated) and policy ids are `[A-Za-z0-9_.-]`, so (prefix, subject, policy) is
 * recovered unambiguously from a key: no two steps of different policies or subjects share a key.
 */
export function stepKeys(prefix: string, step: Step): StepKeys {
  const tag = subjectTag(step.key)
  const state = `${prefix}:{${tag}}:${step.policy.id}`
  return { tag, state, block: `${state}:block` }
}

/** The base64url alphabet, as character codes. */
const BASE64URL = Array.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_', (c) =>
  c.charCodeAt(0),
)
/** A subject tag as UTF-16LE bytes: at most 64 units (subjectTag), so 128 bytes. */
const scratch = new Uint8Array(2 * MAX_RAW_SUBJECT)

/**
 * Keys of one step with a keyed hash tag: `prefix:{tag}:{subject}:policy`, where the tag is 24 bits
 * of SipHash-2-4 of the subject tag's UTF-16 code units, keyed with 128 bits of SHA-256(secret), in
 * 4 base64url characters (more bits than the 14 of a Cluster slot). Only the first `{...}` of a key
 * is its Cluster hash tag, so the slot follows the keyed tag alone; the subject between the second
 * pair of braces (which it never holds: subjectTag) keeps the name unique and readable. A name of
 * this layout never equals one of the subject layout: here the first `}` is followed by `:{`, there
 * by a policy id, which holds no braces.
 */
export function keyedLayout(prefix: string, secret: string): KeyLayout {
  const key = sipKey(createHash('sha256').update(secret, 'utf8').digest().subarray(0, 16))
  return (step) => {
    const subject = subjectTag(step.key)
    for (let i = 0; i < subject.length; i++) {
      const unit = subject.charCodeAt(i)
      scratch[2 * i] = unit & 0xff
      scratch[2 * i + 1] = unit >>> 8
    }
    const bits = sipHash24(key, scratch, 2 * subject.length)[1] & 0xffffff
    const tag = String.fromCharCode(
      BASE64URL[bits >>> 18]!,
      BASE64URL[(bits >>> 12) & 63]!,
      BASE64URL[(bits >>> 6) & 63]!,
      BASE64URL[bits & 63]!,
    )
    const state = `${prefix}:{${tag}}:{${subject}}:${step.policy.id}`
    return { tag, state, block: `${state}:block` }
  }
}

/** Keys of one step with the subject as the hash tag, as a layout. */
export function subjectLayout(prefix: string): KeyLayout {
  return (step) => stepKeys(prefix, step)
}

/** The Redis key holding a deployment's slot secret (no hash tag: it is read once, not per decision). */
export const slotSecretKey = (prefix: string): string => `${prefix}:slot-secret`

/** What a slot secret kept in Redis needs of the client. */
export interface SecretClient {
  get(key: string): Promise<string | undefined>
  setIfAbsent(key: string, value: string): Promise<void>
}

/** The keyed layout of a secret kept in Redis: unknown until read, and re-read when asked. */
export interface SharedLayout {
  /** The layout in force; undefined until the secret has been read once. */
  readonly current: KeyLayout | undefined
  /**
   * Write the secret in force (or, the first time, a new random one) unless the key holds one, then
   * put whatever the key holds in force. Concurrent calls share one round of SETNX and GET.
   */
  sync(): Promise<void>
}

/**
 * A keyed layout whose secret is kept in Redis under `prefix:slot-secret`, created once with SETNX
 * by the first process that needs it and read by every other: every process sharing the prefix
 * agrees on it without configuration. A process writes back the secret it uses when the key is
 * missing (after a restart that lost the data, a FLUSHALL, a DEL) and adopts the stored one when
 * another process got there first, so processes that ever disagree converge at their next `sync`.
 */
export function sharedLayout(prefix: string, client: SecretClient): SharedLayout {
  const key = slotSecretKey(prefix)
  let secret: string | undefined
  let current: KeyLayout | undefined
  let pending: Promise<void> | undefined
  async function read(): Promise<void> {
    await client.setIfAbsent(key, secret ?? randomBytes(32).toString('base64url'))
    const stored = await client.get(key)
    // Deleted again between the two commands: the next sync writes it back.
    if (stored === undefined || stored === '') throw new Error(`the slot secret ${key} vanished; retry`)
    if (stored !== secret) {
      secret = stored
      current = keyedLayout(prefix, stored)
    }
  }
  return {
    get current() {
      return current
    },
    sync() {
      pending ??= read().finally(() => {
        pending = undefined
      })
      return pending
    },
  }
}
