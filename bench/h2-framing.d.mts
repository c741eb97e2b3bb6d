import type { Server } from 'node:net'

/** The framing ceiling (not listening yet): every request stream answered with `frame` and OK trailers. */
export function framingServer(frame: Buffer): Server
