// The `express4` alias (Express 4.21) ships no types; it has the same surface the tests use as Express 5.
declare module 'express4' {
  import express from 'express'
  export default express
}
