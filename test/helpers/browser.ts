import { existsSync } from 'node:fs'
import type { Locator } from 'playwright-core'

/**
 * Debian's chromium for the browser tests, driven by playwright-core (no browser download; .ci/run installs the
 * package). CHROMIUM_PATH, when set, is the only place looked at, so a run can also be made to skip on purpose.
 */
const CANDIDATES = process.env.CHROMIUM_PATH ? [process.env.CHROMIUM_PATH] : ['/usr/bin/chromium', '/usr/bin/chromium-browser']

export const chromiumPath: string | undefined = CANDIDATES.find((p) => existsSync(p))

/** A browser test's `skip` option: false where chromium is installed, else the reason. */
export const skipWithoutChromium: false | string = chromiumPath
  ? false
  : `no chromium binary found (looked at ${CANDIDATES.join(', ')}); install it with apt-get install chromium`

/** The text as rendered, after CSS: what a reader of the page sees is the point of a browser test. */
// biome-ignore lint/performance/useDomNodeTextContent: playwright's innerText is the rendered text, wanted here
export const seen = (locator: Locator) => locator.innerText()
