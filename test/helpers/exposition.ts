// Read one sample out of a Prometheus text exposition: the way a scraper would see it.

/** The value of `name{labels}` (labels in any order, exact match on the set), or undefined. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',')
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.length === 0) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null || match[1] !== name) continue
    const got = (match[2] ?? '')
      .split(/,(?=[a-zA-Z_]+=")/)
      .filter((s) => s.length > 0)
      .sort()
      .join(',')
    if (got === wanted) return Number(match[3])
  }
  return undefined
}
