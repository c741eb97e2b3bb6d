// A small service limited by Sluice: GET /hello, one policy, keyed on the caller. The tests in
// test/clients/go.test.ts run it against a real `sluice serve`.
//
//	SLUICE_URL=http://127.0.0.1:8080 SLUICE_POLICY=api SLUICE_FAIL_MODE=closed PORT=3000 go run ./cmd/demo
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"sluice.example/ratelimit/sluice"
)

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() {
	limit, err := sluice.New(sluice.Options{
		ServiceURL: env("SLUICE_URL", "http://127.0.0.1:8080"),
		Policy:     env("SLUICE_POLICY", "api"),
		FailMode:   sluice.FailMode(env("SLUICE_FAIL_MODE", "open")),
		// Stand-in for an authenticated user id; without it, the client IP.
		Key: func(r *http.Request) string {
			if user := r.Header.Get("X-User"); user != "" {
				return "user:" + user
			}
			return sluice.ClientIP(r)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	// Outside the limit: what a load balancer probes.
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	limited := http.NewServeMux()
	limited.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"hello":"world"}`)
	})
	mux.Handle("/hello", limit(limited))
	listener, err := net.Listen("tcp", "127.0.0.1:"+env("PORT", "3000"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("demo listening on http://%s\n", listener.Addr())
	log.Fatal(http.Serve(listener, mux))
}
