// The PostgreSQL twin of the algorithms: one table and a few plpgsql functions, generated for a table
// name. `postgresSchemaSql(table)` is what `migrate` runs and what docs/postgres-schema.sql holds for
// the default table (test/stores/postgres/store.test.ts keeps the two equal).
//
// A row is one (policy id, key). Its columns mean what the Lua twins' values mean
// (src/stores/redis/scripts/*.lua), per algorithm:
//   fixed-window            a = window start, b = count
//   sliding-window-counter  a = window start, b = previous, c = current
//   token-bucket            a = level (tokens x windowMs), b = at
//   gcra                    a = TAT in ms, b = TAT remainder (1/limit ms), c = lead (ms the TAT was
//                           ahead of the step that wrote it; 0: not known)
//   sliding-window-log      a = running total before the oldest entry, log = [time1, total1, ...]
//   concurrency             log = [expiresAt1, cost1, ...], ids = [leaseId1, ...]
// A calendar policy's steps (fixed-window, sliding-window-counter) carry `per`, the start of the
// calendar period holding now, with `win` its length and `fol` the next period's; other steps -1
// and, as `fol`, the window.
// state_until: when the state stops meaning anything (ms); blocked_until: when a block ends (ms).
// A row whose both times have passed is dead: decisions read it as empty and cleanup deletes it.
// state_until was computed under the parameters that wrote the row: read under other ones, a state
// never lasts past it (the rules of src/algorithms/*.ts for `endsInMs`).

/** Table names Sluice accepts: `[schema.]name`, lower case, so no quoting can go wrong. */
export const TABLE_NAME = /^(?:[a-z_][a-z0-9_]{0,30}\.)?[a-z_][a-z0-9_]{0,40}$/

/** The table and function names for a validated table name (`app.limits` -> `"app"."limits_apply"`). */
export function schemaNames(table: string): {
  table: string
  fn: (suffix: string) => string
  index: string
  records: string
  recordsVersion: string
} {
  const dot = table.indexOf('.')
  const schema = dot === -1 ? '' : `"${table.slice(0, dot)}".`
  const name = dot === -1 ? table : table.slice(dot + 1)
  return {
    table: `${schema}"${name}"`,
    fn: (suffix) => `${schema}"${name}_${suffix}"`,
    index: `"${name}_expiry"`,
    records: `${schema}"${name}_records"`,
    recordsVersion: `${schema}"${name}_records_version"`,
  }
}

/** Each algorithm and the suffix of its function. */
const ALGORITHM_FUNCTIONS = [
  ['fixed-window', 'fw'],
  ['sliding-window-counter', 'swc'],
  ['token-bucket', 'tb'],
  ['gcra', 'gcra'],
  ['sliding-window-log', 'swl'],
  ['concurrency', 'conc'],
] as const

/** Running totals of the sliding log wrap here: LOG_TOTAL_MODULUS in src/algorithms/sliding-window-log.ts. */
const TOTAL_MODULUS = 549755813888

/**
 * The SQL that creates the table and its functions (idempotent: `CREATE ... IF NOT EXISTS` and
 * `CREATE OR REPLACE`), in one transaction under an advisory lock so processes starting together
 * do not race. `table` must match TABLE_NAME (the store checks it before calling this).
 */
