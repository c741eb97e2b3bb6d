// Package sluice is net/http middleware that asks a running `sluice serve` for a decision on every
// request (POST /v1/check) and answers a denial with 429, Retry-After, the rate-limit headers and
// the JSON body of Sluice's own adapters. Standard library only (docs/clients.md).
//
//	limit, err := sluice.New(sluice.Options{ServiceURL: "http://127.0.0.1:8080", Policy: "api"})
//	if err != nil { log.Fatal(err) }
//	http.ListenAndServe(":3000", limit(mux))
package sluice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FailMode says what a request gets when the service cannot decide (down, too slow, an error).
type FailMode string

const (
	// FailOpen lets the request through, with no rate-limit headers.
	FailOpen FailMode = "open"
	// FailClosed answers 503 with Retry-After and {"error":"store_unavailable",...}.
	FailClosed FailMode = "closed"
)

// Options configure the middleware; they are checked once, by New.
type Options struct {
	// ServiceURL is where `sluice serve` listens, e.g. "http://127.0.0.1:8080".
	ServiceURL string
	// Policy is a policy name from the service's config.
	Policy string
	// Key names who is asking (a user id, a hash of an API key). Default: the client IP.
	Key func(r *http.Request) string
	// Tier picks a tier of the service's config; "" (or nil) means the default tier.
	Tier func(r *http.Request) string
	// Cost is what one request spends (default 1).
	Cost int
	// FailMode is what to do when the service cannot decide (default FailOpen).
	FailMode FailMode
	// Timeout bounds each call to the service (default 500ms).
	Timeout time.Duration
	// Client makes the calls (default: a client keeping up to 64 idle connections to the service).
	Client *http.Client
	// OnError hears why the service could not decide (default: log.Printf).
	OnError func(r *http.Request, err error)
}

// ErrInvalidOption is wrapped by every error New returns: check with errors.Is.
var ErrInvalidOption = errors.New("sluice: invalid option")

// Decision is the service's answer to POST /v1/check (docs/service.md).
type Decision struct {
	Allowed      bool   `json:"allowed"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	ResetMs      int64  `json:"resetMs"`
	RetryAfterMs int64  `json:"retryAfterMs"`
	Policy       string `json:"policy"`
	Tier         string `json:"tier,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Degraded     bool   `json:"degraded,omitempty"`
}

type checkRequest struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Cost   int    `json:"cost"`
	Tier   string `json:"tier,omitempty"`
}

// The body Sluice's adapters send on a denial (src/http/headers.ts rateLimitBody), field for field.
type denialBody struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	RetryAfter int64  `json:"retry_after"`
	Policy     string `json:"policy"`
}

type limiter struct {
	checkURL string
	opts     Options
}

// New checks the options and returns the middleware.
func New(opts Options) (func(http.Handler) http.Handler, error) {
	base, err := url.Parse(opts.ServiceURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%w: ServiceURL %q is not an http(s) URL, use e.g. http://127.0.0.1:8080", ErrInvalidOption, opts.ServiceURL)
	}
	if opts.Policy == "" {
		return nil, fmt.Errorf("%w: Policy is empty, name a policy of the service's config", ErrInvalidOption)
	}
	if opts.Cost == 0 {
		opts.Cost = 1
	}
	if opts.Cost < 0 {
		return nil, fmt.Errorf("%w: Cost %d is negative, use a whole number above 0", ErrInvalidOption, opts.Cost)
	}
	switch opts.FailMode {
	case "":
		opts.FailMode = FailOpen
	case FailOpen, FailClosed:
	default:
		return nil, fmt.Errorf("%w: FailMode %q, use sluice.FailOpen or sluice.FailClosed", ErrInvalidOption, opts.FailMode)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 500 * time.Millisecond
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout %s is negative", ErrInvalidOption, opts.Timeout)
	}
	if opts.Key == nil {
		opts.Key = ClientIP
	}
	if opts.Client == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxIdleConnsPerHost = 64 // the default 2 would open a connection per request under load
		opts.Client = &http.Client{Transport: transport}
	}
	if opts.OnError == nil {
		opts.OnError = func(r *http.Request, err error) { log.Printf("sluice: %s %s: %v", r.Method, r.URL.Path, err) }
	}
	l := &limiter{checkURL: strings.TrimRight(opts.ServiceURL, "/") + "/v1/check", opts: opts}
	return l.wrap, nil
}

// ClientIP is the default key: the address of the peer, without its port, as "ip:<address>" (the
// name /v1/authz and Sluice's HTTP middleware give an IPv4 client, so they share its budget). Behind
// a proxy, write a Key that reads the proxy's header, and only from the proxy.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return "ip:" + r.RemoteAddr
	}
	return "ip:" + host
}

