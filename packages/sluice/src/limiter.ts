// The limiter lives in src/limiter/ (index.ts: createLimiter; chain.ts: the decision path).
export * from './limiter/index.js'
