// The allow and deny lists in force, as the dashboard shows them: per policy that has any, each
// list's size and its first entries (a list may hold 10,000; a snapshot is pushed every second).
import type { CompiledLists, ListEntries } from '../lists.js'

/** Entries of one list a snapshot shows; the counts are always whole. */
const SHOWN_ENTRIES = 20

/** One list as the dashboard shows it. */
export interface ListSnapshot {
  /** How many `keys` and `ips` entries the list has. */
  keys: number
  ips: number
  /** The first entries of each (at most 20 of each). */
  shown: { keys: string[]; ips: string[] }
}

/** The lists of one policy. */
export interface PolicyListsSnapshot {
  policy: string
  allow: ListSnapshot | null
  deny: ListSnapshot | null
}

function listSnapshot(list: Readonly<ListEntries> | undefined): ListSnapshot | null {
  if (list === undefined) return null
  const keys = list.keys ?? []
  const ips = list.ips ?? []
  return {
    keys: keys.length,
    ips: ips.length,
    shown: { keys: keys.slice(0, SHOWN_ENTRIES), ips: ips.slice(0, SHOWN_ENTRIES) },
  }
}

/** The lists of the policies that have any, in the policies' order (none: an empty list). */
export function listsSnapshot(
  policies: Readonly<Record<string, { readonly lists?: CompiledLists }>> | undefined,
): PolicyListsSnapshot[] {
  const out: PolicyListsSnapshot[] = []
  for (const [policy, resolved] of Object.entries(policies ?? {})) {
    const lists = resolved.lists
    if (lists === undefined) continue
    out.push({ policy, allow: listSnapshot(lists.allow), deny: listSnapshot(lists.deny) })
  }
  return out
}