func (l *limiter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := l.check(r)
		if err != nil {
			l.opts.OnError(r, err)
			if l.opts.FailMode == FailOpen {
				next.ServeHTTP(w, r)
				return
			}
			unavailable(w, l.opts.Policy)
			return
		}
		setHeaders(w.Header(), d, time.Now())
		if !d.Allowed {
			deny(w, d)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// check asks the service; any answer but a 200 with a decision is an error (the fail mode decides).
func (l *limiter) check(r *http.Request) (Decision, error) {
	body := checkRequest{Policy: l.opts.Policy, Key: l.opts.Key(r), Cost: l.opts.Cost}
	if l.opts.Tier != nil {
		body.Tier = l.opts.Tier(r)
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return Decision{}, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), l.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.checkURL, bytes.NewReader(payload))
	if err != nil {
		return Decision{}, err
	}
	req.Header.Set("Content-Type", "application/json") // anything else is 415
	res, err := l.opts.Client.Do(req)
	if err != nil {
		return Decision{}, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return Decision{}, err
	}
	if res.StatusCode != http.StatusOK {
		return Decision{}, fmt.Errorf("the service answered %d: %s", res.StatusCode, bytes.TrimSpace(answer))
	}
	var d Decision
	if err := json.Unmarshal(answer, &d); err != nil {
		return Decision{}, fmt.Errorf("the service's answer is not a decision: %w", err)
	}
	if d.Policy == "" {
		d.Policy = l.opts.Policy
	}
	return d, nil
}

// nonNegative keeps odd numbers out of headers, as the adapters do.
func nonNegative(n int64) int64 {
	if n < 0 {
		return 0
	}
	return n
}

// ceilSeconds turns milliseconds into whole seconds, rounded up.
func ceilSeconds(ms int64) int64 {
	return (nonNegative(ms) + 999) / 1000
}

// retryAfter is the denial's wait in whole seconds, at least 1 (the adapters' Retry-After).
func retryAfter(d Decision) int64 {
	if s := ceilSeconds(d.RetryAfterMs); s > 1 {
		return s
	}
	return 1
}

// sfString quotes a policy name as a Structured Field string (printable ASCII, " and \ escaped).
func sfString(name string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range name {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// setHeaders writes the rate-limit headers the JSON answer allows. The answer has no window, so
// RateLimit-Policy carries q only (`"api";q=20`, the form Sluice's own helper uses for a policy it
// does not know); everything else is what the adapters send. `t` is when a denied request would
// pass (Retry-After), or when an admitted key is back to full (resetMs).
func setHeaders(h http.Header, d Decision, now time.Time) {
	resetMs := nonNegative(d.ResetMs)
	if !d.Allowed {
		resetMs = nonNegative(d.RetryAfterMs)
		if resetMs < 1 {
			resetMs = 1
		}
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(nonNegative(d.Limit), 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(nonNegative(d.Remaining), 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt((now.UnixMilli()+resetMs+999)/1000, 10))
	name := sfString(d.Policy)
	h.Set("RateLimit-Policy", name+";q="+strconv.FormatInt(nonNegative(d.Limit), 10))
	h.Set("RateLimit", name+";r="+strconv.FormatInt(nonNegative(d.Remaining), 10)+";t="+strconv.FormatInt(ceilSeconds(resetMs), 10))
	if !d.Allowed {
		h.Set("Retry-After", strconv.FormatInt(retryAfter(d), 10))
	}
}

func plural(n int64) string {
	if n == 1 {
		return "1 second"
	}
	return strconv.FormatInt(n, 10) + " seconds"
}

// deny answers like the adapters: 429 rate_limit_exceeded, or 503 store_unavailable when a
// `closed` policy's store failed inside the service.
func deny(w http.ResponseWriter, d Decision) {
	wait := retryAfter(d)
	if d.Reason == "store_unavailable" {
		writeJSON(w, http.StatusServiceUnavailable, denialBody{
			Error: "store_unavailable", RetryAfter: wait, Policy: d.Policy,
			Message: "The rate limiter cannot reach its store. Please try again in " + plural(wait) + ".",
		})
		return
	}
	writeJSON(w, http.StatusTooManyRequests, denialBody{
		Error: "rate_limit_exceeded", RetryAfter: wait, Policy: d.Policy,
		Message: "Too many requests. Please try again in " + plural(wait) + ".",
	})
}

// unavailable is the closed fail mode: the service itself could not be asked.
func unavailable(w http.ResponseWriter, policy string) {
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, denialBody{
		Error: "store_unavailable", RetryAfter: 1, Policy: policy,
		Message: "The rate limiter cannot reach its store. Please try again in 1 second.",
	})
}

func writeJSON(w http.ResponseWriter, status int, body denialBody) {
	payload, _ := json.Marshal(body) // four plain fields: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
	w.WriteHeader(status)
	_, _ = w.Write(payload)
}
