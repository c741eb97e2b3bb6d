// Debian's Chromium, headless, for the browser tests (playwright-core drives it; no browser download).
// The flags keep it from reaching out on its own (updates, sync, QUIC probes), so a test talks only
// to the servers it started, on machines with no way out.
import { existsSync } from 'node:fs'
import { type Browser, chromium } from 'playwright-core'

export const CHROMIUM = '/usr/bin/chromium'
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** Launch Chromium, or fail with the command that installs it. */
export function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this on CI)`)
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS })
}