export function postgresSchemaSql(table: string): string {
  if (!TABLE_NAME.test(table)) throw new Error(`postgresSchemaSql: bad table name ${JSON.stringify(table)}`)
  const { table: t, fn, index, records, recordsVersion } = schemaNames(table)
  const fdiv = fn('fdiv')
  const cdiv = fn('cdiv')
  // What every algorithm's function takes and answers: step() calls one of them, by name.
  const algorithmFunction = (suffix: string) =>
    `CREATE OR REPLACE FUNCTION ${fn(suffix)}(r ${t}, lim bigint, win bigint, cap bigint, per bigint,
  fol bigint, cost bigint, lease text, now_ms bigint, peek boolean, refund boolean,
  OUT allowed boolean, OUT remaining bigint, OUT reset_ms bigint, OUT retry_ms bigint, OUT nxt ${t})
LANGUAGE plpgsql AS $$`
  const dispatch = ALGORITHM_FUNCTIONS.map(
    ([name, suffix]) =>
      `    WHEN '${name}' THEN o := ${fn(suffix)}(r, lim, win, cap, per, fol, cost, lease, now_ms, peek OR blocked, refund);`,
  ).join('\n')
  return `-- Sluice PostgreSQL store: table ${table} and its functions.
BEGIN;
SELECT pg_advisory_xact_lock(hashtext('sluice schema ${table}'));

CREATE TABLE IF NOT EXISTS ${t} (
  policy text NOT NULL,
  key bytea NOT NULL,
  a bigint NOT NULL DEFAULT 0,
  b bigint NOT NULL DEFAULT 0,
  c bigint NOT NULL DEFAULT 0,
  log bigint[],
  ids text[],
  state_until bigint NOT NULL DEFAULT 0,
  blocked_until bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (policy, key)
);
-- Cleanup finds dead rows through this index, a batch at a time.
CREATE INDEX IF NOT EXISTS ${index} ON ${t} ((greatest(state_until, blocked_until)));

-- Floor and ceiling division for y > 0 (bigint / truncates towards zero).
CREATE OR REPLACE FUNCTION ${fdiv}(x bigint, y bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN x >= 0 THEN x / y ELSE -((y - 1 - x) / y) END $$;
CREATE OR REPLACE FUNCTION ${cdiv}(x bigint, y bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN x > 0 THEN (x + y - 1) / y ELSE -((-x) / y) END $$;

-- Fixed window, twin of src/algorithms/fixed-window.ts.
${algorithmFunction('fw')}
DECLARE
  start_ms bigint := now_ms;
  cnt bigint := 0;
  fin bigint := now_ms + win;
BEGIN
  -- A calendar window is the period; one opened before the period began counts nothing in it.
  IF per >= 0 THEN start_ms := per; fin := per + win; END IF;
  -- The stored window ends at start + window, or sooner when it was written to (it was opened under
  -- a shorter window). A clock that stepped backwards stays in it: it never opens a fresh one.
  IF least(r.a + win, r.state_until) > now_ms AND r.a >= per THEN
    start_ms := r.a; cnt := r.b; fin := least(r.a + win, r.state_until);
  END IF;
  nxt := r;
  IF refund THEN
    cnt := greatest(0, cnt - cost);
    nxt.a := start_ms; nxt.b := cnt;
    nxt.state_until := CASE WHEN cnt = 0 THEN 0 ELSE fin END;
    RETURN;
  END IF;
  allowed := cnt + cost <= lim;
  IF allowed AND NOT peek THEN cnt := cnt + cost; END IF;
  remaining := greatest(0, lim - cnt);
  -- Never below 0: a calendar period drawn by the client's clock may have ended by the server's.
  retry_ms := CASE WHEN allowed THEN 0 ELSE greatest(0, fin - now_ms) END;
  reset_ms := CASE WHEN cnt > 0 THEN greatest(0, fin - now_ms) ELSE 0 END;
  nxt.a := start_ms; nxt.b := cnt; nxt.state_until := fin;
END $$;

-- Sliding window counter, twin of src/algorithms/sliding-window-counter.ts.
${algorithmFunction('swc')}
DECLARE
  start_ms bigint := ${fdiv}(now_ms, win) * win;
  prev bigint := 0;
  cur bigint := 0;
  elapsed bigint;
  used_after bigint;
  room bigint;
BEGIN
  elapsed := now_ms - start_ms;
  IF per >= 0 THEN
    -- The calendar period (now lies outside it only on a server clock skewed from the client's):
    -- counts of this period (or a later one, the clock having gone back), or the current count of
    -- the period just before, whose state ends with this one.
    start_ms := per;
    elapsed := least(greatest(now_ms - per, 0), win);
    IF r.state_until > now_ms AND r.a >= per THEN
      prev := r.b; cur := r.c;
    ELSIF r.state_until > now_ms AND r.c > 0 AND r.state_until = per + win THEN
      prev := r.c;
    END IF;
  -- Counts of another window length (their state ends elsewhere) mean nothing on this grid.
  ELSIF r.state_until > now_ms AND start_ms < r.a + 2 * win AND r.state_until =
    (CASE WHEN r.c > 0 THEN r.a + 2 * win WHEN r.b > 0 THEN r.a + win ELSE r.a END) THEN
    IF start_ms < r.a THEN
      -- The clock stepped backwards: stay at the start of the stored window.
      start_ms := r.a; prev := r.b; cur := r.c; elapsed := 0;
    ELSIF start_ms = r.a THEN
      prev := r.b; cur := r.c;
    ELSE
      prev := r.c;
    END IF;
  END IF;
  nxt := r;
  nxt.a := start_ms;
  IF refund THEN
    prev := greatest(0, prev - greatest(0, cost - cur));
    cur := greatest(0, cur - cost);
  ELSE
    allowed := prev * (win - elapsed) + cur * win + cost * win <= lim * win;
    retry_ms := 0;
    IF NOT allowed THEN
      retry_ms := start_ms + elapsed - now_ms;
      room := lim - cur - cost;
      IF room >= 0 THEN
        retry_ms := retry_ms + win - elapsed - ${fdiv}(room * win, prev);
      ELSE
        retry_ms := retry_ms + win - elapsed + (fol - ${fdiv}((lim - cost) * fol, cur));
      END IF;
      retry_ms := greatest(0, retry_ms);
    END IF;
    IF allowed AND NOT peek THEN cur := cur + cost; END IF;
    used_after := prev * (win - elapsed) + cur * win;
    remaining := greatest(0, ${fdiv}(lim * win - used_after, win));
    reset_ms := CASE WHEN cur > 0 THEN greatest(0, start_ms - now_ms + win + fol)
      WHEN prev > 0 THEN greatest(0, start_ms - now_ms + win) ELSE 0 END;
  END IF;
  nxt.b := prev; nxt.c := cur;
  nxt.state_until := CASE WHEN cur > 0 THEN start_ms + win + fol WHEN prev > 0 THEN start_ms + win ELSE 0 END;
END $$;

-- Token bucket, twin of src/algorithms/token-bucket.ts.
${algorithmFunction('tb')}
DECLARE
  full_level bigint := cap * win;
  lvl bigint := full_level;
  at_ms bigint := now_ms;
  need bigint := cost * win;
BEGIN
  IF r.state_until > now_ms THEN
    -- A clock that stepped backwards refills nothing and keeps the newest time seen. The level keeps
    -- its number, but the bucket is full no later than the row was written to end (state_until).
    -- Each product is taken only while it stays below what it is compared with, so none overflows.
    at_ms := greatest(now_ms, r.b);
    lvl := r.a;
    IF r.state_until - r.b < ${cdiv}(full_level - lvl, lim) THEN
      lvl := full_level - (r.state_until - r.b) * lim;
    END IF;
    lvl := least(full_level, lvl + least(at_ms - r.b, greatest(0, ${cdiv}(full_level - lvl, lim))) * lim);
  END IF;
  nxt := r;
  IF refund THEN
    lvl := least(full_level, lvl + need);
  ELSE
    allowed := lvl >= need;
    retry_ms := CASE WHEN allowed THEN 0 ELSE at_ms - now_ms + ${cdiv}(need - lvl, lim) END;
    IF allowed AND NOT peek THEN lvl := lvl - need; END IF;
    remaining := ${fdiv}(lvl, win);
    reset_ms := CASE WHEN lvl >= full_level THEN 0 ELSE at_ms - now_ms + ${cdiv}(full_level - lvl, lim) END;
  END IF;
  nxt.a := lvl; nxt.b := at_ms;
  nxt.state_until := CASE WHEN lvl >= full_level THEN 0 ELSE at_ms + ${cdiv}(full_level - lvl, lim) END;
END $$;

-- GCRA, twin of src/algorithms/gcra.ts.
${algorithmFunction('gcra')}
DECLARE
  full_debt bigint := cap * win;
  tat_ms bigint := now_ms;
  tat_rem bigint := 0;
  debt_before bigint;
  debt_after bigint;
  delta bigint := 0;
  total bigint;
  whole bigint;
BEGIN
  IF r.state_until > now_ms THEN
    -- The stored TAT under these parameters: a remainder below the limit, and at most a full refill
    -- of the burst after the step that wrote it (TAT - lead). c * lim > full - rem, without the product.
    tat_ms := r.a; tat_rem := least(r.b, lim - 1);
    IF r.c > 0 AND r.c > ${fdiv}(full_debt - tat_rem, lim) THEN
      tat_ms := tat_ms - r.c + full_debt / lim; tat_rem := full_debt - (full_debt / lim) * lim;
    END IF;
    IF tat_ms < now_ms THEN tat_ms := now_ms; tat_rem := 0; END IF;
  END IF;
  -- How far the TAT is ahead of now, in 1/limit ms (= units spent x window).
  debt_before := (tat_ms - now_ms) * lim + tat_rem;
  debt_after := debt_before;
  IF refund THEN
    delta := -least(debt_before, cost * win);
  ELSE
    allowed := debt_before + cost * win <= full_debt;
    IF allowed AND NOT peek THEN delta := cost * win; debt_after := debt_before + delta; END IF;
    remaining := greatest(0, ${fdiv}(full_debt - debt_after, win));
    reset_ms := ${cdiv}(debt_after, lim);
    retry_ms := CASE WHEN allowed THEN 0 ELSE ${cdiv}(debt_before + cost * win - full_debt, lim) END;
  END IF;
  total := tat_rem + delta;
  whole := ${fdiv}(total, lim);
  nxt := r;
  nxt.a := tat_ms + whole; nxt.b := total - whole * lim;
  -- Its lead: how far it is ahead of now, at most the part within one full refill.
  nxt.c := greatest(0, least(nxt.a - now_ms, ${fdiv}(full_debt - nxt.b, lim)));
  nxt.state_until := CASE WHEN (nxt.a - now_ms) * lim + nxt.b <= 0 AND refund THEN 0
    WHEN nxt.b > 0 THEN nxt.a + 1 ELSE nxt.a END;
END $$;

-- Sliding window log, twin of src/algorithms/sliding-window-log.ts. log = [time1, total1, ...],
-- oldest first; a = the running total before time1; totals wrap at 2^39.
${algorithmFunction('swl')}
DECLARE
  n int := 0;
  first_i int;
  lo int;
  hi int;
  mid int;
  st bigint := 0;
  cnt bigint := 0;
  units bigint;
  at_ms bigint := now_ms;
  newest bigint;
  keep bigint;
  total bigint;
BEGIN
  IF r.state_until > now_ms THEN n := coalesce(array_length(r.log, 1), 0) / 2; END IF;
  first_i := n + 1;
  IF n > 0 AND r.log[2 * n - 1] + win > now_ms THEN
    -- Times are ordered: when the oldest is inside the window all are; else binary search.
    first_i := 1;
    IF r.log[1] + win <= now_ms THEN
      lo := 2; hi := n;
      WHILE lo < hi LOOP
        mid := (lo + hi) / 2;
        IF r.log[2 * mid - 1] + win <= now_ms THEN lo := mid + 1; ELSE hi := mid; END IF;
      END LOOP;
      first_i := lo;
    END IF;
    st := CASE WHEN first_i = 1 THEN r.a ELSE r.log[2 * first_i - 2] END;
    cnt := r.log[2 * n] - st;
    IF cnt < 0 THEN cnt := cnt + ${TOTAL_MODULUS}; END IF;
  END IF;
  nxt := r;
  -- units: how many of the oldest live units must be found (the entry holding the last one is hi).
  IF refund THEN
    keep := cnt - cost;
    IF keep <= 0 THEN nxt.state_until := 0; RETURN; END IF;
    units := keep;
  ELSE
    IF cnt > 0 THEN newest := r.log[2 * n - 1]; at_ms := greatest(now_ms, newest); END IF;
    allowed := cnt + cost <= lim;
    retry_ms := 0;
    IF NOT allowed AND cnt > 0 THEN units := cnt + cost - lim; END IF;
    IF allowed AND NOT peek AND cost > 0 THEN
      IF cnt = 0 THEN
        nxt.a := 0; nxt.log := ARRAY[at_ms, cost];
      ELSE
        total := (r.log[2 * n] + cost) % ${TOTAL_MODULUS};
        nxt.a := st;
        IF r.log[2 * n - 1] = at_ms THEN
          nxt.log := r.log[2 * first_i - 1 : 2 * n - 1] || total;
        ELSE
          nxt.log := r.log[2 * first_i - 1 : 2 * n] || ARRAY[at_ms, total];
        END IF;
      END IF;
      nxt.state_until := at_ms + win;
      cnt := cnt + cost;
      newest := at_ms;
    END IF;
    remaining := greatest(0, lim - cnt);
    -- An entry leaves at its time + window, or when its log was written to end if sooner.
    reset_ms := CASE WHEN newest IS NULL THEN 0 ELSE least(newest + win, nxt.state_until) - now_ms END;
    IF units IS NULL THEN RETURN; END IF;
  END IF;
  -- The live entry holding the units-th oldest live unit: often the oldest live entry itself.
  hi := first_i;
  total := r.log[2 * first_i] - st;
  IF total < 0 THEN total := total + ${TOTAL_MODULUS}; END IF;
  IF total < units THEN
    lo := first_i + 1; hi := n;
    WHILE lo < hi LOOP
      mid := (lo + hi) / 2;
      total := r.log[2 * mid] - st;
      IF total < 0 THEN total := total + ${TOTAL_MODULUS}; END IF;
      IF total >= units THEN hi := mid; ELSE lo := mid + 1; END IF;
    END LOOP;
    hi := least(lo, hi);
  END IF;
  IF refund THEN
    -- Give back the newest units: the entry holding the last unit kept becomes the newest.
    nxt.a := st;
    nxt.log := r.log[2 * first_i - 1 : 2 * hi - 1] || ((st + keep) % ${TOTAL_MODULUS});
    nxt.state_until := least(r.log[2 * hi - 1] + win, r.state_until);
  ELSE
    retry_ms := least(r.log[2 * hi - 1] + win, r.state_until) - now_ms;
  END IF;
END $$;

-- Concurrency, twin of src/algorithms/concurrency.ts. log = [expiresAt1, cost1, ...], ids = lease ids.
${algorithmFunction('conc')}
DECLARE
  n int := 0;
  exps bigint[] := '{}';
  costs bigint[] := '{}';
  names text[] := '{}';
  in_use bigint := 0;
  free_units bigint;
  left_units bigint;
  i int;
  e_ms bigint;
  c_units bigint;
BEGIN
  IF r.state_until > now_ms THEN n := coalesce(array_length(r.ids, 1), 0); END IF;
  FOR i IN 1 .. n LOOP
    IF r.log[2 * i - 1] > now_ms THEN
      exps := exps || r.log[2 * i - 1]; costs := costs || r.log[2 * i]; names := names || r.ids[i];
      in_use := in_use + r.log[2 * i];
    END IF;
  END LOOP;
  n := coalesce(array_length(names, 1), 0);
  nxt := r;
  IF refund THEN
    IF lease <> '' THEN
      FOR i IN REVERSE n .. 1 LOOP
        IF names[i] = lease THEN
          exps := exps[1 : i - 1] || exps[i + 1 :]; costs := costs[1 : i - 1] || costs[i + 1 :];
          names := names[1 : i - 1] || names[i + 1 :];
        END IF;
      END LOOP;
    ELSE
      -- Leases taken by consume share the id '': give back cost units of them, the newest first.
      left_units := cost;
      FOR i IN REVERSE n .. 1 LOOP
        EXIT WHEN left_units <= 0;
        IF names[i] = '' THEN
          IF costs[i] <= left_units THEN
            left_units := left_units - costs[i];
            exps := exps[1 : i - 1] || exps[i + 1 :]; costs := costs[1 : i - 1] || costs[i + 1 :];
            names := names[1 : i - 1] || names[i + 1 :];
          ELSE
            costs[i] := costs[i] - left_units;
            left_units := 0;
          END IF;
        END IF;
      END LOOP;
    END IF;
  ELSE
    allowed := in_use + cost <= lim;
    retry_ms := 0;
    IF NOT allowed THEN
      -- At the latest, enough leases time out: earliest expiries first.
      free_units := lim - in_use;
      FOR e_ms, c_units IN SELECT u.x, u.y FROM unnest(exps, costs) AS u(x, y) ORDER BY u.x LOOP
        free_units := free_units + c_units;
        IF free_units >= cost THEN retry_ms := e_ms - now_ms; EXIT; END IF;
      END LOOP;
    ELSIF NOT peek THEN
      exps := exps || (now_ms + win); costs := costs || cost; names := names || lease;
      in_use := in_use + cost;
    END IF;
    remaining := greatest(0, lim - in_use);
  END IF;
  nxt.log := '{}'; nxt.ids := names;
  nxt.state_until := 0;
  FOR i IN 1 .. coalesce(array_length(names, 1), 0) LOOP
    nxt.log := nxt.log || ARRAY[exps[i], costs[i]];
    nxt.state_until := greatest(nxt.state_until, exps[i]);
  END LOOP;
  reset_ms := greatest(now_ms, nxt.state_until) - now_ms;
END $$;

-- One step of any algorithm on its row, the one place that picks the algorithm's function: a
-- consume or peek (refund false), or cost units given back (refund true); nxt is the row after it.
-- A consume or peek under a block in force is denied with blocked and nothing left: nothing is
-- committed, and it waits for the longer of the block and the units' own wait (a block adds a wait,
-- never shortens one).
CREATE OR REPLACE FUNCTION ${fn('step')}(r ${t}, alg text, lim bigint, win bigint, cap bigint,
  per bigint, fol bigint, cost bigint, lease text, now_ms bigint, peek boolean, refund boolean,
  OUT allowed boolean, OUT remaining bigint, OUT reset_ms bigint, OUT retry_ms bigint,
  OUT blocked boolean, OUT nxt ${t})
LANGUAGE plpgsql AS $$
DECLARE
  o record;
BEGIN
  blocked := NOT refund AND r.blocked_until > now_ms;
  CASE alg
${dispatch}
    ELSE RAISE EXCEPTION 'sluice: unknown algorithm %', alg;
  END CASE;
  IF blocked THEN
    allowed := false; remaining := 0;
    reset_ms := greatest(r.blocked_until - now_ms, o.reset_ms);
    retry_ms := greatest(r.blocked_until - now_ms, o.retry_ms);
    nxt := r;
  ELSE
    allowed := o.allowed; remaining := o.remaining; reset_ms := o.reset_ms; retry_ms := o.retry_ms;
    nxt := o.nxt;
  END IF;
END $$;

-- Lock (consume, refund) or read (peek) the rows of every step, in (policy, key) order so that
-- layered decisions never deadlock. A missing row is inserted empty first (consume), so the step
-- holds its lock; with create false a missing row reads as empty and is not locked.
CREATE OR REPLACE FUNCTION ${fn('load')}(policies text[], keys bytea[], lock_rows boolean, create_missing boolean,
  OUT rows_out ${t}[], OUT created boolean[])
LANGUAGE plpgsql AS $$
DECLARE
  n int := array_length(keys, 1);
  ord int[];
  i int;
  found_row ${t};
  inserted int;
BEGIN
  rows_out := array_fill(NULL::${t}, ARRAY[n]);
  created := array_fill(false, ARRAY[n]);
  IF n = 1 THEN ord := ARRAY[1];
  ELSE SELECT array_agg(u.o ORDER BY u.p, u.k) INTO ord FROM unnest(policies, keys) WITH ORDINALITY AS u(p, k, o);
  END IF;
  FOREACH i IN ARRAY ord LOOP
    LOOP
      IF lock_rows THEN
        SELECT * INTO found_row FROM ${t} WHERE policy = policies[i] AND key = keys[i] FOR UPDATE;
      ELSE
        SELECT * INTO found_row FROM ${t} WHERE policy = policies[i] AND key = keys[i];
      END IF;
      EXIT WHEN FOUND;
      found_row := ROW(policies[i], keys[i], 0, 0, 0, NULL, NULL, 0, 0)::${t};
      EXIT WHEN NOT create_missing;
      INSERT INTO ${t} (policy, key) VALUES (policies[i], keys[i]) ON CONFLICT DO NOTHING;
      GET DIAGNOSTICS inserted = ROW_COUNT;
      IF inserted = 1 THEN created[i] := true; EXIT; END IF;
      -- Another decision inserted it meanwhile: lock (wait for) that row instead.
    END LOOP;
    rows_out[i] := found_row;
  END LOOP;
END $$;

-- Write a step's new state, or delete the row when neither its state nor a block holds any more.
CREATE OR REPLACE FUNCTION ${fn('save')}(r ${t}, now_ms bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF r.state_until <= now_ms AND r.blocked_until <= now_ms THEN
    DELETE FROM ${t} WHERE policy = r.policy AND key = r.key;
  ELSE
    UPDATE ${t} SET a = r.a, b = r.b, c = r.c, log = r.log, ids = r.ids, state_until = r.state_until,
      blocked_until = CASE WHEN r.blocked_until > now_ms THEN r.blocked_until ELSE 0 END
    WHERE policy = r.policy AND key = r.key;
  END IF;
END $$;

CREATE OR REPLACE FUNCTION ${fn('now')}(p_now bigint) RETURNS bigint
LANGUAGE sql VOLATILE AS
$$ SELECT coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) $$;

-- One decision (1..N steps, all or nothing), as apply.lua. Reply: per step allowed (0/1), remaining,
-- resetMs, retryAfterMs, blocked (0/1). p_now is the client's clock, or NULL for the server's.
CREATE OR REPLACE FUNCTION ${fn('apply')}(peek boolean, p_now bigint, policies text[], keys bytea[],
  algs text[], lims bigint[], wins bigint[], caps bigint[], pers bigint[], fols bigint[], costs bigint[],
  leases text[])
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  n int := array_length(keys, 1);
  loaded ${t}[];
  created boolean[];
  nexts ${t}[];
  res bigint[] := '{}';
  ok boolean[];
  all_ok boolean := true;
  now_ms bigint;
  i int;
  r ${t};
  o record;
  found_row boolean;
BEGIN
  IF n = 1 THEN
    -- One step, the common case: the same as below without arrays of rows, load() or save(). A
    -- missing row is inserted with its new state at the end; if another decision inserted it
    -- first, this one starts again on that row.
    LOOP
      IF peek THEN
        SELECT * INTO r FROM ${t} WHERE policy = policies[1] AND key = keys[1];
      ELSE
        SELECT * INTO r FROM ${t} WHERE policy = policies[1] AND key = keys[1] FOR UPDATE;
      END IF;
      found_row := FOUND;
      IF NOT found_row THEN r := ROW(policies[1], keys[1], 0, 0, 0, NULL, NULL, 0, 0)::${t}; END IF;
      now_ms := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
      o := ${fn('step')}(r, algs[1], lims[1], wins[1], caps[1], pers[1], fols[1], costs[1], leases[1], now_ms, peek, false);
      IF peek OR NOT o.allowed THEN
        RETURN ARRAY[o.allowed::int, o.remaining, o.reset_ms, o.retry_ms, o.blocked::int];
      END IF;
      r := o.nxt;
      IF r.state_until <= now_ms AND r.blocked_until <= now_ms THEN
        IF found_row THEN DELETE FROM ${t} WHERE policy = policies[1] AND key = keys[1]; END IF;
        EXIT;
      ELSIF found_row THEN
        UPDATE ${t} SET a = r.a, b = r.b, c = r.c, log = r.log, ids = r.ids, state_until = r.state_until,
          blocked_until = CASE WHEN r.blocked_until > now_ms THEN r.blocked_until ELSE 0 END
        WHERE policy = policies[1] AND key = keys[1];
        EXIT;
      END IF;
      INSERT INTO ${t} (policy, key, a, b, c, log, ids, state_until, blocked_until)
      VALUES (policies[1], keys[1], r.a, r.b, r.c, r.log, r.ids, r.state_until, 0)
      ON CONFLICT DO NOTHING;
      EXIT WHEN FOUND;
    END LOOP;
    RETURN ARRAY[1, o.remaining, o.reset_ms, o.retry_ms, 0];
  END IF;
  SELECT * INTO loaded, created FROM ${fn('load')}(policies, keys, NOT peek, NOT peek);
  -- The clock is read once every row is loaded, so no decision sees a time before one it waited for.
  now_ms := ${fn('now')}(p_now);
  nexts := loaded;
  ok := array_fill(false, ARRAY[n]);
  FOR i IN 1 .. n LOOP
    o := ${fn('step')}(loaded[i], algs[i], lims[i], wins[i], caps[i], pers[i], fols[i], costs[i], leases[i], now_ms, peek, false);
    res := res || ARRAY[o.allowed::int, o.remaining, o.reset_ms, o.retry_ms, o.blocked::int]::bigint[];
    nexts[i] := o.nxt;
    ok[i] := o.allowed;
    all_ok := all_ok AND o.allowed;
  END LOOP;
  IF peek THEN RETURN res; END IF;
  FOR i IN 1 .. n LOOP
    IF all_ok THEN
      PERFORM ${fn('save')}(nexts[i], now_ms);
    ELSE
      IF ok[i] THEN
        -- Nothing is committed: layers that would admit report their state as it is.
        o := ${fn('step')}(loaded[i], algs[i], lims[i], wins[i], caps[i], pers[i], fols[i], costs[i], leases[i], now_ms, true, false);
        res[5 * i - 4 : 5 * i] := ARRAY[1, o.remaining, o.reset_ms, o.retry_ms, 0]::bigint[];
      END IF;
      IF created[i] THEN DELETE FROM ${t} WHERE policy = policies[i] AND key = keys[i]; END IF;
    END IF;
  END LOOP;
  RETURN res;
END $$;

-- Give back cost units of each step (concurrency: release lease). Reply: steps that had state.
CREATE OR REPLACE FUNCTION ${fn('refund')}(p_now bigint, policies text[], keys bytea[],
  algs text[], lims bigint[], wins bigint[], caps bigint[], pers bigint[], fols bigint[], costs bigint[],
  leases text[])
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  loaded ${t}[];
  created boolean[];
  now_ms bigint;
  refunded int := 0;
  i int;
  r ${t};
  o record;
BEGIN
  SELECT * INTO loaded, created FROM ${fn('load')}(policies, keys, true, false);
  now_ms := ${fn('now')}(p_now);
  FOR i IN 1 .. array_length(keys, 1) LOOP
    r := loaded[i];
    IF r.state_until > now_ms THEN
      o := ${fn('step')}(r, algs[i], lims[i], wins[i], caps[i], pers[i], fols[i], costs[i], leases[i], now_ms, false, true);
      PERFORM ${fn('save')}(o.nxt, now_ms);
      refunded := refunded + 1;
    END IF;
  END LOOP;
  RETURN refunded;
END $$;

-- Deny every request for these keys until now + duration; a longer block in place is kept.
CREATE OR REPLACE FUNCTION ${fn('block')}(p_now bigint, duration bigint, policies text[], keys bytea[])
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := ${fn('now')}(p_now);
  i int;
BEGIN
  FOR i IN SELECT u.o FROM unnest(policies, keys) WITH ORDINALITY AS u(p, k, o) ORDER BY u.p, u.k LOOP
    INSERT INTO ${t} AS s (policy, key, blocked_until) VALUES (policies[i], keys[i], now_ms + duration)
    ON CONFLICT (policy, key) DO UPDATE SET blocked_until =
      greatest(CASE WHEN s.blocked_until > now_ms THEN s.blocked_until ELSE 0 END, EXCLUDED.blocked_until);
  END LOOP;
  RETURN now_ms + duration;
END $$;

-- Delete up to batch dead rows (both times at or before before_ms); never waits on a row a decision
-- holds. Reply: rows deleted.
CREATE OR REPLACE FUNCTION ${fn('cleanup')}(before_ms bigint, batch int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  deleted int;
BEGIN
  DELETE FROM ${t} WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM ${t} WHERE greatest(state_until, blocked_until) <= before_ms
    LIMIT batch FOR UPDATE SKIP LOCKED));
  GET DIAGNOSTICS deleted = ROW_COUNT;
  RETURN deleted;
END $$;

-- Records (src/records.ts): per-key overrides and run-time allow and deny lists, one row per
-- (kind, policy, subject). expires_at 0: never. The version row changes with every write, so
-- instances poll it and re-read only when it moved.
CREATE TABLE IF NOT EXISTS ${records} (
  kind text NOT NULL,
  policy text NOT NULL,
  subject bytea NOT NULL,
  value bytea NOT NULL,
  expires_at bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, policy, subject)
);
CREATE TABLE IF NOT EXISTS ${recordsVersion} (
  id int PRIMARY KEY,
  v bigint NOT NULL
);

-- Write one record within the bound of its (kind, policy): reply 1 written, 0 refused. Writes of
-- one (kind, policy) take turns on an advisory lock, so two cannot both pass the bound.
CREATE OR REPLACE FUNCTION ${fn('record_put')}(p_kind text, p_policy text, p_subject bytea,
  p_value bytea, p_ttl bigint, p_now bigint, p_most int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := ${fn('now')}(p_now);
  n int;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('sluice records ${table}'), hashtext(p_kind || ' ' || p_policy));
  IF NOT EXISTS (SELECT 1 FROM ${records} WHERE kind = p_kind AND policy = p_policy AND subject = p_subject) THEN
    DELETE FROM ${records} WHERE kind = p_kind AND policy = p_policy AND expires_at <> 0 AND expires_at <= now_ms;
    SELECT count(*) INTO n FROM ${records} WHERE kind = p_kind AND policy = p_policy;
    IF n >= p_most THEN RETURN 0; END IF;
  END IF;
  INSERT INTO ${records} AS r (kind, policy, subject, value, expires_at)
  VALUES (p_kind, p_policy, p_subject, p_value, CASE WHEN p_ttl IS NULL THEN 0 ELSE now_ms + p_ttl END)
  ON CONFLICT (kind, policy, subject) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at;
  INSERT INTO ${recordsVersion} AS v (id, v) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET v = v.v + 1;
  RETURN 1;
END $$;

-- Remove one record: reply 1 removed, 0 there was none.
CREATE OR REPLACE FUNCTION ${fn('record_delete')}(p_kind text, p_policy text, p_subject bytea) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM ${records} WHERE kind = p_kind AND policy = p_policy AND subject = p_subject;
  IF NOT FOUND THEN RETURN 0; END IF;
  INSERT INTO ${recordsVersion} AS v (id, v) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET v = v.v + 1;
  RETURN 1;
END $$;

COMMIT;
`
}
